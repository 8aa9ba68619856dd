// The limit: onnxruntime-node alone, in this process, no HTTP, no tokenization on the clock. Inputs are
// pre-tokenized, sorted by length and cut into batches (least padding possible), tensors built before timing.
// Batches are cut either by count (N inputs) or by a token budget (as many sorted neighbours as fit in N padded
// tokens); the sweep tries both and the best is the limit.
// Run as a child of bench/run.ts so its peak RSS is measured the same way as the servers'. Prints one JSON line.
//
//   bun bench/limit.ts '<json options>'
import * as ort from "onnxruntime-node";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { makeWorkload, requestTexts, type WorkloadText } from "./workload";
import { percentiles, peakRssMb } from "./stats";
import { sessionOptions } from "../src/model/onnx";

export interface LimitOptions {
  modelDir: string;
  poolSize: number;
  workloadSeed: number;
  threads: number[];
  batchSizes: number[];
  /** Token budgets swept as well: batches of sorted neighbours up to this many padded tokens each. */
  batchTokens: number[];
  /** Inputs per sweep point (batches of the sorted pool at evenly spaced lengths). */
  sweepSample: number;
  /** Inputs for the final measurement at the best setting. */
  finalSample: number;
  /**
   * Passes over each point's batches; the fastest pass counts. Other processes on the machine can only slow a
   * pass down, so the best pass is the steadiest estimate of what the runtime can do.
   */
  passes: number;
  /**
   * After the measurement, stay alive and answer on stdin: a line `k` runs request k of the concurrency-1,
   * 1-input cell once and prints its milliseconds; `again` repeats the final measurement and prints it as JSON;
   * `quit` ends. The harness interleaves these with the servers' cells, so both sides of a ratio see the same
   * machine state.
   */
  serveLatency: boolean;
  /** Skip the sweep: measure threads[0] with this batching only (the harness's fresh child for the final numbers). */
  finalOnly?: Batching;
}

/** How the sorted pool is cut: by count (batchSize > 0) or by a padded-token budget (batchTokens > 0). */
export interface Batching {
  batchSize: number;
  batchTokens: number;
}

export function batchingLabel(b: Batching): string {
  return b.batchTokens > 0 ? `<= ${b.batchTokens} tokens` : `${b.batchSize} input${b.batchSize === 1 ? "" : "s"}`;
}

export interface SweepPoint extends Batching {
  threads: number;
  /** Mean inputs per batch. */
  meanBatch: number;
  tokensPerSec: number;
  inputsPerSec: number;
  paddedFraction: number;
  seconds: number;
}

export interface LimitResult {
  sweep: SweepPoint[];
  best: Batching & { threads: number };
  final: SweepPoint & { batchMs: { p50: number; p95: number; p99: number } };
  peakRssMb: number;
}

export interface Batch {
  feeds: Record<string, ort.Tensor>;
  tokens: number;
  padded: number;
  inputs: number;
}

/**
 * A session with the settings the server uses (src/model/onnx.ts sessionOptions), on the CPU, with the thread
 * count under test, but with onnxruntime's default spinning after a run: back-to-back batches are the limit's
 * case, and it should be measured at its fastest.
 */
export function benchSession(onnxPath: string, threads: number): Promise<ort.InferenceSession> {
  const { extra: _serverOnly, ...options } = sessionOptions("cpu", { device: "cpu", numThreads: threads });
  return ort.InferenceSession.create(onnxPath, options);
}

/** Pre-built feeds of one padded batch (the session's declared inputs only), with its token counts. */
export function makeBatch(texts: readonly WorkloadText[], inputNames: readonly string[]): Batch {
  const b = texts.length;
  let seq = 1;
  let tokens = 0;
  for (const t of texts) {
    seq = Math.max(seq, t.ids.length);
    tokens += t.ids.length;
  }
  const ids = new BigInt64Array(b * seq);
  const mask = new BigInt64Array(b * seq);
  texts.forEach((t, r) => {
    for (let i = 0; i < t.ids.length; i++) {
      ids[r * seq + i] = BigInt(t.ids[i]!);
      mask[r * seq + i] = 1n;
    }
  });
  const all: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor("int64", ids, [b, seq]),
    attention_mask: new ort.Tensor("int64", mask, [b, seq]),
    token_type_ids: new ort.Tensor("int64", new BigInt64Array(b * seq), [b, seq]),
  };
  const feeds: Record<string, ort.Tensor> = {};
  for (const n of inputNames) feeds[n] = all[n]!;
  return { feeds, tokens, padded: b * seq, inputs: b };
}

/**
 * About `sample` inputs as batches of the whole length-sorted pool, taken at evenly spaced positions: each batch
 * holds neighbours in length order (as a full sorted pass would) and every length range is represented.
 */
function sampledBatches(sorted: readonly WorkloadText[], batchSize: number, sample: number): WorkloadText[][] {
  const count = Math.max(1, Math.min(Math.ceil(sample / batchSize), Math.floor(sorted.length / batchSize)));
  const out: WorkloadText[][] = [];
  for (let j = 0; j < count; j++) {
    const start = Math.floor(((j + 0.5) * sorted.length) / count - batchSize / 2);
    const at = Math.max(0, Math.min(sorted.length - batchSize, start));
    out.push(sorted.slice(at, at + batchSize));
  }
  return out;
}

/**
 * The whole sorted pool cut greedily into batches of at most `budget` padded tokens (an input longer than the
 * budget alone), then evenly spaced batches of it holding about `sample` inputs: each length range is
 * represented in proportion to its batches, as in a full pass.
 */
export function tokenBudgetBatches(sorted: readonly WorkloadText[], budget: number, sample: number): WorkloadText[][] {
  const all: WorkloadText[][] = [];
  let cur: WorkloadText[] = [];
  for (const t of sorted) {
    // Sorted ascending: the newcomer is the longest, so the padded size is (count + 1) x its length.
    if (cur.length > 0 && (cur.length + 1) * t.ids.length > budget) {
      all.push(cur);
      cur = [];
    }
    cur.push(t);
  }
  if (cur.length) all.push(cur);
  const perBatch = sorted.length / all.length;
  const count = Math.max(1, Math.min(all.length, Math.round(sample / perBatch)));
  return Array.from({ length: count }, (_, j) => all[Math.min(all.length - 1, Math.floor(((j + 0.5) * all.length) / count))]!);
}

export function batchesFor(sorted: readonly WorkloadText[], b: Batching, sample: number): WorkloadText[][] {
  return b.batchTokens > 0 ? tokenBudgetBatches(sorted, b.batchTokens, sample) : sampledBatches(sorted, b.batchSize, sample);
}

interface PreparedPoint {
  batching: Batching;
  threads: number;
  batches: Batch[];
}

/** Builds a point's tensors and warms its shapes at both ends (allocator arena, kernels) before any timing. */
async function prepare(session: ort.InferenceSession, groups: readonly WorkloadText[][], batching: Batching, threads: number): Promise<PreparedPoint> {
  const batches = groups.map((g) => makeBatch(g, session.inputNames));
  await session.run(batches[0]!.feeds);
  await session.run(batches[batches.length - 1]!.feeds);
  return { batching, threads, batches };
}

/** One timed pass over a point's batches; per-batch milliseconds go to `ms` when given. */
async function onePass(session: ort.InferenceSession, p: PreparedPoint, ms?: number[]): Promise<SweepPoint> {
  let tokens = 0, padded = 0, inputs = 0;
  const t0 = performance.now();
  for (const b of p.batches) {
    const s = performance.now();
    const out = await session.run(b.feeds);
    for (const k in out) out[k]!.dispose?.();
    ms?.push(performance.now() - s);
    tokens += b.tokens;
    padded += b.padded;
    inputs += b.inputs;
  }
  const seconds = (performance.now() - t0) / 1000;
  return { threads: p.threads, ...p.batching, meanBatch: inputs / p.batches.length, tokensPerSec: tokens / seconds, inputsPerSec: inputs / seconds, paddedFraction: 1 - tokens / padded, seconds };
}

/** The fastest of `passes` passes over one point. */
async function measure(session: ort.InferenceSession, groups: readonly WorkloadText[][], batching: Batching, threads: number, passes: number, batchMs?: number[]): Promise<SweepPoint> {
  const p = await prepare(session, groups, batching, threads);
  let best: SweepPoint | null = null;
  let bestMs: number[] = [];
  for (let pass = 0; pass < Math.max(1, passes); pass++) {
    const ms: number[] = [];
    const point = await onePass(session, p, ms);
    if (!best || point.tokensPerSec > best.tokensPerSec) {
      best = point;
      bestMs = ms;
    }
  }
  batchMs?.push(...bestMs);
  return best!;
}

export interface LimitRun {
  result: LimitResult;
  session: ort.InferenceSession;
  pool: WorkloadText[];
  /** Measures the final setting again on the same batches (the harness brackets saturated cells with it). */
  again: () => Promise<SweepPoint>;
}

export async function runLimit(o: LimitOptions, progress: (m: string) => void): Promise<LimitRun> {
  const pool = (await makeWorkload(o.modelDir, o.poolSize, o.workloadSeed)).texts;
  const sorted = pool.slice().sort((a, b) => a.ids.length - b.ids.length);
  const onnx = join(o.modelDir, "onnx", "model.onnx");
  const sessions = new Map<number, ort.InferenceSession>();
  const session = async (threads: number) => {
    let s = sessions.get(threads);
    if (!s) {
      s = await benchSession(onnx, threads);
      sessions.set(threads, s);
    }
    return s;
  };
  const sweep: SweepPoint[] = [];
  const batchings: Batching[] = [
    ...o.batchSizes.map((batchSize) => ({ batchSize, batchTokens: 0 })),
    ...o.batchTokens.map((batchTokens) => ({ batchSize: 0, batchTokens })),
  ];
  for (const threads of o.finalOnly ? [] : o.threads) {
    const s = await session(threads);
    const points: PreparedPoint[] = [];
    for (const b of batchings) points.push(await prepare(s, batchesFor(sorted, b, o.sweepSample), b, threads));
    // Passes go round the points in turn, so a slow spell of the machine hits every point alike; the fastest
    // pass of each point counts.
    const best: SweepPoint[] = [];
    for (let pass = 0; pass < Math.max(1, o.passes); pass++) {
      for (const [i, p] of points.entries()) {
        const r = await onePass(s, p);
        if (!best[i] || r.tokensPerSec > best[i]!.tokensPerSec) best[i] = r;
      }
    }
    for (const p of best) {
      progress(`limit sweep threads=${threads} batch=${batchingLabel(p)}: ${p.tokensPerSec.toFixed(0)} tokens/s (mean batch ${p.meanBatch.toFixed(1)})`);
      sweep.push(p);
    }
  }
  const bestPoint = o.finalOnly ? { threads: o.threads[0]!, ...o.finalOnly } : sweep.reduce((a, b) => (b.tokensPerSec > a.tokensPerSec ? b : a));
  const best = { threads: bestPoint.threads, batchSize: bestPoint.batchSize, batchTokens: bestPoint.batchTokens };
  // Other thread counts' sessions are dropped so the peak RSS reflects one session, as in a server.
  for (const [t, s] of sessions) if (t !== best.threads) { await s.release(); sessions.delete(t); }
  const s = await session(best.threads);
  const batchMs: number[] = [];
  const finalGroups = batchesFor(sorted, best, o.finalSample);
  const finalPoint = await measure(s, finalGroups, best, best.threads, o.passes, batchMs);
  if (o.finalOnly) sweep.push(finalPoint);
  progress(`limit final threads=${best.threads} batch=${batchingLabel(best)}: ${finalPoint.tokensPerSec.toFixed(0)} tokens/s`);
  const pc = percentiles(batchMs);
  const result = { sweep, best, final: { ...finalPoint, batchMs: { p50: pc.p50, p95: pc.p95, p99: pc.p99 } }, peakRssMb: peakRssMb(process.pid) };
  return { result, session: s, pool, again: () => measure(s, finalGroups, best, best.threads, o.passes) };
}

/** One raw run of request k of the 1-input cell (tensors built before the clock starts); milliseconds. */
export async function rawSingle(session: ort.InferenceSession, pool: readonly WorkloadText[], k: number): Promise<number> {
  const b = makeBatch(requestTexts(pool, 1, k), session.inputNames);
  const t0 = performance.now();
  const out = await session.run(b.feeds);
  const ms = performance.now() - t0;
  for (const key in out) out[key]!.dispose?.();
  return ms;
}

if (import.meta.main) {
  const opts = JSON.parse(process.argv[2] ?? readFileSync(0, "utf8")) as LimitOptions;
  const { result, session, pool, again } = await runLimit(opts, (m) => console.error(m));
  process.stdout.write(JSON.stringify(result) + "\n");
  if (opts.serveLatency) {
    for await (const line of console) {
      const cmd = line.trim();
      if (cmd === "quit") break;
      // `again`: the final measurement once more, as a JSON line; a number k: one raw run of input k, in ms.
      if (cmd === "again") process.stdout.write(JSON.stringify(await again()) + "\n");
      else process.stdout.write(`${await rawSingle(session, pool, Number(cmd))}\n`);
    }
  }
  process.exit(0);
}
