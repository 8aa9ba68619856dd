// API stability: the OpenAPI document generated from the route schemas must equal the committed snapshot
// (docs/openapi.json). A change to the API shows up here and has to be committed with a CHANGELOG.md entry and a
// semver bump: UPDATE_OPENAPI=1 npx bun test test/server/openapi.test.ts rewrites the snapshot.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { readFileSync, writeFileSync } from "node:fs";
import { API_VERSION, openApiDocument } from "../../src/server/routes/docs";
import type { ServerContext } from "../../src/server/context";
import { ROOT } from "../helpers";

const SNAPSHOT = join(ROOT, "docs", "openapi.json");

test("the generated OpenAPI document equals the committed snapshot", () => {
  const ctx = { config: { urlPrefix: "", apiKeys: [] } } as unknown as ServerContext;
  const generated = JSON.stringify(openApiDocument(ctx), null, 2) + "\n";
  if (process.env.UPDATE_OPENAPI === "1") writeFileSync(SNAPSHOT, generated);
  const committed = readFileSync(SNAPSHOT, "utf8");
  expect(generated).toBe(committed);
});

test("the API version is package.json's and has a CHANGELOG.md entry", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
  expect(API_VERSION).toBe(pkg.version);
  expect(readFileSync(join(ROOT, "CHANGELOG.md"), "utf8")).toContain(`## ${API_VERSION}`);
});
