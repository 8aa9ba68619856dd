// What every route needs: configuration, the model registry and the metrics, passed explicitly.
import { Elysia } from "elysia";
import type { ServerConfig } from "../config";
import type { ResultCache } from "../cache/cache";
import type { Registry } from "../engine/registry";
import type { Metrics } from "../metrics";

export interface ServerContext {
  config: ServerConfig;
  registry: Registry;
  metrics: Metrics;
  /** Per-input result cache (a no-op when --result-cache is off). */
  cache: ResultCache;
  /** Set on SIGTERM/SIGINT: /health answers 503 so load balancers stop sending traffic. */
  shuttingDown: boolean;
  /** HTTP requests accepted and not yet answered: shutdown waits for them. */
  inflight: number;
}

/** OpenAI-style response ids and timestamps. */
export function responseMeta(prefix: string): { id: string; created: number } {
  return { id: `${prefix}-${crypto.randomUUID()}`, created: Math.floor(Date.now() / 1000) };
}

/** Timing headers every inference response carries. */
export function timingHeaders(set: { headers: Record<string, string | number> }, tokenizeMs: number, queueMs: number, inferenceMs: number, totalMs: number): void {
  set.headers["x-tokenization-time-ms"] = tokenizeMs.toFixed(2);
  set.headers["x-queue-time-ms"] = queueMs.toFixed(2);
  set.headers["x-inference-time-ms"] = inferenceMs.toFixed(2);
  set.headers["x-total-time-ms"] = totalMs.toFixed(2);
}

/**
 * Every Elysia instance of the server. `normalize: false` keeps request bodies exactly as sent: Elysia's
 * normalisation would otherwise coerce a string where an array is expected into an array of its characters.
 */
export function router(prefix?: string) {
  return new Elysia({ normalize: false, ...(prefix !== undefined ? { prefix } : {}) });
}

/** OpenAI-style usage: real tokens fed to the model (special tokens in, padding out). */
export function usageOf(encoded: ReadonlyArray<{ ids: ArrayLike<number> }>): { prompt_tokens: number; total_tokens: number } {
  let tokens = 0;
  for (const e of encoded) tokens += e.ids.length;
  return { prompt_tokens: tokens, total_tokens: tokens };
}

/** Usage from per-input token counts (results that came partly from the result cache). */
export function usageOfCounts(counts: readonly number[]): { prompt_tokens: number; total_tokens: number } {
  let tokens = 0;
  for (const n of counts) tokens += n;
  return { prompt_tokens: tokens, total_tokens: tokens };
}

/** x-cache-hits: how many of the request's inputs the result cache answered (only when a cache is configured). */
export function cacheHeader(set: { headers: Record<string, string | number> }, ctx: ServerContext, hits: number): void {
  if (ctx.cache.enabled) set.headers["x-cache-hits"] = String(hits);
}
