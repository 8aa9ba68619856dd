import { describe, expect, test } from "bun:test";
import "../helpers";
import { cacheScope, decodeEntry, encodeEntry, inputKey, ResultCache, SCORE_CODEC, VECTOR_CODEC, CACHE_OP_TIMEOUT_MS } from "../../src/cache/cache";
import { MemoryStore } from "../../src/cache/memory";
import type { ResultStore } from "../../src/cache/store";
import { parseResultCache } from "../../src/config";
import { Metrics } from "../../src/metrics";

const vec = (i: number) => Float32Array.of(i, i + 0.5, -i);

/** A compute function that records which inputs it was asked for. */
function recorder() {
  const calls: number[][] = [];
  const compute = async (missing: number[]) => {
    calls.push(missing);
    return { results: missing.map(vec), tokens: missing.map((i) => 10 + i), queueMs: 1, inferenceMs: 2 };
  };
  return { calls, compute };
}

describe("ResultCache", () => {
  test("per input: only the missing inputs are computed, and results come back in order", async () => {
    const metrics = new Metrics();
    const cache = new ResultCache(new MemoryStore(1 << 20, { evicted: () => {} }), metrics);
    const keys = Array.from({ length: 32 }, (_, i) => `k${i}`);
    const r = recorder();
    const first = await cache.through("m", keys, VECTOR_CODEC, r.compute);
    expect(first.hits).toBe(0);
    const second = await cache.through("m", [...keys.slice(0, 31), "new"], VECTOR_CODEC, r.compute);
    expect(second.hits).toBe(31);
    expect(r.calls[1]).toEqual([31]);
    for (let i = 0; i < 31; i++) expect(Array.from(second.results[i]!)).toEqual(Array.from(vec(i)));
    expect(second.tokens.slice(0, 3)).toEqual([10, 11, 12]);
    expect(second.tokens[31]).toBe(41);
    const all = await cache.through("m", keys.slice(0, 4), VECTOR_CODEC, r.compute);
    expect(all.hits).toBe(4);
    expect(r.calls.length).toBe(2);
    expect(all.inferenceMs).toBe(0);
    expect(metrics.cacheHits.get({ model: "m" })).toBe(35);
    expect(metrics.cacheMisses.get({ model: "m" })).toBe(33);
  });

  test("scores round-trip exactly through float32", async () => {
    const cache = new ResultCache(new MemoryStore(1 << 20, { evicted: () => {} }), null);
    const score = Math.fround(-3.14159);
    await cache.through("m", ["a"], SCORE_CODEC, async () => ({ results: [score], tokens: [5], queueMs: 0, inferenceMs: 0 }));
    const again = await cache.through("m", ["a"], SCORE_CODEC, async () => {
      throw new Error("should hit");
    });
    expect(again.results[0]).toBe(score);
  });

  test("a failing backend degrades to computing, is counted, and is retried later", async () => {
    const metrics = new Metrics();
    let fail = true;
    let recovered = 0;
    const inner = new MemoryStore(1 << 20, { evicted: () => {} });
    const flaky: ResultStore = {
      kind: "flaky",
      get: (k) => (fail ? Promise.reject(new Error("disk full")) : inner.get(k)),
      set: (e) => (fail ? Promise.reject(new Error("disk full")) : inner.set(e)),
      storedBytes: () => null,
      recover: () => void recovered++,
      close: () => {},
    };
    const cache = new ResultCache(flaky, metrics);
    const r = recorder();
    const out = await cache.through("m", ["a", "b"], VECTOR_CODEC, r.compute);
    expect(out.hits).toBe(0);
    expect(Array.from(out.results[1]!)).toEqual(Array.from(vec(1)));
    expect(metrics.cacheErrors.get({ op: "get" })).toBe(1);
    // Within the retry window the backend is not called again.
    await cache.through("m", ["a"], VECTOR_CODEC, r.compute);
    expect(metrics.cacheErrors.get({ op: "get" })).toBe(1);
    fail = false;
    (cache as unknown as { downUntil: number }).downUntil = Date.now() - 1;
    await cache.through("m", ["a"], VECTOR_CODEC, r.compute);
    expect(recovered).toBe(1);
    const hit = await cache.through("m", ["a"], VECTOR_CODEC, r.compute);
    expect(hit.hits).toBe(1);
  });

  test("a hung backend costs at most the operation timeout", async () => {
    const hung: ResultStore = {
      kind: "hung",
      get: () => new Promise(() => {}),
      set: () => new Promise(() => {}),
      storedBytes: () => null,
      close: () => {},
    };
    const metrics = new Metrics();
    const cache = new ResultCache(hung, metrics);
    const t0 = performance.now();
    const out = await cache.through("m", ["a"], VECTOR_CODEC, recorder().compute);
    const ms = performance.now() - t0;
    expect(out.results.length).toBe(1);
    expect(ms).toBeLessThan(CACHE_OP_TIMEOUT_MS * 3);
    expect(metrics.cacheErrors.get({ op: "get" })).toBe(1);
  });

  test("an unreadable entry is a miss, counted", async () => {
    const metrics = new Metrics();
    const store = new MemoryStore(1 << 20, { evicted: () => {} });
    store.set([["a", Uint8Array.of(1, 2, 3)]]);
    const cache = new ResultCache(store, metrics);
    const r = recorder();
    const out = await cache.through("m", ["a"], VECTOR_CODEC, r.compute);
    expect(out.hits).toBe(0);
    expect(r.calls).toEqual([[0]]);
    expect(metrics.cacheErrors.get({ op: "decode" })).toBe(1);
  });

  test("off: everything is computed and nothing is reported", async () => {
    const cache = ResultCache.off();
    expect(cache.enabled).toBe(false);
    const r = recorder();
    const out = await cache.through("m", ["a", "b"], VECTOR_CODEC, r.compute);
    expect(r.calls).toEqual([[0, 1]]);
    expect(out.hits).toBe(0);
  });
});

describe("cache keys and entries", () => {
  test("entries round-trip token counts and any list of float32 / int32 arrays", () => {
    const e = decodeEntry(encodeEntry(77, [Float32Array.of(1.5, -2, 3e-8)]))!;
    expect(e.tokens).toBe(77);
    expect(e.arrays.length).toBe(1);
    expect(e.arrays[0]).toBeInstanceOf(Float32Array);
    expect(Array.from(e.arrays[0]!)).toEqual([1.5, -2, Math.fround(3e-8)]);
    const mixed = decodeEntry(encodeEntry(3, [Int32Array.of(7, -1, 30521), Float32Array.of(0.25, 2), new Float32Array(0)]))!;
    expect(mixed.arrays.map((a) => a.constructor.name)).toEqual(["Int32Array", "Float32Array", "Float32Array"]);
    expect(mixed.arrays.map((a) => Array.from(a))).toEqual([[7, -1, 30521], [0.25, 2], []]);
    expect(decodeEntry(Uint8Array.of(0, 0, 0, 0))).toBeNull();
    // A header promising more than the bytes hold, a trailing word, an unknown element type: not decoded.
    const good = encodeEntry(1, [Float32Array.of(1, 2)]);
    expect(decodeEntry(good.subarray(0, good.byteLength - 4))).toBeNull();
    expect(decodeEntry(Uint8Array.from([...good, 0, 0, 0, 0]))).toBeNull();
    const badType = new Uint8Array(good);
    badType[8] = 9;
    expect(decodeEntry(badType)).toBeNull();
    // A Buffer view into a larger buffer (how Redis replies arrive) decodes only its own bytes.
    const inner = encodeEntry(5, [Float32Array.of(7, 8)]);
    const pool = Buffer.alloc(64, 0xff);
    pool.set(inner, 12);
    const view = pool.subarray(12, 12 + inner.byteLength);
    const d = decodeEntry(view)!;
    expect(d.tokens).toBe(5);
    expect(Array.from(d.arrays[0]!)).toEqual([7, 8]);
  });

  test("codecs refuse arrays of another shape (such an entry is recomputed)", () => {
    expect(VECTOR_CODEC.fromArrays([Int32Array.of(1)])).toBeNull();
    expect(VECTOR_CODEC.fromArrays([Float32Array.of(1), Float32Array.of(2)])).toBeNull();
    expect(SCORE_CODEC.fromArrays([Float32Array.of(1, 2)])).toBeNull();
    expect(SCORE_CODEC.fromArrays(SCORE_CODEC.toArrays(-3.5))).toBe(-3.5);
  });

  test("keys separate scopes, kinds and how an input splits into parts", () => {
    const s1 = cacheScope({ weights: "a@1", pooling: "mean", max_length: 512 });
    const s2 = cacheScope({ weights: "a@1", pooling: "cls", max_length: 512 });
    const s3 = cacheScope({ weights: "a@2", pooling: "mean", max_length: 512 });
    const s4 = cacheScope({ weights: "a@1", pooling: "mean", max_length: 256 });
    expect(new Set([s1, s2, s3, s4]).size).toBe(4);
    expect(cacheScope({ max_length: 512, pooling: "mean", weights: "a@1" })).toBe(s1);
    const keys = [
      inputKey(s1, "text", "query: ", "cats"),
      inputKey(s1, "text", "query: cats", ""),
      inputKey(s1, "text", "", "query: cats"),
      inputKey(s1, "pair", "query: ", "cats"),
      inputKey(s2, "text", "query: ", "cats"),
      inputKey(s1, "image", new TextEncoder().encode("cats")),
      inputKey(s1, "image", "cats"),
    ];
    expect(new Set(keys).size).toBe(keys.length);
    expect(inputKey(s1, "text", "query: ", "cats")).toBe(keys[0]!);
  });
});

describe("--result-cache", () => {
  test("parses each backend and refuses anything else", () => {
    expect(parseResultCache(null, 10)).toBeNull();
    expect(parseResultCache("off", 10)).toBeNull();
    expect(parseResultCache("memory", 10)).toEqual({ backend: { kind: "memory" }, sizeMb: 10 });
    expect(parseResultCache("sqlite:/tmp/r.db", 10)).toEqual({ backend: { kind: "sqlite", path: "/tmp/r.db" }, sizeMb: 10 });
    expect(parseResultCache("sqlite:///tmp/r.db", 10)).toEqual({ backend: { kind: "sqlite", path: "/tmp/r.db" }, sizeMb: 10 });
    expect(parseResultCache("sqlite:rel/r.db", 10)!.backend).toEqual({ kind: "sqlite", path: "rel/r.db" });
    expect(parseResultCache("redis://127.0.0.1:6379", 10)!.backend).toEqual({ kind: "redis", url: "redis://127.0.0.1:6379" });
    expect(() => parseResultCache("sqlite:", 10)).toThrow("needs a file path");
    expect(() => parseResultCache("memcached://x", 10)).toThrow("expected memory, sqlite:PATH or redis://HOST:PORT");
    expect(() => parseResultCache("memory", 0)).toThrow("--result-cache-size-mb");
  });
});
