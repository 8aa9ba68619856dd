import { describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, rmSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import "../helpers";
import { modelCacheScope } from "../../src/cache/scope";
import { readLayout } from "../../src/model/layout";
import { listFolder } from "../../src/model/resolve";
import { fixture } from "../helpers";

function scopeOf(dir: string, source: "local" | "hub" = "local", pooling: "auto" | "cls" = "auto"): string {
  const layout = readLayout(dir, listFolder(dir), "auto", pooling);
  return modelCacheScope("org/model", { dir, source }, layout);
}

describe("modelCacheScope", () => {
  test("changes with the weights file, the pooling and the hub commit; not otherwise", () => {
    const tmp = mkdtempSync(join(tmpdir(), "infinity-scope-"));
    try {
      const dir = join(tmp, "m");
      cpSync(fixture("bert-mean-norm"), dir, { recursive: true });
      const a = scopeOf(dir);
      expect(scopeOf(dir)).toBe(a);
      expect(scopeOf(dir, "local", "cls")).not.toBe(a);
      const later = new Date(Date.now() + 60_000);
      utimesSync(join(dir, "onnx", "model.onnx"), later, later);
      expect(scopeOf(dir)).not.toBe(a);
      // Hub snapshots are named by commit: two replicas with different download folders share a scope.
      const c1 = join(tmp, "one", "snapshots", "abc123");
      const c2 = join(tmp, "two", "snapshots", "abc123");
      const c3 = join(tmp, "two", "snapshots", "def456");
      for (const c of [c1, c2, c3]) cpSync(fixture("bert-mean-norm"), c, { recursive: true });
      expect(scopeOf(c1, "hub")).toBe(scopeOf(c2, "hub"));
      expect(scopeOf(c3, "hub")).not.toBe(scopeOf(c1, "hub"));
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
