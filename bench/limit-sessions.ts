// The limit of a server running N session instances: onnxruntime alone as N sessions running at the same time, one
// per child process (onnxruntime-node's session creation and session.run block the JS thread, so one process holds
// one session). Each child builds the same length-sorted batches (the server's batching: sorted neighbours up to
// its token budget), warms them, prints `ready` and waits; the parent releases all children together (`go`), each
// runs the same fixed work (its batches once, starting at its own offset so the children run different shapes at
// a time, as a server's instances do), and the limit is all children's tokens over the wall time from the release
// to the last child done. Not the sum of each child's own rate: a child that finishes early leaves the others to
// run alone on the freed cores, which would overstate what N sessions sustain together.
//
//   child:  bun bench/limit-sessions.ts '<json SessionChildOptions>'
import { join } from "node:path";
import type { Subprocess } from "bun";
import { batchesFor, benchSession, makeBatch, type Batch, type Batching } from "./limit";
import { REPO_ROOT } from "./model";
import { Lines } from "./process";
import { peakRssMb } from "./stats";
import { makeWorkload } from "./workload";

export interface SessionsLimitOptions {
  modelDir: string;
  poolSize: number;
  workloadSeed: number;
  /** Sessions (child processes) running at once. */
  sessions: number;
  /** Intra-op threads per session (1 for `--instances N --num-threads 1`). */
  threads: number;
  batching: Batching;
  /** Inputs all sessions run together per round (each child runs about sample / sessions of them). */
  sample: number;
  /** Rounds per measurement; the fastest counts (other processes can only slow a round down). */
  passes: number;
}

interface SessionChildOptions extends SessionsLimitOptions {
  index: number;
}

/** One child's share of a round, as it prints it. */
interface ChildPass {
  tokens: number;
  padded: number;
  inputs: number;
  batches: number;
  seconds: number;
}

/** One measurement of N concurrent sessions. */
export interface SessionsPoint {
  sessions: number;
  threads: number;
  batching: Batching;
  tokensPerSec: number;
  inputsPerSec: number;
  meanBatch: number;
  paddedFraction: number;
  /** Release to the last child done. */
  seconds: number;
  /** Each child's own time for its share, fastest and slowest (how evenly the sessions shared the cores). */
  childSeconds: { min: number; max: number };
}

export interface SessionsLimitResult {
  final: SessionsPoint;
  /** VmHWM of all children together (each holds a Bun runtime and one session), MiB. */
  peakRssMb: number;
  /** The largest single child's VmHWM, MiB. */
  peakRssPerChildMb: number;
}

/**
 * What N concurrent sessions did in one round, from each child's share and the wall time from the release to the
 * last child done (pure; tested in test/bench/limit-sessions.test.ts).
 */
export function combineRound(parts: readonly ChildPass[], wallSeconds: number, o: Pick<SessionsLimitOptions, "sessions" | "threads" | "batching">): SessionsPoint {
  const sum = (k: keyof ChildPass) => parts.reduce((a, p) => a + p[k], 0);
  const secs = parts.map((p) => p.seconds);
  return {
    sessions: o.sessions,
    threads: o.threads,
    batching: o.batching,
    tokensPerSec: sum("tokens") / wallSeconds,
    inputsPerSec: sum("inputs") / wallSeconds,
    meanBatch: sum("inputs") / Math.max(1, sum("batches")),
    paddedFraction: 1 - sum("tokens") / sum("padded"),
    seconds: wallSeconds,
    childSeconds: { min: Math.min(...secs), max: Math.max(...secs) },
  };
}

export class SessionsLimit {
  private readonly children: Array<{ proc: Subprocess<"pipe", "pipe", "inherit">; lines: Lines }>;

  private constructor(private readonly o: SessionsLimitOptions) {
    this.children = Array.from({ length: o.sessions }, (_, index) => {
      const opts: SessionChildOptions = { ...o, index };
      const proc = Bun.spawn([process.execPath, join(REPO_ROOT, "bench", "limit-sessions.ts"), JSON.stringify(opts)], { stdin: "pipe", stdout: "pipe", stderr: "inherit", cwd: REPO_ROOT });
      return { proc, lines: new Lines(proc, "session child") };
    });
  }

  /** Starts the children and waits until every one has built and warmed its batches. */
  static async start(o: SessionsLimitOptions): Promise<SessionsLimit> {
    const s = new SessionsLimit(o);
    for (const c of s.children) {
      const l = await c.lines.next();
      if (l !== "ready") throw new Error(`session child: expected ready, got ${l}`);
    }
    return s;
  }

  get pids(): number[] {
    return this.children.map((c) => c.proc.pid);
  }

  /** One round: all children released at once; wall time until the last one answers. */
  private async round(): Promise<SessionsPoint> {
    const answers = this.children.map((c) => c.lines.next());
    const t0 = performance.now();
    for (const c of this.children) {
      c.proc.stdin.write("go\n");
      c.proc.stdin.flush();
    }
    const parts = (await Promise.all(answers)).map((l) => JSON.parse(l) as ChildPass);
    return combineRound(parts, (performance.now() - t0) / 1000, this.o);
  }

  /** The fastest of `passes` rounds. */
  async measure(): Promise<SessionsPoint> {
    let best: SessionsPoint | null = null;
    for (let pass = 0; pass < Math.max(1, this.o.passes); pass++) {
      const r = await this.round();
      if (!best || r.tokensPerSec > best.tokensPerSec) best = r;
    }
    return best!;
  }

  /** Peak RSS of all children together, and of the largest one (MiB). */
  rss(): { total: number; perChild: number } {
    const each = this.pids.map(peakRssMb);
    return { total: each.reduce((a, b) => a + b, 0), perChild: Math.max(...each) };
  }

  async result(): Promise<SessionsLimitResult> {
    const final = await this.measure();
    const rss = this.rss();
    return { final, peakRssMb: rss.total, peakRssPerChildMb: rss.perChild };
  }

  async quit(): Promise<void> {
    for (const c of this.children) {
      c.proc.stdin.write("quit\n");
      c.proc.stdin.end();
    }
    await Promise.all(this.children.map((c) => c.proc.exited));
  }
}

/** Label of an N-session limit, e.g. "onnxruntime alone, 2 sessions x 1 thread at once". */
export function sessionsLabel(sessions: number, threads: number): string {
  return `onnxruntime alone, ${sessions} sessions x ${threads} thread${threads === 1 ? "" : "s"} at once`;
}

// ---------------------------------------------------------------- child

async function child(o: SessionChildOptions): Promise<void> {
  const pool = (await makeWorkload(o.modelDir, o.poolSize, o.workloadSeed)).texts;
  const sorted = pool.slice().sort((a, b) => a.ids.length - b.ids.length);
  const session = await benchSession(join(o.modelDir, "onnx", "model.onnx"), o.threads);
  const groups = batchesFor(sorted, o.batching, Math.max(1, Math.round(o.sample / o.sessions)));
  const all = groups.map((g) => makeBatch(g, session.inputNames));
  // Each child starts at its own offset: the same work, but different shapes running at the same moment.
  const start = Math.floor((o.index * all.length) / o.sessions);
  const batches: Batch[] = [...all.slice(start), ...all.slice(0, start)];
  const run = async (b: Batch) => {
    const out = await session.run(b.feeds);
    for (const k in out) out[k]!.dispose?.();
  };
  // Warm both ends of the shapes (arena, kernels) before any timing, as the one-session limit does.
  await run(all[0]!);
  await run(all[all.length - 1]!);
  process.stdout.write("ready\n");
  for await (const line of console) {
    const cmd = line.trim();
    if (cmd === "quit") break;
    if (cmd !== "go") continue;
    let tokens = 0, padded = 0, inputs = 0;
    const t0 = performance.now();
    for (const b of batches) {
      await run(b);
      tokens += b.tokens;
      padded += b.padded;
      inputs += b.inputs;
    }
    const pass: ChildPass = { tokens, padded, inputs, batches: batches.length, seconds: (performance.now() - t0) / 1000 };
    process.stdout.write(JSON.stringify(pass) + "\n");
  }
  await session.release();
}

if (import.meta.main) {
  await child(JSON.parse(process.argv[2]!) as SessionChildOptions);
  process.exit(0);
}
