// The result cache in front of the engines: per input, keyed by everything that determines a model's raw output
// (the model's scope: repository + commit, ONNX file, dtype, pooling, max length; and the input itself: prompt +
// text, a query/document pair, token ids or media bytes, hashed). Output options applied after the model
// (dimensions, normalisation, encoding, sigmoid/softmax) stay out of the key, so one entry serves them all.
// A failing backend never fails a request: the call is logged, counted, and the inputs are computed.
import { traced, type TraceContext } from "../tracing";
import type { ResultCacheConfig } from "../config";
import { log } from "../log";
import type { Metrics } from "../metrics";
import { MemoryStore } from "./memory";
import { RedisStore } from "./redis";
import { SqliteStore } from "./sqlite";
import type { ResultStore, StoreEvents } from "./store";

/** A backend call taking longer than this counts as failed (a hung Redis must not hold requests). */
export const CACHE_OP_TIMEOUT_MS = 500;
/** After a failure the backend is left alone this long: requests skip it instead of each paying the failure. */
export const CACHE_RETRY_AFTER_MS = 5000;
/** Bumped when the stored value format or key derivation changes, so old entries are never read. */
const KEY_VERSION = "infinity-result-v2";

/** What the engine computed for some inputs: raw results and token counts (usage), one per input. */
export interface Computed<R> {
  results: R[];
  tokens: number[];
  queueMs: number;
  inferenceMs: number;
}

/** The arrays a result is stored as: 4-byte elements, so every array stays aligned in the stored value. */
export type StoredArray = Float32Array | Int32Array;

/**
 * How a task's raw result is stored: as a few typed arrays (a vector; a sparse vector's indices and values; a
 * matrix's shape and data). Each output kind defines its codec beside its task; the cache stores any of them.
 * `fromArrays` answers null for arrays that do not have the codec's shape (the entry is then recomputed).
 */
export interface Codec<R> {
  toArrays(r: R): StoredArray[];
  fromArrays(arrays: StoredArray[]): R | null;
}

const one = <T extends StoredArray>(arrays: StoredArray[], type: new (n: number) => T): T | null =>
  arrays.length === 1 && arrays[0] instanceof type ? (arrays[0] as T) : null;

/** A dense vector (or a classifier's logits): float32, exact for what the sessions return. */
export const VECTOR_CODEC: Codec<Float32Array> = { toArrays: (r) => [r], fromArrays: (a) => one(a, Float32Array) };
/** One score per input (rerank logits, read from float32 outputs, so float32 holds them exactly). */
export const SCORE_CODEC: Codec<number> = {
  toArrays: (r) => [Float32Array.of(r)],
  fromArrays: (a) => {
    const f = one(a, Float32Array);
    return f && f.length === 1 ? f[0]! : null;
  },
};

const FLOAT32 = 1;
const INT32 = 2;

/**
 * Stored value, little-endian uint32 words: token count (usage stays exact on a hit), number of arrays, then per
 * array its element type (1 float32, 2 int32) and length, then the arrays' elements one after another.
 */
export function encodeEntry(tokens: number, arrays: readonly StoredArray[]): Uint8Array {
  const header = 2 + 2 * arrays.length;
  let words = header;
  for (const a of arrays) words += a.length;
  const out = new Uint8Array(words * 4);
  const view = new DataView(out.buffer);
  view.setUint32(0, tokens, true);
  view.setUint32(4, arrays.length, true);
  let at = header * 4;
  arrays.forEach((a, i) => {
    view.setUint32(8 + 8 * i, a instanceof Float32Array ? FLOAT32 : INT32, true);
    view.setUint32(12 + 8 * i, a.length, true);
    out.set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), at);
    at += a.byteLength;
  });
  return out;
}

export function decodeEntry(bytes: Uint8Array): { tokens: number; arrays: StoredArray[] } | null {
  if (bytes.byteLength < 8 || bytes.byteLength % 4 !== 0) return null;
  // A copy (new Uint8Array copies; a Buffer's slice would not): stored bytes may be unaligned views of a larger
  // buffer (Redis replies are Buffers), and callers may change the arrays.
  const copy = new Uint8Array(bytes);
  const view = new DataView(copy.buffer);
  const tokens = view.getUint32(0, true);
  const count = view.getUint32(4, true);
  const header = 2 + 2 * count;
  if (count > 64 || header * 4 > copy.byteLength) return null;
  const arrays: StoredArray[] = [];
  let at = header * 4;
  for (let i = 0; i < count; i++) {
    const type = view.getUint32(8 + 8 * i, true);
    const length = view.getUint32(12 + 8 * i, true);
    if ((type !== FLOAT32 && type !== INT32) || at + length * 4 > copy.byteLength) return null;
    arrays.push(type === FLOAT32 ? new Float32Array(copy.buffer, at, length) : new Int32Array(copy.buffer, at, length));
    at += length * 4;
  }
  return at === copy.byteLength ? { tokens, arrays } : null;
}

function hashParts(parts: ReadonlyArray<string | Uint8Array>): string {
  const h = new Bun.CryptoHasher("sha256");
  for (const p of parts) {
    // Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
    const bytes = typeof p === "string" ? Buffer.from(p, "utf8") : p;
    h.update(`${typeof p === "string" ? "s" : "b"}${bytes.byteLength}:`);
    h.update(bytes);
  }
  return h.digest("hex");
}

/** A model's share of the key: everything about the model that changes its raw output. */
export function cacheScope(parts: Record<string, string | number | boolean | null>): string {
  const keys = Object.keys(parts).sort();
  return hashParts([KEY_VERSION, ...keys.flatMap((k) => [k, String(parts[k])])]);
}

/** The key of one input under a model's scope: kind ("text", "pair", "ids", "image", ...) and its parts. */
export function inputKey(scope: string, kind: string, ...parts: ReadonlyArray<string | Uint8Array>): string {
  return "infinity:" + hashParts([scope, kind, ...parts]);
}

export function openStore(config: ResultCacheConfig, events: StoreEvents): ResultStore {
  const maxBytes = config.sizeMb * 1048576;
  switch (config.backend.kind) {
    case "memory":
      return new MemoryStore(maxBytes, events);
    case "sqlite":
      return new SqliteStore(config.backend.path, maxBytes, events);
    case "redis":
      return new RedisStore(config.backend.url, CACHE_OP_TIMEOUT_MS * 4);
  }
}

function withTimeout<T>(p: Promise<T> | T, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${CACHE_OP_TIMEOUT_MS} ms`)), CACHE_OP_TIMEOUT_MS);
  });
  return Promise.race([Promise.resolve(p), timeout]).finally(() => clearTimeout(timer));
}

export class ResultCache {
  private store: ResultStore | null;
  private downUntil = 0;
  private failedOnce = false;

  constructor(
    store: ResultStore | null,
    private readonly metrics: Metrics | null,
    /** Whether a cache was asked for: responses then carry x-cache-hits, even while its backend is unusable. */
    private readonly configured = store !== null,
  ) {
    this.store = store;
    if (store && metrics) metrics.cacheBytes.set({ backend: store.kind }, () => store.storedBytes() ?? 0);
  }

  /** No cache: every input is computed. */
  static off(): ResultCache {
    return new ResultCache(null, null);
  }

  /** Opens the configured backend; one that cannot be opened is logged and the server runs without a cache. */
  static open(config: ResultCacheConfig | null, metrics: Metrics): ResultCache {
    if (!config) return ResultCache.off();
    const events: StoreEvents = { evicted: (n) => metrics.cacheEvictions.inc({ backend: config.backend.kind }, n) };
    try {
      const store = openStore(config, events);
      log.info("result cache", { backend: config.backend.kind, size_mb: config.backend.kind === "redis" ? undefined : config.sizeMb });
      return new ResultCache(store, metrics);
    } catch (e) {
      metrics.cacheErrors.inc({ op: "open" });
      log.error("result cache cannot be opened; serving without it", { backend: config.backend.kind, error: (e as Error).message });
      return new ResultCache(null, metrics, true);
    }
  }

  get enabled(): boolean {
    return this.configured;
  }

  private failed(op: string, e: unknown): void {
    this.metrics?.cacheErrors.inc({ op });
    this.downUntil = Date.now() + CACHE_RETRY_AFTER_MS;
    // One line per outage, not one per request.
    if (!this.failedOnce) log.error("result cache failed; computing without it", { op, backend: this.store?.kind, error: (e as Error)?.message ?? String(e), retry_in_ms: CACHE_RETRY_AFTER_MS });
    this.failedOnce = true;
  }

  private async usable(): Promise<ResultStore | null> {
    const store = this.store;
    if (!store) return null;
    if (this.downUntil === 0) return store;
    if (Date.now() < this.downUntil) return null;
    try {
      await withTimeout(store.recover?.(), "result cache reconnect");
    } catch (e) {
      this.failed("recover", e);
      return null;
    }
    this.downUntil = 0;
    if (this.failedOnce) log.info("result cache is back", { backend: store.kind });
    this.failedOnce = false;
    return store;
  }

  private async read(keys: string[]): Promise<(Uint8Array | null)[] | null> {
    const store = await this.usable();
    if (!store) return null;
    try {
      return await withTimeout(store.get(keys), "result cache read");
    } catch (e) {
      this.failed("get", e);
      return null;
    }
  }

  private async write(entries: Array<readonly [string, Uint8Array]>): Promise<void> {
    const store = await this.usable();
    if (!store || entries.length === 0) return;
    try {
      await withTimeout(store.set(entries), "result cache write");
    } catch (e) {
      this.failed("set", e);
    }
  }

  /**
   * Results for every input: cached ones from the store, the rest from `compute` (called once, with the indices
   * of the missing inputs, only when some are missing), which are then stored.
   */
  async through<R>(
    model: string, keys: string[], codec: Codec<R>, compute: (missing: number[]) => Promise<Computed<R>>, trace: TraceContext | null = null,
  ): Promise<Computed<R> & { hits: number }> {
    const all = () => keys.map((_, i) => i);
    if (!this.enabled) return { ...(await compute(all())), hits: 0 };
    const stored = (await traced(trace, "cache lookup", { "infinity.cache.keys": keys.length }, () => this.read(keys))) ?? keys.map(() => null);
    const results: R[] = new Array(keys.length);
    const tokens: number[] = new Array(keys.length);
    const missing: number[] = [];
    stored.forEach((bytes, i) => {
      const entry = bytes ? decodeEntry(bytes) : null;
      const result = entry ? codec.fromArrays(entry.arrays) : null;
      if (bytes && result === null) this.metrics?.cacheErrors.inc({ op: "decode" });
      if (entry && result !== null) {
        results[i] = result;
        tokens[i] = entry.tokens;
      } else missing.push(i);
    });
    const hits = keys.length - missing.length;
    this.metrics?.cacheHits.inc({ model }, hits);
    this.metrics?.cacheMisses.inc({ model }, missing.length);
    if (missing.length === 0) return { results, tokens, queueMs: 0, inferenceMs: 0, hits };
    const computed = await compute(missing);
    const entries: Array<readonly [string, Uint8Array]> = [];
    missing.forEach((index, j) => {
      results[index] = computed.results[j]!;
      tokens[index] = computed.tokens[j]!;
      entries.push([keys[index]!, encodeEntry(computed.tokens[j]!, codec.toArrays(computed.results[j]!))]);
    });
    await traced(trace, "cache store", { "infinity.cache.keys": entries.length }, () => this.write(entries));
    return { results, tokens, queueMs: computed.queueMs, inferenceMs: computed.inferenceMs, hits };
  }

  async close(): Promise<void> {
    try {
      await this.store?.close();
    } catch {
      // closing a broken backend has nothing left to report
    }
    this.store = null;
  }
}
