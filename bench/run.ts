// The benchmark: the limit (onnxruntime alone), a naive transformers.js server and this server, same model, same
// thread setting, same seeded workload, in one run. Writes bench/results/{results.md,results.json,chart.png}.
//
//   bun run bench                 full run (about 15 minutes on 2 cores)
//   bun run bench --quick         smoke run (1-2 minutes)
//   options: --out DIR  --cell-seconds S  --threads N (skip the thread sweep's choice)  --systems naive,server
//            --server-arg=--flag --server-arg=value (extra flags for this server, repeatable)  --wait-quiet S
//            --label TEXT (noted in the results, e.g. which server flags are being tried)
//            --server-root DIR (run src/cli.ts of another checkout, e.g. a patched copy, for A/B comparisons)
//            --latency-only (diagnostic: only the interleaved concurrency-1 latency pairs of target (b), with this
//            server's timing breakdown; prints the table, writes nothing)
//            --variant int8 (the dynamically quantized model instead of fp32; results go to bench/results/int8/)
//            --responsiveness-only (only the responsiveness cells of bench/responsiveness.ts: /health latency and a
//            second model's latency while one model runs back-to-back long batches; prints the table, writes
//            nothing; with --server-root, the same cells for another checkout, e.g. the code before a change)
//            --responsiveness-seconds S (length of each of their phases; default 10, 3 with --quick)
//            --saturation-only (only the single-text saturation cell: 1-input requests at --concurrency, 32 by
//            default, for --rounds rounds (3), this server's tokens/s, mean batch, padding share and RSS; prints a
//            table, writes nothing) with --compare-root DIR and/or --compare-arg X (repeatable): a second server
//            (another checkout, other flags) up at the same time, its cells alternating with the first's;
//            --saturation-size N (inputs per request, 1 by default) and --limit-tokens T (also time onnxruntime
//            alone on sorted batches of <= T tokens after every cell: each cell's ratio to the faster limit around it)
//            --memory-only (only the memory cell of bench/memory.ts: RSS of a server after one request of 64 x 512
//            tokens, with --server-arg flags; prints the table, writes nothing)
//            --instances N (a third system: this server with --instances N --num-threads 1, held to N one-thread
//            onnxruntime sessions at once; the instances decision's table compares both configurations)
// A server whose flags hold --instances N (N > 1) is held to the N-session limit (bench/limit-sessions.ts), the
// defaults to the one-session limit (bench/limit.ts); bench/instances.ts says which.
import { mkdirSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg, totalmem } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { drawChart, type ChartSeries } from "./chart";
import { batchingLabel, type LimitOptions, type LimitResult, type SweepPoint } from "./limit";
import { ensureBenchModel, MODEL_NAME, REPO_ROOT, type Variant } from "./model";
import { OtherLoad as ServerOtherLoad } from "../src/engine/cpu-load";
import { medianInterval, percentiles, peakRssMb, rssMb } from "./stats";
import { measureResponsiveness, responsivenessMarkdown, twoModelArgs, type ResponsivenessResult } from "./responsiveness";
import { measureMemory, memoryMarkdown, type MemoryResult } from "./memory";
import { startSystem, stop, type Running, type SystemName } from "./system";
import { decisionMarkdown, decisionRows, instancesArgs, limitFor, type DecisionConfig, type DecisionRow } from "./instances";
import { SessionsLimit, sessionsLabel, type SessionsLimitResult } from "./limit-sessions";
import { lengthStats, makeWorkload, requestTexts, type WorkloadText } from "./workload";
import { Lines } from "./process";

// ---------------------------------------------------------------- options

interface Options {
  quick: boolean;
  out: string;
  cellSeconds: number;
  threads: number | null;
  systems: SystemName[];
  serverArgs: string[];
  waitQuiet: number;
  label: string;
  latencyOnly: boolean;
  serverRoot: string;
  variant: Variant;
  responsivenessOnly: boolean;
  responsivenessSeconds: number;
  saturationOnly: boolean;
  memoryOnly: boolean;
  concurrency: number;
  rounds: number;
  /** --saturation-only: inputs per request (1: the single-text cell). */
  saturationSize: number;
  /** --saturation-only: also time the limit (onnxruntime alone, sorted batches of <= this many tokens) around each cell. */
  limitTokens: number;
  compareRoot: string | null;
  compareArgs: string[];
  /** > 1: also run this server with --instances N --num-threads 1 against N single-thread sessions at once. */
  instances: number;
}

function parseOptions(argv: string[]): Options {
  const o: Options = {
    quick: false,
    out: "",
    cellSeconds: 0,
    threads: null,
    systems: ["naive", "server"],
    serverArgs: [],
    waitQuiet: 60,
    label: "",
    latencyOnly: false,
    serverRoot: REPO_ROOT,
    variant: "fp32",
    responsivenessOnly: false,
    responsivenessSeconds: 0,
    saturationOnly: false,
    memoryOnly: false,
    concurrency: 32,
    rounds: 3,
    saturationSize: 1,
    limitTokens: 0,
    compareRoot: null,
    compareArgs: [],
    instances: 0,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = () => {
      const eq = a.indexOf("=");
      if (eq >= 0) return a.slice(eq + 1);
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    const name = a.split("=")[0];
    if (name === "--quick") o.quick = true;
    else if (name === "--out") o.out = resolve(value());
    else if (name === "--cell-seconds") o.cellSeconds = Number(value());
    else if (name === "--threads") o.threads = Number(value());
    else if (name === "--systems") o.systems = value().split(",").filter(Boolean) as SystemName[];
    else if (name === "--server-arg") o.serverArgs.push(value());
    else if (name === "--wait-quiet") o.waitQuiet = Number(value());
    else if (name === "--label") o.label = value();
    else if (name === "--latency-only") o.latencyOnly = true;
    else if (name === "--server-root") o.serverRoot = resolve(value());
    else if (name === "--responsiveness-only") o.responsivenessOnly = true;
    else if (name === "--responsiveness-seconds") o.responsivenessSeconds = Number(value());
    else if (name === "--saturation-only") o.saturationOnly = true;
    else if (name === "--memory-only") o.memoryOnly = true;
    else if (name === "--concurrency") o.concurrency = Number(value());
    else if (name === "--rounds") o.rounds = Number(value());
    else if (name === "--saturation-size") o.saturationSize = Number(value());
    else if (name === "--limit-tokens") o.limitTokens = Number(value());
    else if (name === "--compare-root") o.compareRoot = resolve(value());
    else if (name === "--compare-arg") o.compareArgs.push(value());
    else if (name === "--instances") o.instances = Number(value());
    else if (name === "--variant") {
      const v = value();
      if (v !== "fp32" && v !== "int8") throw new Error(`--variant is fp32 or int8, not ${v}`);
      o.variant = v;
    }
    else throw new Error(`unknown option ${a}`);
  }
  if (!o.cellSeconds) o.cellSeconds = o.quick ? 4 : 20;
  if (!o.responsivenessSeconds) o.responsivenessSeconds = o.quick ? 3 : 10;
  o.out ||= join(REPO_ROOT, "bench", "results", ...(o.variant === "fp32" ? [] : [o.variant]));
  return o;
}

const POOL_SIZE = 2048;
const WORKLOAD_SEED = 12345;
const SIZES = [1, 32];

function plan(o: Options) {
  return {
    concurrency: o.quick ? (o.instances > 1 ? [1, 4, 16, 32] : [1, 4, 16]) : [1, 4, 16, 32, 64],
    /**
     * Quick runs skip 32-input requests at concurrency 16: one wave of 512 inputs alone takes ~15-30 s. Single
     * inputs also run at concurrency 32: the single-text saturation cell (retrieval-style texts, one per request,
     * 32 clients) that the inference-worker issue (#13) measures against the limit.
     */
    concurrencyFor: (size: number) => {
      const cs = o.quick && size > 1 ? [1, 4] : o.quick ? [1, 4, 16] : size === 1 ? [1, 4, 16, 32, 64] : [1, 4, 16, 64];
      // --instances: the decision's two cells (1 input x 32 clients, 32 inputs x 16 clients) run even when quick.
      if (o.instances > 1 && o.quick) cs.push(size === 1 ? 32 : 16);
      return cs;
    },
    maxRequests: (size: number) => (size === 1 ? (o.quick ? 300 : 2000) : o.quick ? 40 : 200),
    limit: {
      modelDir: "",
      poolSize: POOL_SIZE,
      workloadSeed: WORKLOAD_SEED,
      threads: o.latencyOnly ? [o.threads ?? 2] : [1, 2],
      batchSizes: o.latencyOnly ? [8] : o.quick ? [8, 32] : [1, 4, 8, 16, 32, 64],
      batchTokens: o.latencyOnly ? [] : o.quick ? [512] : [256, 512, 1024, 2048],
      sweepSample: o.latencyOnly ? 16 : o.quick ? 48 : 128,
      finalSample: o.latencyOnly ? 16 : o.quick ? 64 : 256,
      passes: o.latencyOnly ? 1 : 2,
      serveLatency: true,
    } satisfies LimitOptions,
    /** Inputs (requests 0..n-1 of the 1-input cell) and passes of the interleaved raw/server latency pairs. */
    pairedInputs: o.quick ? 30 : 200,
    pairedPasses: o.quick ? 2 : 3,
  };
}

const log = (m: string) => console.error(`[bench] ${m}`);

// ---------------------------------------------------------------- CPU accounting (others' load on the machine)

/** CPU use by processes other than ours (in cores), between start() and stop() (src/engine/cpu-load.ts; 0 off Linux). */
export class OtherLoad extends ServerOtherLoad {
  override stop(): number {
    return super.stop() ?? 0;
  }
}

async function waitQuiet(maxSeconds: number): Promise<number> {
  const probe = new OtherLoad(() => [process.pid]);
  const until = performance.now() + maxSeconds * 1000;
  let load = 0;
  for (;;) {
    probe.start();
    await Bun.sleep(2000);
    load = probe.stop();
    if (load < 0.15 || performance.now() > until) return load;
    log(`other processes use ${load.toFixed(2)} cores; waiting for a quiet machine (up to ${maxSeconds} s)`);
  }
}

// ---------------------------------------------------------------- processes

/** The limit child: prints its result line, then stays up to answer raw single-input latency questions. */
class LimitChild {
  private readonly proc: Subprocess<"pipe", "pipe", "inherit">;
  private readonly lines: Lines;

  constructor(opts: LimitOptions) {
    this.proc = Bun.spawn([process.execPath, join(REPO_ROOT, "bench", "limit.ts"), JSON.stringify(opts)], { stdin: "pipe", stdout: "pipe", stderr: "inherit", cwd: REPO_ROOT });
    this.lines = new Lines(this.proc, "limit child");
  }

  get pid(): number {
    return this.proc.pid;
  }

  async result(): Promise<LimitResult> {
    return JSON.parse(await this.lines.next()) as LimitResult;
  }

  /** One raw onnxruntime run of request k of the 1-input cell, in ms. */
  async raw(k: number): Promise<number> {
    this.proc.stdin.write(`${k}\n`);
    this.proc.stdin.flush();
    return Number(await this.lines.next());
  }

  /** The final measurement once more (same batches, same passes), now. */
  async again(): Promise<SweepPoint> {
    this.proc.stdin.write("again\n");
    this.proc.stdin.flush();
    return JSON.parse(await this.lines.next()) as SweepPoint;
  }

  async quit(): Promise<void> {
    this.proc.stdin.write("quit\n");
    this.proc.stdin.end();
    await this.proc.exited;
  }
}

// ---------------------------------------------------------------- load generator

export interface Cell {
  system: string;
  size: number;
  concurrency: number;
  requests: number;
  errors: number;
  firstError: string | null;
  seconds: number;
  inputsPerSec: number;
  tokensPerSec: number;
  p50: number;
  p95: number;
  p99: number;
  peakRssMb: number;
  otherLoadCores: number;
  /** From this server's /metrics over the cell: batches run, mean inputs per batch, share of padded tokens. */
  batches: number | null;
  meanBatch: number | null;
  paddingFraction: number | null;
  /**
   * Saturated cells (concurrency >= 16) only: the limit's tokens/s measured again right before and right after
   * the cell (the faster of the two), so a ratio to it is not skewed by the machine's speed drifting during the run.
   */
  limitNearby: number | null;
}

/** Sums of the Prometheus series this harness reads (all label sets added up); null if /metrics is absent. */
async function scrape(url: string): Promise<Record<string, number> | null> {
  try {
    const res = await fetch(`${url}/metrics`);
    if (!res.ok) return null;
    const out: Record<string, number> = {};
    for (const line of (await res.text()).split("\n")) {
      const m = line.match(/^(infinity_(?:batch_size_sum|batch_size_count|batch_tokens_sum|tokens_total))(?:\{[^}]*\})?\s+([0-9.eE+-]+)$/);
      if (m) out[m[1]!] = (out[m[1]!] ?? 0) + Number(m[2]);
    }
    return out;
  } catch {
    return null;
  }
}

const MODEL_FIELD = "bench-model";

function body(texts: readonly WorkloadText[]): string {
  return JSON.stringify({ model: MODEL_FIELD, input: texts.map((t) => t.text), encoding_format: "base64" });
}

/** Checks one response's shape: one base64 float32 vector of the model's width per input. */
function checkResponse(json: unknown, size: number): string | null {
  const data = (json as { data?: Array<{ embedding?: unknown }> }).data;
  if (!Array.isArray(data) || data.length !== size) return `expected ${size} embeddings, got ${Array.isArray(data) ? data.length : "none"}`;
  const e = data[0]!.embedding;
  if (typeof e !== "string" || Buffer.from(e, "base64").length !== 384 * 4) return "embedding is not 384 base64 float32 values";
  return null;
}

export async function runCell(system: string, url: string, pool: readonly WorkloadText[], size: number, concurrency: number, maxRequests: number, maxSeconds: number, pid: number, load: OtherLoad): Promise<Cell> {
  const lat: number[] = [];
  let next = 0, tokens = 0, inputs = 0, errors = 0, checked = false;
  let firstError: string | null = null;
  const m0 = await scrape(url);
  load.start();
  const t0 = performance.now();
  const deadline = t0 + maxSeconds * 1000;
  // In-flight requests finish after the deadline (a saturated cell is one full wave at least); a hard cap stops
  // a stuck server from hanging the run.
  const hardStop = AbortSignal.timeout(Math.max(180, maxSeconds * 6) * 1000);
  let tEnd = t0;
  const worker = async () => {
    while (next < maxRequests && performance.now() < deadline) {
      const k = next++;
      const texts = requestTexts(pool, size, k);
      const payload = body(texts);
      const s = performance.now();
      try {
        const res = await fetch(`${url}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: payload, signal: hardStop });
        const text = await res.text();
        const ms = performance.now() - s;
        if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${text.slice(0, 200)}`);
        if (!checked) {
          checked = true;
          const bad = checkResponse(JSON.parse(text), size);
          if (bad) throw new Error(bad);
        }
        lat.push(ms);
        for (const t of texts) tokens += t.ids.length;
        inputs += size;
        tEnd = performance.now();
      } catch (e) {
        errors++;
        firstError ??= (e as Error).message;
        if (hardStop.aborted) return;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const other = load.stop();
  const m1 = m0 ? await scrape(url) : null;
  const d = (k: string) => (m0 && m1 ? (m1[k] ?? 0) - (m0[k] ?? 0) : NaN);
  const batches = d("infinity_batch_size_count");
  const seconds = (tEnd - t0) / 1000;
  const pc = percentiles(lat);
  return {
    system, size, concurrency, requests: lat.length, errors, firstError, seconds,
    inputsPerSec: inputs / seconds, tokensPerSec: tokens / seconds, ...pc,
    peakRssMb: peakRssMb(pid), otherLoadCores: other,
    batches: Number.isFinite(batches) ? batches : null,
    meanBatch: Number.isFinite(batches) && batches > 0 ? d("infinity_batch_size_sum") / batches : null,
    paddingFraction: Number.isFinite(batches) && batches > 0 ? 1 - d("infinity_tokens_total") / d("infinity_batch_tokens_sum") : null,
    limitNearby: null,
  };
}

/**
 * The pause on each side of a latency pair. onnxruntime's idle pool threads keep spinning for ~30-40 ms after a
 * run (measured: about one core stays busy 20 ms after a run, ~0.4 cores on average over the 100 ms after it), so
 * a shorter pause lets one process's spinning threads slow the other's run.
 */
const PAIR_PAUSE_MS = Number(process.env.BENCH_PAIR_PAUSE_MS ?? 60);

export interface Paired {
  system: string;
  /** Client round trip minus one raw run on the same input, per pair (ms). */
  diffs: number[];
  medianDiff: number;
  /** 95% confidence interval of medianDiff (one pair's difference spreads over several ms: two onnxruntime runs). */
  medianDiffLo: number;
  medianDiffHi: number;
  medianClient: number;
  medianRaw: number;
  /** From this server's timing headers: engine inference minus raw, and route total minus inference (ms). */
  medianInferenceMinusRaw: number | null;
  medianRouteMinusInference: number | null;
  medianClientMinusRoute: number | null;
}

/**
 * Target (b), measured interleaved: for each input, one raw run in the limit child, then one request to the
 * server (concurrency 1), so slow drifts of the machine hit both sides alike.
 */
async function pairedLatency(system: string, url: string, limit: LimitChild, pool: readonly WorkloadText[], inputs: number, passes: number): Promise<Paired> {
  const diffs: number[] = [], clients: number[] = [], raws: number[] = [], infMinusRaw: number[] = [], routeMinusInf: number[] = [], clientMinusRoute: number[] = [];
  for (let pass = 0; pass < passes; pass++) {
    for (let k = 0; k < inputs; k++) {
      const raw = await limit.raw(k);
      // A pause on each side: onnxruntime's idle pool threads spin for a moment after a run, and must not steal
      // the other process's cores.
      await Bun.sleep(PAIR_PAUSE_MS);
      const payload = body(requestTexts(pool, 1, k));
      const t0 = performance.now();
      const res = await fetch(`${url}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: payload });
      await res.text();
      const client = performance.now() - t0;
      await Bun.sleep(PAIR_PAUSE_MS);
      diffs.push(client - raw);
      clients.push(client);
      raws.push(raw);
      const inf = res.headers.get("x-inference-time-ms"), total = res.headers.get("x-total-time-ms");
      if (inf !== null && total !== null) {
        infMinusRaw.push(Number(inf) - raw);
        routeMinusInf.push(Number(total) - Number(inf));
        clientMinusRoute.push(client - Number(total));
      }
    }
  }
  const m = (xs: number[]) => (xs.length ? median(xs) : null);
  const ci = medianInterval(diffs);
  return {
    system, diffs, medianDiff: median(diffs), medianDiffLo: ci.lo, medianDiffHi: ci.hi, medianClient: median(clients), medianRaw: median(raws),
    medianInferenceMinusRaw: m(infMinusRaw), medianRouteMinusInference: m(routeMinusInf), medianClientMinusRoute: m(clientMinusRoute),
  };
}

// ---------------------------------------------------------------- systems

const SYSTEM_LABEL: Record<string, string> = {
  limit: "limit (onnxruntime alone)",
  naive: "naive (Bun.serve + transformers.js)",
  server: "infinity (this server)",
  instances: "infinity --instances N --num-threads 1",
};

async function embedOne(url: string, text: string): Promise<Float32Array> {
  const res = await fetch(`${url}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL_FIELD, input: [text], encoding_format: "base64" }) });
  const json = (await res.json()) as { data: Array<{ embedding: string }> };
  const buf = Buffer.from(json.data[0]!.embedding, "base64");
  return new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
}

/** The responsiveness cells on a server of its own that serves the model under two names. */
async function responsiveness(o: Options, modelDir: string, pool: readonly WorkloadText[], threads: number): Promise<ResponsivenessResult> {
  log(`responsiveness: starting a two-model server (${threads} thread(s) per model)`);
  const r = await startSystem("server", modelDir, threads, [...twoModelArgs(modelDir), ...o.serverArgs], o.serverRoot);
  try {
    const res = await measureResponsiveness(o.serverRoot === REPO_ROOT ? "infinity" : `infinity (${o.serverRoot})`, r.url, pool, o.responsivenessSeconds);
    log(`responsiveness: /health p50 ${res.health.p50.toFixed(1)} p99 ${res.health.p99.toFixed(1)} max ${res.health.max.toFixed(1)} ms over ${res.health.polls} polls; other model p50 ${res.other.idleP50.toFixed(1)} ms idle, ${res.other.busyP50.toFixed(1)} ms busy (${res.other.ratio.toFixed(2)}x); busy model ${res.busy.tokensPerSec.toFixed(0)} tokens/s`);
    return res;
  } finally {
    await stop(r);
  }
}

// ---------------------------------------------------------------- report

const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : "-");
const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "-");
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "-");

function median(xs: number[]): number {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : NaN;
}

interface Ratios {
  /** limit: the limit measured around the best cell; limitAtStart / ratioAtStart: against the run's first measurement. */
  saturated: { server: number; limit: number; ratio: number; limitAtStart: number; ratioAtStart: number; target: number; cell: string };
  overheadMs: { paired: number; pairedLo: number; pairedHi: number; serverP50: number; rawP50: number; target: number; pairs: number; naivePaired: number | null };
  /** ratio: raw tokens/s ratio; adjusted: each side divided by the limit measured around its own cell first. */
  vsNaive: Array<{ size: number; server: number; naive: number; ratio: number; adjusted: number }>;
  vsNaiveTarget: number;
}

/** A cell's tokens/s over the limit measured around it (its system's first limit measurement when not bracketed). */
function relative(c: Cell, atStart: (system: string) => number): number {
  return c.tokensPerSec / (c.limitNearby ?? atStart(c.system));
}

/** limitAtStart: the first measurement of the limit a system is held to (one session, or N for --instances N). */
function computeRatios(cells: Cell[], limitAtStart: (system: string) => number, paired: Paired[]): Ratios {
  const limit = limitAtStart;
  // Saturated cells are the bracketed ones; a run without them (--quick of another shape) falls back to all.
  const all = cells.filter((c) => c.system === "server");
  const server = all.some((c) => c.limitNearby !== null) ? all.filter((c) => c.limitNearby !== null) : all;
  const best = server.reduce<Cell | null>((a, c) => (!a || relative(c, limit) > relative(a, limit) ? c : a), null);
  const ps = paired.find((x) => x.system === "server");
  const pn = paired.find((x) => x.system === "naive");
  const vsNaive = SIZES.map((size) => {
    const s = cells.find((c) => c.system === "server" && c.size === size && c.concurrency === 16);
    const n = cells.find((c) => c.system === "naive" && c.size === size && c.concurrency === 16);
    const ratio = (s?.tokensPerSec ?? NaN) / (n?.tokensPerSec ?? NaN);
    const adjusted = s && n ? relative(s, limit) / relative(n, limit) : NaN;
    return { size, server: s?.tokensPerSec ?? NaN, naive: n?.tokensPerSec ?? NaN, ratio, adjusted };
  });
  return {
    saturated: {
      server: best?.tokensPerSec ?? NaN,
      limit: best?.limitNearby ?? limitAtStart("server"),
      ratio: best ? relative(best, limit) : NaN,
      limitAtStart: limitAtStart("server"),
      ratioAtStart: (best?.tokensPerSec ?? NaN) / limitAtStart("server"),
      target: 0.9,
      cell: best ? `${best.size} input(s) x concurrency ${best.concurrency}` : "-",
    },
    overheadMs: {
      paired: ps?.medianDiff ?? NaN,
      pairedLo: ps?.medianDiffLo ?? NaN,
      pairedHi: ps?.medianDiffHi ?? NaN,
      serverP50: ps?.medianClient ?? NaN,
      rawP50: ps?.medianRaw ?? NaN,
      target: 2,
      pairs: ps?.diffs.length ?? 0,
      naivePaired: pn?.medianDiff ?? null,
    },
    vsNaive,
    vsNaiveTarget: 1.5,
  };
}

function verdict(ok: boolean, measured = true): string {
  return !measured ? "not measured" : ok ? "met" : "MISSED";
}

function markdown(r: {
  header: Record<string, string>;
  limit: LimitResult;
  cells: Cell[];
  paired: Paired[];
  ratios: Ratios;
  notes: string[];
  /** N-session limits (--instances), and the instances decision's rows. */
  sessionLimits: Array<{ label: string; result: SessionsLimitResult }>;
  decision: DecisionRow[];
}): string {
  const L: string[] = [];
  L.push("# Benchmark results", "");
  for (const [k, v] of Object.entries(r.header)) L.push(`- **${k}**: ${v}`);
  L.push("", "## Targets", "");
  const s = r.ratios.saturated;
  L.push(`| target | measured | goal | verdict |`, `|---|---|---|---|`);
  L.push(`| (a) saturated throughput, this server / limit | ${f2(s.ratio)} (${f0(s.server)} / ${f0(s.limit)} tokens/s; server best at ${s.cell}, the limit measured again right before and after that cell; against the run's first limit measurement, ${f0(s.limitAtStart)} tokens/s: ${f2(s.ratioAtStart)}) | >= ${s.target} | ${verdict(s.ratio >= s.target)} |`);
  const o = r.ratios.overheadMs;
  L.push(`| (b) latency at concurrency 1, 1 input, minus one raw onnxruntime run on the same input | ${f2(o.paired)} ms (median of ${o.pairs} interleaved pairs, 95% interval ${f2(o.pairedLo)}-${f2(o.pairedHi)} ms; request p50 ${f2(o.serverP50)} ms, raw p50 ${f2(o.rawP50)} ms${o.naivePaired !== null ? `; naive server: ${f2(o.naivePaired)} ms` : ""}) | <= ${o.target} ms | ${verdict(o.paired <= o.target)}${o.pairedLo <= o.target && o.target <= o.pairedHi ? ` (${o.target} ms is inside the interval)` : ""} |`);
  for (const v of r.ratios.vsNaive) {
    L.push(`| (c) this server / naive at concurrency 16, ${v.size} input${v.size === 1 ? "" : "s"} per request | ${f2(v.adjusted)} (each over the limit measured around its cell; raw ${f0(v.server)} / ${f0(v.naive)} tokens/s = ${f2(v.ratio)}) | >= ${r.ratios.vsNaiveTarget} | ${verdict(v.adjusted >= r.ratios.vsNaiveTarget, Number.isFinite(v.adjusted))} |`);
  }
  if (r.decision.some((d) => d.verdict !== "not measured")) L.push("", "## Instances decision: each configuration over its own limit", "", ...decisionMarkdown(r.decision));
  L.push("", "## All cells", "");
  L.push("Latency is per request (client side, HTTP included); for the limit it is per batch. Peak RSS is the process's VmHWM after the cell (so it only grows down a system's rows). Other load: CPU cores used by processes outside the benchmark during the cell (should be ~0). Mean batch and padding (share of padded tokens in the batches run): from this server's /metrics; for the limit, its batches. Limit nearby (cells at concurrency >= 16): the limit measured again right before and right after the cell, the faster of the two; / limit is the cell's tokens/s over it.", "");
  L.push("| system | request size | concurrency | requests | inputs/s | tokens/s | p50 ms | p95 ms | p99 ms | peak RSS MB | errors | other load | mean batch | padding | limit nearby | / limit |");
  L.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  const lf = r.limit.final;
  L.push(`| ${SYSTEM_LABEL.limit} | sorted batches of ${batchingLabel(lf)} | - | ${Math.round(lf.inputsPerSec * lf.seconds / lf.meanBatch)} batches | ${f1(lf.inputsPerSec)} | ${f0(lf.tokensPerSec)} | ${f1(lf.batchMs.p50)} | ${f1(lf.batchMs.p95)} | ${f1(lf.batchMs.p99)} | ${f0(r.limit.peakRssMb)} | 0 | - | ${f1(lf.meanBatch)} | ${(lf.paddedFraction * 100).toFixed(1)}% | - | - |`);
  for (const { label, result } of r.sessionLimits) {
    const f = result.final;
    L.push(`| ${label} | sorted batches of ${batchingLabel(f.batching)} | - | ${Math.round(f.inputsPerSec * f.seconds / f.meanBatch)} batches | ${f1(f.inputsPerSec)} | ${f0(f.tokensPerSec)} | - | - | - | ${f0(result.peakRssMb)} (${f.sessions} processes) | 0 | - | ${f1(f.meanBatch)} | ${(f.paddedFraction * 100).toFixed(1)}% | - | - |`);
  }
  // Cells ran alternating between the systems; the table lists each system's cells together.
  const rank = (c: Cell) => ["naive", "server", "instances"].indexOf(c.system);
  const listed = r.cells.slice().sort((x, y) => rank(x) - rank(y) || x.size - y.size || x.concurrency - y.concurrency);
  for (const c of listed) {
    L.push(`| ${SYSTEM_LABEL[c.system]} | ${c.size} | ${c.concurrency} | ${c.requests} | ${f1(c.inputsPerSec)} | ${f0(c.tokensPerSec)} | ${f1(c.p50)} | ${f1(c.p95)} | ${f1(c.p99)} | ${f0(c.peakRssMb)} | ${c.errors} | ${f2(c.otherLoadCores)} | ${c.meanBatch === null ? "-" : f1(c.meanBatch)} | ${c.paddingFraction === null ? "-" : (c.paddingFraction * 100).toFixed(1) + "%"} | ${c.limitNearby === null ? "-" : f0(c.limitNearby)} | ${c.limitNearby === null ? "-" : f2(c.tokensPerSec / c.limitNearby)} |`);
  }
  L.push("", "## Limit sweep (intra-op threads x batching; batches are length-sorted neighbours cut by count or by a padded-token budget)", "");
  L.push("| intra-op threads | batching | mean batch | tokens/s | inputs/s | padding |", "|---:|---|---:|---:|---:|---:|");
  for (const p of r.limit.sweep) {
    const best = p.threads === r.limit.best.threads && p.batchSize === r.limit.best.batchSize && p.batchTokens === r.limit.best.batchTokens;
    L.push(`| ${p.threads} | ${batchingLabel(p)} | ${f1(p.meanBatch)} | ${best ? "**" : ""}${f0(p.tokensPerSec)}${best ? "**" : ""} | ${f1(p.inputsPerSec)} | ${(p.paddedFraction * 100).toFixed(1)}% |`);
  }
  L.push("", "## Latency at concurrency 1 against the raw run (target b)", "");
  L.push("Each pair: one raw onnxruntime run of input k in the limit process, then one request with input k to the server; medians in ms. One pair's difference spreads over several ms (it holds two onnxruntime runs, each jittering by ~1-2 ms), so the median's 95% interval (distribution-free, from order statistics) is shown. The breakdown columns come from this server's x-inference-time-ms / x-total-time-ms headers.", "");
  L.push("| system | pairs | request | raw run | request - raw | 95% interval | engine inference - raw | route - inference | HTTP + client |", "|---|---:|---:|---:|---:|---|---:|---:|---:|");
  const n2 = (x: number | null) => (x === null ? "-" : f2(x));
  for (const q of r.paired) {
    L.push(`| ${SYSTEM_LABEL[q.system]} | ${q.diffs.length} | ${f2(q.medianClient)} | ${f2(q.medianRaw)} | ${f2(q.medianDiff)} | ${f2(q.medianDiffLo)}-${f2(q.medianDiffHi)} | ${n2(q.medianInferenceMinusRaw)} | ${n2(q.medianRouteMinusInference)} | ${n2(q.medianClientMinusRoute)} |`);
  }
  if (r.notes.length) L.push("", "## Notes", "", ...r.notes.map((n) => `- ${n}`));
  L.push("", "![tokens/s by concurrency](chart.png)", "");
  return L.join("\n");
}

/**
 * The single-text saturation cell alone, for A/B comparisons of a server change: one server, or two (another
 * checkout, other flags) up at the same time with their cells alternating, first A then B, then B then A, so the
 * machine's drift hits both alike. No limit child: compare the two servers' rows, not a ratio.
 */
async function saturationAB(o: Options, p: ReturnType<typeof plan>, modelDir: string, pool: readonly WorkloadText[]): Promise<string> {
  const threads = o.threads ?? 2;
  const size = o.saturationSize;
  const variants = [{ label: `A: ${o.serverRoot} ${o.serverArgs.join(" ")}`.trim(), root: o.serverRoot, args: o.serverArgs }];
  if (o.compareRoot || o.compareArgs.length) variants.push({ label: `B: ${o.compareRoot ?? o.serverRoot} ${o.compareArgs.join(" ")}`.trim(), root: o.compareRoot ?? o.serverRoot, args: o.compareArgs });
  const up: Array<{ label: string; r: Running; pid: number; load: OtherLoad }> = [];
  // With --limit-tokens: onnxruntime alone on sorted batches of that budget, timed before the first cell and after
  // every cell; each cell's ratio is over the faster of the limits around it.
  const limitChild = o.limitTokens > 0 ? new LimitChild({ ...p.limit, modelDir, threads: [threads], batchSizes: [], batchTokens: [], finalOnly: { batchSize: 0, batchTokens: o.limitTokens } }) : null;
  try {
    let before = limitChild ? (await limitChild.result()).final.tokensPerSec : NaN;
    for (const v of variants) {
      const r = await startSystem("server", modelDir, threads, v.args, v.root);
      for (let k = 0; k < 4; k++) await embedOne(r.url, pool[pool.length - 1 - k]!.text);
      up.push({ label: v.label, r, pid: r.proc.pid, load: new OtherLoad(() => [process.pid, r.proc.pid]) });
    }
    const rows: string[] = [`saturation: ${size}-input requests, concurrency ${o.concurrency}, ${o.cellSeconds} s or ${p.maxRequests(size)} requests per cell, ${threads} thread(s)${limitChild ? `, limit: sorted batches of <= ${o.limitTokens} tokens` : ""}`, "",
      "| round | server | tokens/s | limit nearby | / limit | p50 ms | p99 ms | mean batch | padding | RSS MiB | peak RSS MiB | other load (cores) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"];
    for (let round = 0; round < o.rounds; round++) {
      const order = round % 2 === 0 ? up : up.slice().reverse();
      for (const s of order) {
        await Bun.sleep(100);
        const c = await runCell(s.label, s.r.url, pool, size, o.concurrency, p.maxRequests(size), o.cellSeconds, s.pid, s.load);
        let nearby = NaN;
        if (limitChild) {
          await Bun.sleep(100);
          const after = (await limitChild.again()).tokensPerSec;
          nearby = Math.max(before, after);
          before = after;
        }
        const line = `| ${round + 1} | ${s.label} | ${f0(c.tokensPerSec)} | ${f0(nearby)} | ${f2(c.tokensPerSec / nearby)} | ${f1(c.p50)} | ${f1(c.p99)} | ${f2(c.meanBatch ?? NaN)} | ${f1(100 * (c.paddingFraction ?? NaN))}% | ${f0(rssMb(s.pid))} | ${f0(c.peakRssMb)} | ${f2(c.otherLoadCores)} |`;
        log(line);
        rows.push(line);
      }
    }
    return rows.join("\n");
  } finally {
    for (const s of up) await stop(s.r);
    await limitChild?.quit();
  }
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const p = plan(o);
  const started = performance.now();
  const modelDir = ensureBenchModel({ variant: o.variant, log });
  const pool = (await makeWorkload(modelDir, POOL_SIZE, WORKLOAD_SEED)).texts;
  const lens = lengthStats(pool);
  log(`workload: ${pool.length} texts, tokens min ${lens.min} p10 ${lens.p10} p50 ${lens.p50} p90 ${lens.p90} max ${lens.max} mean ${lens.mean.toFixed(1)}`);
  if (o.waitQuiet > 0) {
    const l = await waitQuiet(o.waitQuiet);
    log(`other load before start: ${l.toFixed(2)} cores`);
  }
  if (o.responsivenessOnly) {
    const r = await responsiveness(o, modelDir, pool, o.threads ?? 2);
    console.log(responsivenessMarkdown([r]).join("\n"));
    return;
  }
  if (o.saturationOnly) {
    console.log(await saturationAB(o, p, modelDir, pool));
    return;
  }
  if (o.memoryOnly) {
    console.log(memoryMarkdown([await measureMemory(modelDir, o.threads ?? 2, o.serverArgs, o.serverRoot)]).join("\n"));
    return;
  }
  log("limit: sweeping intra-op threads and batch sizes");
  // The sweep runs in one child; the best setting is then measured in a fresh child that loads one session and
  // runs one batch size, so its peak RSS compares with a server's (the sweep's larger batches grow the arena).
  const sweepChild = new LimitChild({ ...p.limit, modelDir, serveLatency: false, finalSample: 8 });
  const limitLoad = new OtherLoad(() => [process.pid, sweepChild.pid]);
  limitLoad.start();
  const sweep = await sweepChild.result();
  // Stopped while the child is alive: once it exits, its CPU time can no longer be told apart from others'.
  const sweepOther = limitLoad.stop();
  await sweepChild.quit();
  const bestThreads = o.threads ?? sweep.best.threads;
  const limitChild = new LimitChild({ ...p.limit, modelDir, threads: [bestThreads], batchSizes: [], batchTokens: [], finalOnly: { batchSize: sweep.best.batchSize, batchTokens: sweep.best.batchTokens } });
  const limitLoad2 = new OtherLoad(() => [process.pid, limitChild.pid]);
  limitLoad2.start();
  const limit: LimitResult = { ...(await limitChild.result()), sweep: sweep.sweep };
  let limitOther = Math.max(sweepOther, limitLoad2.stop());
  const threads = bestThreads;
  log(`limit: best ${limit.best.threads} thread(s), batches of ${batchingLabel(limit.best)}: ${limit.final.tokensPerSec.toFixed(0)} tokens/s; servers use ${threads} thread(s)`);
  /** The limit once more, with the servers idle; a saturated cell is bracketed by two of these. */
  const limitNow = async () => {
    await Bun.sleep(100); // the servers' onnxruntime threads spin for a moment after their last run
    const t = (await limitChild.again()).tokensPerSec;
    log(`limit again: ${t.toFixed(0)} tokens/s`);
    return t;
  };
  // The systems under test, each held to its own limit: the naive server and the defaults to one session; a
  // server with --instances N (its flags, or the --instances option's third system) to N sessions at once.
  const systems: Array<{ name: string; kind: SystemName; args: string[] }> = o.systems.map((name) => ({ name, kind: name, args: name === "server" ? o.serverArgs : [] }));
  if (o.instances > 1) {
    systems.push({ name: "instances", kind: "server", args: instancesArgs(o.serverArgs, o.instances) });
    SYSTEM_LABEL.instances = `infinity --instances ${o.instances} --num-threads 1`;
  }
  interface LimitSource { key: string; label: string; atStart: number; peakRssMb: number; now: () => Promise<number> }
  const oneLimit: LimitSource = { key: "one", label: `onnxruntime alone, 1 session x ${threads} thread${threads === 1 ? "" : "s"}`, atStart: limit.final.tokensPerSec, peakRssMb: limit.peakRssMb, now: limitNow };
  const sessionLimits = new Map<string, { src: LimitSource; sl: SessionsLimit; result: SessionsLimitResult }>();
  const limitOf = new Map<string, LimitSource>();
  for (const s of systems) {
    const l = limitFor(s.args, threads);
    if (s.kind === "naive" || l.sessions <= 1) {
      limitOf.set(s.name, oneLimit);
      continue;
    }
    const key = `${l.sessions}x${l.threads}/${l.batchTokens}`;
    let e = sessionLimits.get(key);
    if (!e) {
      const label = sessionsLabel(l.sessions, l.threads);
      log(`limit: ${label}, sorted batches of <= ${l.batchTokens} tokens`);
      const sl = await SessionsLimit.start({ modelDir, poolSize: POOL_SIZE, workloadSeed: WORKLOAD_SEED, sessions: l.sessions, threads: l.threads, batching: { batchSize: 0, batchTokens: l.batchTokens }, sample: p.limit.finalSample, passes: p.limit.passes });
      const load = new OtherLoad(() => [process.pid, ...sl.pids]);
      load.start();
      const result = await sl.result();
      limitOther = Math.max(limitOther, load.stop());
      log(`limit: ${label}: ${result.final.tokensPerSec.toFixed(0)} tokens/s, children ${result.final.childSeconds.min.toFixed(2)}-${result.final.childSeconds.max.toFixed(2)} s of ${result.final.seconds.toFixed(2)} s, peak RSS ${result.peakRssMb.toFixed(0)} MiB together`);
      const now = async () => {
        await Bun.sleep(100);
        const t = (await sl.measure()).tokensPerSec;
        log(`limit again (${label}): ${t.toFixed(0)} tokens/s`);
        return t;
      };
      e = { src: { key, label, atStart: result.final.tokensPerSec, peakRssMb: result.peakRssMb, now }, sl, result };
      sessionLimits.set(key, e);
    }
    limitOf.set(s.name, e.src);
  }

  const cells: Cell[] = [];
  const paired: Paired[] = [];
  const vectors = new Map<string, Float32Array>();
  // Both servers stay up for the whole run (an idle one costs nothing: its onnxruntime threads sleep) so that
  // their cells can alternate: the machine's speed drifts over minutes, and running all of one system's cells
  // before the other's let that drift decide the unbracketed cells (concurrency 1 and 4).
  const running: Array<{ name: string; r: Running; pid: number; load: OtherLoad }> = [];
  for (const { name, kind, args } of systems) {
    log(`${name}: starting`);
    const t0 = performance.now();
    const r = await startSystem(kind, modelDir, threads, args, o.serverRoot);
    const pid = r.proc.pid;
    log(`${name}: ready in ${((performance.now() - t0) / 1000).toFixed(1)} s (pid ${pid})`);
    // The same client warm-up for both: a few single inputs and one full request.
    for (let k = 0; k < 4; k++) await embedOne(r.url, pool[pool.length - 1 - k]!.text);
    await fetch(`${r.url}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: body(requestTexts(pool, 32, 0, 1000)) }).then((x) => x.text());
    vectors.set(name, await embedOne(r.url, pool[0]!.text));
    running.push({ name, r, pid, load: new OtherLoad(() => [process.pid, pid]) });
  }
  // Target (b)'s pairs are raw runs on the one-session limit's threads: the --instances system (1 thread a run) skips them.
  for (const { name, r } of running.filter((x) => x.name !== "instances")) {
    const q = await pairedLatency(name, r.url, limitChild, pool, p.pairedInputs, p.pairedPasses);
    paired.push(q);
    log(`${name}: concurrency-1 request minus raw run: median ${q.medianDiff.toFixed(2)} ms (95% interval ${q.medianDiffLo.toFixed(2)}-${q.medianDiffHi.toFixed(2)}) over ${q.diffs.length} pairs (request ${q.medianClient.toFixed(2)}, raw ${q.medianRaw.toFixed(2)})`);
    if (q.medianInferenceMinusRaw !== null) log(`${name}: engine inference - raw ${q.medianInferenceMinusRaw.toFixed(2)} ms, route - inference ${q.medianRouteMinusInference!.toFixed(2)} ms, HTTP + client ${q.medianClientMinusRoute!.toFixed(2)} ms`);
  }
  if (!o.latencyOnly) {
    let flip = false;
    for (const size of SIZES) {
      // The limit measured right after one saturated cell serves as the "before" of the next one.
      // Which limit it was (one session, or N at once): a cell is bracketed by its own system's limit.
      let before = null as { key: string; value: number } | null;
      for (const conc of p.concurrencyFor(size)) {
        // Which system goes first alternates from one cell shape to the next.
        const order = flip ? running.slice().reverse() : running;
        flip = !flip;
        for (const { name, r, pid, load } of order) {
          const bracket = conc >= 16;
          const lim = limitOf.get(name)!;
          if (bracket && before?.key !== lim.key) before = { key: lim.key, value: await lim.now() };
          else if (!bracket) await Bun.sleep(100); // the other server's onnxruntime threads spin for a moment after its cell
          const c = await runCell(name, r.url, pool, size, conc, p.maxRequests(size), o.cellSeconds, pid, load);
          if (bracket) {
            const after = await lim.now();
            // The faster of the two: other processes only ever slow the limit down, so this is the stricter bar.
            c.limitNearby = Math.max(before!.value, after);
            before = { key: lim.key, value: after };
          } else before = null;
          cells.push(c);
          log(`${name} size=${size} c=${conc}: ${c.requests} req, ${c.tokensPerSec.toFixed(0)} tokens/s, p50 ${c.p50.toFixed(1)} ms, p99 ${c.p99.toFixed(1)} ms, rss ${c.peakRssMb.toFixed(0)} MB, errors ${c.errors}, other load ${c.otherLoadCores.toFixed(2)}` + (c.meanBatch !== null ? `, mean batch ${c.meanBatch.toFixed(1)}, padding ${(c.paddingFraction! * 100).toFixed(1)}%` : ""));
          if (c.errors) log(`${name}: first error: ${c.firstError}`);
        }
      }
    }
  }
  for (const { r } of running) await stop(r);
  await limitChild.quit();
  for (const { sl } of sessionLimits.values()) await sl.quit();
  if (o.latencyOnly) return;
  const resp = o.systems.includes("server") ? [await responsiveness(o, modelDir, pool, threads)] : [];
  const memory: MemoryResult[] = [];
  if (o.systems.includes("server")) {
    log("memory: one server, one request of 64 x 512 tokens");
    memory.push(await measureMemory(modelDir, threads, o.serverArgs, o.serverRoot));
    log(`memory: RSS ready ${memory[0]!.readyMb.toFixed(0)} MiB, after the request ${memory[0]!.afterMb.toFixed(0)} MiB`);
  }
  if (o.instances > 1) {
    memory.push(await measureMemory(modelDir, threads, instancesArgs(o.serverArgs, o.instances), o.serverRoot));
    log(`memory (--instances ${o.instances}): RSS ready ${memory.at(-1)!.readyMb.toFixed(0)} MiB, after the request ${memory.at(-1)!.afterMb.toFixed(0)} MiB`);
  }

  const atStart = (system: string) => (limitOf.get(system) ?? oneLimit).atStart;
  const ratios = computeRatios(cells, atStart, paired);
  const configs: DecisionConfig[] = systems.filter((s) => s.kind === "server").map((s) => ({
    system: s.name, label: s.args.join(" ") || "defaults", limitLabel: limitOf.get(s.name)!.label, limitAtStart: atStart(s.name), limitPeakRssMb: limitOf.get(s.name)!.peakRssMb,
  }));
  const decision = decisionRows(cells, configs);
  const sessionResults = [...sessionLimits.values()].map((e) => ({ label: e.src.label, result: e.result }));
  const notes: string[] = [];
  const a = vectors.get("naive"), b = vectors.get("server");
  if (a && b) {
    let dot = 0;
    for (let i = 0; i < a.length; i++) dot += a[i]! * b[i]!;
    notes.push(`Both servers return the same embedding for the same text (cosine ${dot.toFixed(6)}).`);
  }
  const maxOther = Math.max(limitOther, ...cells.map((c) => c.otherLoadCores));
  if (maxOther > 0.15) notes.push(`Other processes used up to ${maxOther.toFixed(2)} cores during the run (limit: ${limitOther.toFixed(2)}): numbers in those cells are disturbed.`);
  if (o.serverArgs.length) notes.push(`This server ran with extra flags: ${o.serverArgs.join(" ")}.`);
  if (o.serverRoot !== REPO_ROOT) notes.push(`This server ran from another checkout: ${o.serverRoot}.`);
  if (o.quick) notes.push(`Quick run (--quick): short cells, no concurrency 64, 32-input requests only at concurrency 1 and 4${o.instances > 1 ? " (and 16, with 1-input requests at 32: the instances decision's cells)" : ""}; a smoke test, not numbers to quote.`);
  if (sessionLimits.size) notes.push(`An N-session limit is N processes, each holding one session and a Bun runtime, over the same length-sorted batches of the server's token budget, released together; its tokens/s is all their tokens over the time from the release to the last one done (the fastest of ${p.limit.passes} rounds), its peak RSS the sum of the processes' peaks.`);
  const cpu = cpus()[0]?.model ?? "unknown";
  const header: Record<string, string> = {
    date: new Date().toISOString(),
    machine: `${availableParallelism()} CPU cores (${cpu}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB RAM, load average at end ${loadavg().map((x) => x.toFixed(2)).join(" ")}`,
    model: o.variant === "fp32"
      ? `${MODEL_NAME}: BertModel 12 layers, hidden 384, fp32 ONNX (bench/model-skeleton, seeded weights), CLS pooling + normalize, bert-base-uncased tokenizer`
      : `${MODEL_NAME}: BertModel 12 layers, hidden 384, int8 ONNX (onnxruntime quantize_dynamic: int8 MatMul weights; bench/model-skeleton-int8, seeded weights), CLS pooling + normalize, bert-base-uncased tokenizer`,
    runtime: `Bun ${Bun.version}, onnxruntime-node 1.30.0, @huggingface/transformers 4.3.2`,
    workload: `${pool.length} seeded texts, tokens per input min ${lens.min} / p10 ${lens.p10} / median ${lens.p50} / p90 ${lens.p90} / max ${lens.max} (mean ${lens.mean.toFixed(1)}); requests of ${SIZES.join(" and ")} inputs, OpenAI /embeddings with encoding_format base64, keep-alive`,
    threads: `intra-op threads ${threads} for all three systems (best of the limit sweep${o.threads ? "; overridden by --threads" : ""}), inter-op 1${o.instances > 1 ? `; the --instances system: ${o.instances} instances x 1 thread` : ""}`,
    cells: `each cell up to ${p.maxRequests(1)} (1 input) / ${p.maxRequests(32)} (32 inputs) requests or ${o.cellSeconds} s, whichever first; requests in flight at the deadline finish and count`,
    ...(o.label ? { label: o.label } : {}),
    "run time": `${((performance.now() - started) / 1000).toFixed(0)} s`,
  };
  mkdirSync(o.out, { recursive: true });
  const md = markdown({ header, limit, cells, paired, ratios, notes, sessionLimits: sessionResults, decision }) +
    (resp.length ? `\n## Responsiveness (one model busy with long batches)\n\n${responsivenessMarkdown(resp).join("\n")}\n` : "") +
    (memory.length ? `\n## Memory (one server, after one request of 64 x 512 tokens)\n\n${memoryMarkdown(memory).join("\n")}\n` : "");
  writeFileSync(join(o.out, "results.md"), md);
  writeFileSync(join(o.out, "results.json"), JSON.stringify({ header, options: o, limit, sessionLimits: sessionResults, cells, paired, ratios, decision, notes, responsiveness: resp, memory }, null, 1) + "\n");
  const series: ChartSeries[] = systems
    .map(({ name: s }) => ({
      name: s === "naive" ? "naive transformers.js" : s === "server" ? "infinity" : `infinity --instances ${o.instances}`,
      color: s === "naive" ? [230, 120, 30] : s === "server" ? [40, 90, 200] : [150, 50, 170],
      points: new Map(SIZES.map((size) => [size, new Map(cells.filter((c) => c.system === s && c.size === size).map((c) => [c.concurrency, c.tokensPerSec]))])),
    }));
  const png = drawChart({
    title: "tokens/s by concurrency",
    subtitle: `bge-small architecture ${o.variant}, ${availableParallelism()} cpu cores, ${threads} intra-op thread${threads === 1 ? "" : "s"}`,
    sizes: SIZES,
    concurrency: p.concurrency,
    series,
    limit: { tokensPerSec: limit.final.tokensPerSec, label: "limit (onnxruntime alone)", color: [40, 160, 80] },
  });
  writeFileSync(join(o.out, "chart.png"), png);
  console.log(md);
  log(`wrote ${o.out}/results.md, results.json, chart.png in ${((performance.now() - started) / 1000).toFixed(0)} s`);
}

if (import.meta.main) {
  main().catch((e) => {
    console.error(`[bench] failed: ${(e as Error).stack ?? e}`);
    process.exit(1);
  });
}
