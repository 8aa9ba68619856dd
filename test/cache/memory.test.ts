import { describe, expect, test } from "bun:test";
import { MemoryStore } from "../../src/cache/memory";

const bytes = (n: number, fill = 1) => new Uint8Array(n).fill(fill);

describe("MemoryStore", () => {
  test("returns stored values and null for misses, in key order", () => {
    const store = new MemoryStore(1 << 20, { evicted: () => {} });
    store.set([["a", bytes(4, 1)], ["b", bytes(4, 2)]]);
    const [b, missing, a] = store.get(["b", "x", "a"]);
    expect(b![0]).toBe(2);
    expect(missing).toBeNull();
    expect(a![0]).toBe(1);
  });

  test("evicts the least recently used entries past its byte bound and reports them", () => {
    let evicted = 0;
    // Each entry: 1-char key + 1000 bytes + overhead; room for three.
    const store = new MemoryStore(3 * (1 + 1000 + 96), { evicted: (n) => (evicted += n) });
    store.set([["a", bytes(1000)], ["b", bytes(1000)], ["c", bytes(1000)]]);
    expect(evicted).toBe(0);
    store.get(["a"]); // a is now the most recently used
    store.set([["d", bytes(1000)]]);
    expect(evicted).toBe(1);
    expect(store.get(["a", "b", "c", "d"]).map((v) => v !== null)).toEqual([true, false, true, true]);
    expect(store.storedBytes()).toBeLessThanOrEqual(3 * (1 + 1000 + 96));
    expect(store.size).toBe(3);
  });

  test("replacing a key does not count it twice", () => {
    const store = new MemoryStore(1 << 20, { evicted: () => {} });
    store.set([["k", bytes(100)]]);
    const once = store.storedBytes();
    store.set([["k", bytes(100)]]);
    expect(store.storedBytes()).toBe(once);
  });
});
