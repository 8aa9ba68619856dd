import { describe, expect, test } from "bun:test";
import "../helpers";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteStore } from "../../src/cache/sqlite";

const none = { evicted: () => {} };

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "infinity-sqlite-"));
}

describe("SqliteStore", () => {
  test("keeps entries across close and reopen", () => {
    const dir = tempDir();
    try {
      const path = join(dir, "results.db");
      const a = new SqliteStore(path, 1 << 20, none);
      a.set([["k1", Uint8Array.of(1, 2, 3, 4)], ["k2", Uint8Array.of(5, 6, 7, 8)]]);
      const bytes = a.storedBytes();
      a.close();
      const b = new SqliteStore(path, 1 << 20, none);
      expect(b.storedBytes()).toBe(bytes);
      const [k1, k2, k3] = b.get(["k1", "k2", "k3"]);
      expect(Array.from(k1!)).toEqual([1, 2, 3, 4]);
      expect(Array.from(k2!)).toEqual([5, 6, 7, 8]);
      expect(k3).toBeNull();
      b.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("stays within its byte bound, evicting the least recently used", () => {
    const dir = tempDir();
    try {
      let evicted = 0;
      const limit = 20_000;
      const store = new SqliteStore(join(dir, "r.db"), limit, { evicted: (n) => (evicted += n) });
      const value = new Uint8Array(1000);
      store.set([["first", value]]);
      for (let i = 0; i < 40; i++) {
        store.get(["first"]); // kept recently used
        store.set([[`k${i}`, value]]);
      }
      expect(evicted).toBeGreaterThan(15);
      expect(store.storedBytes()).toBeLessThanOrEqual(limit);
      expect(store.get(["first"])[0]).not.toBeNull();
      expect(store.get(["k0"])[0]).toBeNull();
      expect(store.get(["k39"])[0]).not.toBeNull();
      store.close();
      // The bound holds in the file, not just in the counter.
      const reopened = new SqliteStore(join(dir, "r.db"), limit, none);
      expect(reopened.storedBytes()).toBeLessThanOrEqual(limit);
      reopened.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a corrupt file is moved aside and a fresh cache starts", () => {
    const dir = tempDir();
    try {
      const path = join(dir, "results.db");
      writeFileSync(path, Buffer.alloc(8192, 0x5a));
      const store = new SqliteStore(path, 1 << 20, none);
      store.set([["k", Uint8Array.of(9, 9, 9, 9)]]);
      expect(Array.from(store.get(["k"])[0]!)).toEqual([9, 9, 9, 9]);
      store.close();
      expect(readdirSync(dir).some((f) => f.startsWith("results.db.corrupt-"))).toBe(true);
      expect(existsSync(path)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
