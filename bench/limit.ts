// The limit: onnxruntime-node alone, in this process, no HTTP, no tokenization on the clock. Inputs are
// pre-tokenized, sorted by length and cut into batches (least padding possible), tensors built before timing.
// Run as a child of bench/run.ts so its peak RSS is measured the same way as the servers'. Prints one JSON line.
//
//   bun bench/limit.ts '<json options>'
import * as ort from "onnxruntime-node";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { makeWorkload, requestTexts, type WorkloadText } from "./workload";
import { percentiles, peakRssMb } from "./stats";

export interface LimitOptions {
  modelDir: string;
  poolSize: number;
  workloadSeed: number;
  threads: number[];
  batchSizes: number[];
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
   * After the measurement, stay alive and answer raw single-input latency questions on stdin: a line `k` runs
   * request k of the concurrency-1, 1-input cell once and prints its milliseconds; `quit` ends. The harness
   * interleaves these with requests to a server, so both sides of target (b) see the same machine state.
   */
  serveLatency: boolean;
  /** Skip the sweep: measure threads[0] x batchSizes[0] only (the harness's fresh child for the final numbers). */
  finalOnly?: boolean;
}

export interface SweepPoint {
  threads: number;
  batchSize: number;
  tokensPerSec: number;
  inputsPerSec: number;
  paddedFraction: number;
  seconds: number;
}

export interface LimitResult {
  sweep: SweepPoint[];
  best: { threads: number; batchSize: number };
  final: SweepPoint & { batchMs: { p50: number; p95: number; p99: number } };
  peakRssMb: number;
}

interface Batch {
  feeds: Record<string, ort.Tensor>;
  tokens: number;
  padded: number;
  inputs: number;
}

function makeBatch(texts: readonly WorkloadText[], inputNames: readonly string[]): Batch {
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

async function measure(session: ort.InferenceSession, groups: readonly WorkloadText[][], batchSize: number, threads: number, passes: number, batchMs?: number[]): Promise<SweepPoint> {
  const batches = groups.map((g) => makeBatch(g, session.inputNames));
  // Warm the shapes at both ends (allocator arena, kernels) before timing.
  await session.run(batches[0]!.feeds);
  await session.run(batches[batches.length - 1]!.feeds);
  let best: SweepPoint | null = null;
  let bestMs: number[] = [];
  for (let pass = 0; pass < Math.max(1, passes); pass++) {
    let tokens = 0, padded = 0, inputs = 0;
    const ms: number[] = [];
    const t0 = performance.now();
    for (const b of batches) {
      const s = performance.now();
      const out = await session.run(b.feeds);
      for (const k in out) out[k]!.dispose?.();
      ms.push(performance.now() - s);
      tokens += b.tokens;
      padded += b.padded;
      inputs += b.inputs;
    }
    const seconds = (performance.now() - t0) / 1000;
    const point = { threads, batchSize, tokensPerSec: tokens / seconds, inputsPerSec: inputs / seconds, paddedFraction: 1 - tokens / padded, seconds };
    if (!best || point.tokensPerSec > best.tokensPerSec) {
      best = point;
      bestMs = ms;
    }
  }
  batchMs?.push(...bestMs);
  return best!;
}

export async function runLimit(o: LimitOptions, progress: (m: string) => void): Promise<{ result: LimitResult; session: ort.InferenceSession; pool: WorkloadText[] }> {
  const pool = makeWorkload(o.modelDir, o.poolSize, o.workloadSeed).texts;
  const sorted = pool.slice().sort((a, b) => a.ids.length - b.ids.length);
    const onnx = join(o.modelDir, "onnx", "model.onnx");
  const sessions = new Map<number, ort.InferenceSession>();
  const session = async (threads: number) => {
    let s = sessions.get(threads);
    if (!s) {
      // The same settings src/model/session.ts uses, with the thread count under test.
      s = await ort.InferenceSession.create(onnx, {
        executionProviders: ["cpu"],
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: "sequential",
        graphOptimizationLevel: "all",
        enableCpuMemArena: true,
        enableMemPattern: true,
      });
      sessions.set(threads, s);
    }
    return s;
  };
  const sweep: SweepPoint[] = [];
  for (const threads of o.finalOnly ? [] : o.threads) {
    const s = await session(threads);
    for (const batchSize of o.batchSizes) {
      const p = await measure(s, sampledBatches(sorted, batchSize, o.sweepSample), batchSize, threads, o.passes);
      progress(`limit sweep threads=${threads} batch=${batchSize}: ${p.tokensPerSec.toFixed(0)} tokens/s`);
      sweep.push(p);
    }
  }
  const bestPoint = o.finalOnly ? { threads: o.threads[0]!, batchSize: o.batchSizes[0]! } : sweep.reduce((a, b) => (b.tokensPerSec > a.tokensPerSec ? b : a));
  const best = { threads: bestPoint.threads, batchSize: bestPoint.batchSize };
  // Other thread counts' sessions are dropped so the peak RSS reflects one session, as in a server.
  for (const [t, s] of sessions) if (t !== best.threads) { await s.release(); sessions.delete(t); }
  const s = await session(best.threads);
  const batchMs: number[] = [];
  const finalPoint = await measure(s, sampledBatches(sorted, best.batchSize, o.finalSample), best.batchSize, best.threads, o.passes, batchMs);
  if (o.finalOnly) sweep.push(finalPoint);
  progress(`limit final threads=${best.threads} batch=${best.batchSize}: ${finalPoint.tokensPerSec.toFixed(0)} tokens/s`);
  const pc = percentiles(batchMs);
  const result = { sweep, best, final: { ...finalPoint, batchMs: { p50: pc.p50, p95: pc.p95, p99: pc.p99 } }, peakRssMb: peakRssMb(process.pid) };
  return { result, session: s, pool };
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
  const { result, session, pool } = await runLimit(opts, (m) => console.error(m));
  process.stdout.write(JSON.stringify(result) + "\n");
  if (opts.serveLatency) {
    for await (const line of console) {
      const cmd = line.trim();
      if (cmd === "quit") break;
      process.stdout.write(`${await rawSingle(session, pool, Number(cmd))}\n`);
    }
  }
  process.exit(0);
}
