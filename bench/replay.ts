// A deterministic replay of the single-text saturation cell: the server's real Engine (queue, batcher, runner
// dispatch) driven on a virtual clock by closed-loop clients, with a runner whose run time follows a cost model
// (fixed ms + ms per padded token) instead of onnxruntime. Nothing here depends on the machine's speed or load, so
// padding share, batch sizes and the modelled throughput of two batch policies compare exactly, run to run.
//
//   bun bench/replay.ts [--concurrency 32] [--requests 4000] [--fixed-ms 3] [--ms-per-token 0.11] [--client-ms 1]
//                       [--batch-size 32] [--batch-tokens 512] [--run-overhead-tokens 24] [--instances 1]
//                       [--engine-root DIR]   (replay another checkout's src/engine/engine.ts, e.g. main before a change)
//
// Lengths come from the benchmark's seeded workload (bench/workload.ts, the texts `bun run bench` sends); request k
// carries text k of the pool, one text per request, as in the 1-input cells.
import { join, resolve } from "node:path";
import { ensureBenchModel, REPO_ROOT } from "./model";
import { lengthStats, makeWorkload } from "./workload";

export interface ReplayOptions {
  /** Token length of each text; request k sends lengths[k % lengths.length]. */
  lengths: readonly number[];
  concurrency: number;
  requests: number;
  /** Run time of a batch: fixedMs + msPerToken x rows x longest row (a CPU pads every row to the longest). */
  fixedMs: number;
  msPerToken: number;
  /** Time from a client's answer to its next input reaching the engine (HTTP, JSON, tokenizing). */
  clientMs: number;
  maxBatchSize: number;
  maxBatchTokens: number;
  runOverheadTokens: number;
  /** Runners the engine dispatches to (session instances); an engine that takes one runner only gets the first. */
  instances: number;
}

export interface ReplayResult {
  requests: number;
  batches: number;
  meanBatch: number;
  realTokens: number;
  paddedTokens: number;
  /** Padding tokens over padded tokens run. */
  paddingFraction: number;
  /** Virtual seconds from the first request to the last answer. */
  seconds: number;
  /** Real tokens per virtual second: the throughput the cost model gives this batch policy. */
  tokensPerSec: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** The constructor of src/engine/engine.ts's Engine, in the shape every version of it accepts (its parameter types
 * differ between versions, hence `any`). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type EngineLike = new (name: string, runner: any, input: any, limits: any, metrics: null) => {
  start(): void;
  submit(inputs: readonly number[]): Promise<unknown>;
};

/** A virtual clock: callbacks at virtual times, run in time order (ties in scheduling order). */
class Clock {
  now = 0;
  private events: Array<{ t: number; seq: number; fn: () => void }> = [];
  private seq = 0;
  at(t: number, fn: () => void): void {
    this.events.push({ t, seq: this.seq++, fn });
  }
  /** Runs events until none is left; after each, every promise continuation it set off settles first. */
  async run(): Promise<void> {
    while (this.events.length > 0) {
      let k = 0;
      for (let i = 1; i < this.events.length; i++) {
        const a = this.events[i]!, b = this.events[k]!;
        if (a.t < b.t || (a.t === b.t && a.seq < b.seq)) k = i;
      }
      const e = this.events.splice(k, 1)[0]!;
      this.now = e.t;
      e.fn();
      await new Promise<void>((r) => setImmediate(r));
    }
  }
}

export async function replay(EngineClass: EngineLike, o: ReplayOptions): Promise<ReplayResult> {
  const clock = new Clock();
  let batches = 0, rows = 0, realTokens = 0, paddedTokens = 0;
  const runner = {
    run(lengths: number[]): Promise<number[]> {
      const max = Math.max(...lengths);
      batches++;
      rows += lengths.length;
      for (const l of lengths) realTokens += l;
      paddedTokens += lengths.length * max;
      // N instances split the cores: each run takes N times as long (a rough model; onnxruntime does not scale
      // perfectly with threads, which is the case for instances).
      const ms = (o.fixedMs + o.msPerToken * lengths.length * max) * Math.max(1, o.instances);
      return new Promise((done) => clock.at(clock.now + ms, () => done(lengths.map(() => 0))));
    },
  };
  // Inputs are their lengths; a batch is the list of its lengths.
  const input = {
    lengthOf: (l: number) => l,
    assemble: (ls: number[]) => ({ tensors: ls, padded: ls.length * Math.max(...ls) }),
  };
  const runners = Array.from({ length: Math.max(1, o.instances) }, () => runner);
  const limits = { maxBatchSize: o.maxBatchSize, maxBatchTokens: o.maxBatchTokens, maxQueueSize: 1_000_000, runOverheadTokens: o.runOverheadTokens };
  // Engines before instances took one runner; an array there would be called as a runner and fail loudly.
  const engine = new EngineClass("replay", o.instances > 1 ? runners : runner, input, limits, null);
  engine.start();
  const latencies: number[] = [];
  let next = 0;
  const client = () => {
    if (next >= o.requests) return;
    const k = next++;
    const sent = clock.now;
    void engine.submit([o.lengths[k % o.lengths.length]!]).then(() => {
      latencies.push(clock.now - sent);
      clock.at(clock.now + o.clientMs, client);
    });
  };
  for (let c = 0; c < o.concurrency; c++) clock.at(c * 0.01, client);
  await clock.run();
  latencies.sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
  const seconds = clock.now / 1000;
  return {
    requests: latencies.length, batches, meanBatch: rows / batches, realTokens, paddedTokens,
    paddingFraction: 1 - realTokens / paddedTokens, seconds, tokensPerSec: realTokens / seconds,
    p50Ms: q(0.5), p99Ms: q(0.99), maxMs: latencies[latencies.length - 1] ?? 0,
  };
}

export const DEFAULT_REPLAY: Omit<ReplayOptions, "lengths"> = {
  concurrency: 32, requests: 4000, fixedMs: 3, msPerToken: 0.11, clientMs: 1,
  maxBatchSize: 32, maxBatchTokens: 512, runOverheadTokens: 24, instances: 1,
};

if (import.meta.main) {
  const o: Omit<ReplayOptions, "lengths"> = { ...DEFAULT_REPLAY };
  let engineRoot = REPO_ROOT;
  const flags: Record<string, keyof typeof o> = {
    "--concurrency": "concurrency", "--requests": "requests", "--fixed-ms": "fixedMs", "--ms-per-token": "msPerToken",
    "--client-ms": "clientMs", "--batch-size": "maxBatchSize", "--batch-tokens": "maxBatchTokens",
    "--run-overhead-tokens": "runOverheadTokens", "--instances": "instances",
  };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const [name, inline] = argv[i]!.split("=", 2) as [string, string | undefined];
    const value = inline ?? argv[++i];
    if (value === undefined) throw new Error(`${name} needs a value`);
    if (name === "--engine-root") engineRoot = resolve(value);
    else if (flags[name]) o[flags[name]!] = Number(value);
    else throw new Error(`unknown option ${name}`);
  }
  const pool = (await makeWorkload(ensureBenchModel({ log: (m) => console.error(m) }), 2048, 12345)).texts;
  const { Engine } = (await import(join(engineRoot, "src", "engine", "engine.ts"))) as { Engine: EngineLike };
  const s = lengthStats(pool);
  const r = await replay(Engine, { ...o, lengths: pool.map((t) => t.ids.length) });
  console.log(`engine: ${engineRoot}`);
  console.log(`workload: ${pool.length} texts, tokens min ${s.min} p50 ${s.p50} mean ${s.mean.toFixed(1)} p90 ${s.p90} max ${s.max}`);
  console.log(`model: ${o.fixedMs} ms + ${o.msPerToken} ms/padded token per run; client ${o.clientMs} ms; concurrency ${o.concurrency}; ` +
    `batch size ${o.maxBatchSize}, token budget ${o.maxBatchTokens}, run overhead ${o.runOverheadTokens} tokens, ${o.instances} instance(s)`);
  console.log(`requests ${r.requests}, batches ${r.batches}, mean batch ${r.meanBatch.toFixed(2)} inputs`);
  console.log(`tokens: real ${r.realTokens}, padded ${r.paddedTokens}, padding ${(100 * r.paddingFraction).toFixed(1)}%`);
  console.log(`modelled throughput ${r.tokensPerSec.toFixed(0)} tokens/s over ${r.seconds.toFixed(2)} virtual s; latency p50 ${r.p50Ms.toFixed(1)} p99 ${r.p99Ms.toFixed(1)} max ${r.maxMs.toFixed(1)} ms`);
}
