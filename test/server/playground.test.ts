// GET / serves the playground page and its two files from inside the server; POST / stays the HF Inference route.
// The page names no other host; under --url-prefix it calls the prefixed API; with --api-key the page itself is
// public (like /docs) while the API it calls is not. The page's behaviour in a browser: playground-browser.test.ts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { RunningServer } from "../../src/server/serve";
import { fixture, postJson, ROOT, startTestServer } from "../helpers";

const SOURCE = join(ROOT, "src", "server", "playground");
let plain: RunningServer;
let prefixed: RunningServer;

beforeAll(async () => {
  [plain, prefixed] = await Promise.all([
    startTestServer({ "model-id": fixture("bert-classify"), "served-model-name": "classifier" }),
    startTestServer({ "model-id": fixture("bert-classify"), "served-model-name": "classifier", "url-prefix": "/api", "api-key": "k1" }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([plain?.shutdown(), prefixed?.shutdown()]);
});

/** The src/href values of a page. */
const refsOf = (html: string) => [...html.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1]!);

describe("GET / (playground)", () => {
  test("the page and its files come from the server, byte for byte the sources, and name no other host", async () => {
    const res = await fetch(`${plain.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const csp = res.headers.get("content-security-policy")!;
    for (const rule of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'"]) expect(csp).toContain(rule);
    const html = await res.text();
    expect(html).toContain('<meta name="infinity-api-base" content="">');
    expect(html).toMatch(/infinity <small>\d+\.\d+\.\d+<\/small> playground/);
    expect(html).not.toContain("{{");
    const refs = refsOf(html);
    expect(refs).toEqual(expect.arrayContaining(["playground/playground.css", "playground/playground.js", "docs", "openapi.json"]));
    for (const ref of refs) {
      if (ref.startsWith("data:")) continue;
      expect(ref).not.toMatch(/^([a-z]+:)?\/\//i);
      expect((await fetch(new URL(ref, `${plain.url}/`))).status).toBe(200);
    }
    for (const [file, type] of [["playground.js", "text/javascript; charset=utf-8"], ["playground.css", "text/css; charset=utf-8"]] as const) {
      const asset = await fetch(`${plain.url}/playground/${file}`);
      expect(asset.headers.get("content-type")).toBe(type);
      const text = await asset.text();
      expect(text).toBe(await Bun.file(join(SOURCE, file)).text());
      // No URL of any other host, no CSS import or url() to fetch.
      expect(text).not.toMatch(/\bhttps?:\/\/|@import|url\(/);
    }
    expect(html.replace(/<meta name="infinity-api-base"[^>]*>/, "")).not.toMatch(/\bhttps?:\/\//);
  });

  test("GET /favicon.ico is the playground's icon (an SVG), which the playground and /docs link to", async () => {
    const res = await fetch(`${plain.url}/favicon.ico`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("image/");
    const svg = await res.text();
    expect(svg).toBe(await Bun.file(join(SOURCE, "favicon.svg")).text());
    expect(svg).toStartWith("<svg");
    expect(await (await fetch(`${plain.url}/`)).text()).toContain('<link rel="icon" href="favicon.ico"');
    expect(await (await fetch(`${plain.url}/docs`)).text()).toContain('<link rel="icon" href="favicon.ico"');
    // Public like the page and /docs, also with --api-key, and not an API route in the OpenAPI document.
    expect((await fetch(`${prefixed.url}/favicon.ico`)).status).toBe(200);
    const doc = (await (await fetch(`${plain.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).some((p) => p.includes("favicon"))).toBe(false);
  });

  test("POST / is still the HF Inference route", async () => {
    const res = await postJson(`${plain.url}/`, { inputs: "hello" });
    expect(res.status).toBe(200);
    expect(res.json[0].map((l: { label: string }) => l.label).sort()).toEqual(["negative", "neutral", "positive"]);
    // And GET on an API path is still a 404 in the one error shape.
    const missing = await fetch(`${plain.url}/classify`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toBeString();
  });

  test("HEAD / and HEAD of its files answer their headers without a body; other paths and methods on / are 404s in the one error shape, never a 5xx", async () => {
    const head = await fetch(`${plain.url}/`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(head.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(await head.text()).toBe("");
    const headJs = await fetch(`${plain.url}/playground/playground.js`, { method: "HEAD" });
    expect(headJs.status).toBe(200);
    expect(headJs.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    // A query string or a doubled slash still gets the page (its relative links resolve to the same files).
    for (const path of ["/?model=x", "//"]) expect((await fetch(`${plain.url}${path}`)).status).toBe(200);
    expect((await fetch(`${plain.url}//playground/playground.js`)).status).toBe(200);

    // No static file tree behind the page: index.html, the folder, other names, escapes, are all unknown routes.
    const unknown: Array<[string, string]> = [
      ["GET", "/index.html"],
      ["HEAD", "/index.html"],
      ["GET", "/playground"],
      ["GET", "/playground/"],
      ["GET", "/playground/index.html"],
      ["GET", "/playground/nope.js"],
      ["GET", "/playground/playground.js.map"],
      ["GET", "/playground/%2e%2e/package.json"],
      ["GET", "/playground/..%2fpackage.json"],
      ["GET", "/src/server/playground/playground.js"],
      ["GET", "/robots.txt"],
      ["GET", "/static/app.js"],
      ["PUT", "/"],
      ["DELETE", "/"],
      ["PATCH", "/"],
      ["POST", "/playground/playground.js"],
    ];
    for (const [method, path] of unknown) {
      const res = await fetch(`${plain.url}${path}`, { method });
      expect([method, path, res.status]).toEqual([method, path, 404]);
      if (method === "HEAD") continue;
      expect(res.headers.get("content-type")).toStartWith("application/json");
      const body = (await res.json()) as { error: Record<string, unknown> };
      expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
      expect(body.error.code).toBe("not_found");
    }

    // POST / is the HF Inference route: bodies it cannot read are 4xx in the one error shape.
    const bad: Array<[string, string | undefined, string | undefined]> = [
      ["not json", "application/json", "{inputs"],
      ["text/plain", "text/plain", "hello"],
      ["empty JSON body", "application/json", ""],
      ["no body, no type", undefined, undefined],
      ["JSON null", "application/json", "null"],
      ["JSON array", "application/json", "[1,2]"],
      ["inputs an object", "application/json", '{"inputs": {"a": 1}}'],
      ["html form", "application/x-www-form-urlencoded", "inputs=hello"],
    ];
    for (const [name, type, body] of bad) {
      const res = await fetch(`${plain.url}/`, { method: "POST", headers: type ? { "content-type": type } : {}, body });
      const text = await res.text();
      expect([name, res.status >= 400 && res.status < 500]).toEqual([name, true]);
      expect(Object.keys((JSON.parse(text) as { error: Record<string, unknown> }).error).sort()).toEqual(["code", "message", "param", "type"]);
    }
    // The server still serves the page and the route.
    expect((await fetch(`${plain.url}/`)).status).toBe(200);
    expect((await postJson(`${plain.url}/`, { inputs: "hello" })).status).toBe(200);
  });

  test("--url-prefix: the page stays at / and calls the prefixed API; --api-key: the page is public, the API is not", async () => {
    const res = await fetch(`${prefixed.url}/`);
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain('<meta name="infinity-api-base" content="api/">');
    expect((await fetch(`${prefixed.url}/playground/playground.js`)).status).toBe(200);
    // The page joins the base with "models", relative to /.
    const models = new URL("api/models", `${prefixed.url}/`);
    expect((await fetch(models)).status).toBe(401);
    const ok = await fetch(models, { headers: { authorization: "Bearer k1" } });
    expect(ok.status).toBe(200);
    expect((await postJson(`${prefixed.url}/api/`, { inputs: "hello" }, { authorization: "Bearer k1" })).status).toBe(200);
  });
});
