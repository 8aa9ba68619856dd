// Which limit a server configuration is held to, and the instances decision's table (pure; tested in
// test/bench/instances.test.ts). The decision: defaults serve memory (one session per model) and are held to
// onnxruntime alone with one session at its best thread count; `--instances N --num-threads T` serves throughput
// and is held to onnxruntime alone running N sessions of T threads at once (bench/limit-sessions.ts). The target
// for each is >= 0.90 of its own limit on single short texts from 32 clients and on 32-input requests.
import { CPU_BATCH_TOKENS } from "../src/engine/memory-budget";

/** The cells the decision names: [inputs per request, concurrency]. */
export const DECISION_CELLS: ReadonlyArray<{ size: number; concurrency: number; label: string }> = [
  { size: 1, concurrency: 32, label: "1-input requests, concurrency 32" },
  { size: 32, concurrency: 16, label: "32-input requests, concurrency 16" },
];
export const DECISION_TARGET = 0.9;

/** The value of `--flag V` or `--flag=V` among a server's arguments (the last one given), or null. */
export function flagValue(args: readonly string[], flag: string): string | null {
  let v: string | null = null;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === flag && i + 1 < args.length) v = args[++i]!;
    else if (args[i]!.startsWith(`${flag}=`)) v = args[i]!.slice(flag.length + 1);
  }
  return v;
}

/** The arguments without the given flags (`--flag V` and `--flag=V` forms). */
export function withoutFlags(args: readonly string[], flags: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (flags.includes(a)) i++;
    else if (!flags.some((f) => a.startsWith(`${f}=`))) out.push(a);
  }
  return out;
}

/** The arguments of the throughput configuration: the server's flags with `--instances N --num-threads 1`. */
export function instancesArgs(serverArgs: readonly string[], instances: number): string[] {
  return [...withoutFlags(serverArgs, ["--instances", "--num-threads"]), "--instances", String(instances), "--num-threads", "1"];
}

/**
 * The limit a server started with these arguments is held to: `sessions` onnxruntime sessions of `threads`
 * threads at once, batched as the server batches (its --max-batch-tokens, else the CPU default; several instances
 * never time their budget at warm-up). One session means the one-session limit of the run (best thread count and
 * batching of its sweep), so `batchTokens` is only meaningful when sessions > 1.
 */
export function limitFor(serverArgs: readonly string[], benchThreads: number): { sessions: number; threads: number; batchTokens: number } {
  const sessions = Math.max(1, Number(flagValue(serverArgs, "--instances") ?? 1) || 1);
  const t = Number(flagValue(serverArgs, "--num-threads") ?? NaN);
  const threads = Number.isFinite(t) && t > 0 ? t : benchThreads;
  const budget = Number(flagValue(serverArgs, "--max-batch-tokens") ?? 0) || CPU_BATCH_TOKENS;
  return { sessions, threads: sessions > 1 ? threads : benchThreads, batchTokens: budget };
}

/** A measured cell as this table needs it. */
export interface DecisionCellInput {
  system: string;
  size: number;
  concurrency: number;
  tokensPerSec: number;
  peakRssMb: number;
  /** The faster of the system's own limit measured right before and right after the cell. */
  limitNearby: number | null;
}

export interface DecisionConfig {
  /** Cell system key (e.g. "server", "instances"). */
  system: string;
  /** How the server ran, e.g. "defaults" or "--instances 2 --num-threads 1". */
  label: string;
  /** Its limit, e.g. "onnxruntime alone, 1 session x 2 threads". */
  limitLabel: string;
  /** The limit's first measurement (used for a cell run without a bracket). */
  limitAtStart: number;
  limitPeakRssMb: number;
}

export interface DecisionRow {
  system: string;
  label: string;
  limitLabel: string;
  cell: string;
  tokensPerSec: number;
  limit: number;
  ratio: number;
  target: number;
  verdict: "met" | "MISSED" | "not measured";
  serverPeakRssMb: number;
  limitPeakRssMb: number;
}

/** One row per configuration and decision cell: the cell's tokens/s over its own limit, against the target. */
export function decisionRows(cells: readonly DecisionCellInput[], configs: readonly DecisionConfig[], target = DECISION_TARGET): DecisionRow[] {
  const rows: DecisionRow[] = [];
  for (const cfg of configs) {
    const own = cells.filter((c) => c.system === cfg.system);
    const serverPeakRssMb = own.length ? Math.max(...own.map((c) => c.peakRssMb)) : NaN;
    for (const d of DECISION_CELLS) {
      const c = own.find((x) => x.size === d.size && x.concurrency === d.concurrency);
      const limit = c ? (c.limitNearby ?? cfg.limitAtStart) : NaN;
      const ratio = c ? c.tokensPerSec / limit : NaN;
      rows.push({
        system: cfg.system, label: cfg.label, limitLabel: cfg.limitLabel, cell: d.label,
        tokensPerSec: c?.tokensPerSec ?? NaN, limit, ratio, target,
        verdict: !Number.isFinite(ratio) ? "not measured" : ratio >= target ? "met" : "MISSED",
        serverPeakRssMb, limitPeakRssMb: cfg.limitPeakRssMb,
      });
    }
  }
  return rows;
}

export function decisionMarkdown(rows: readonly DecisionRow[]): string[] {
  const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : "-");
  const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "-");
  const L = [
    "Each configuration over its own limit (measured right before and after the cell, the faster of the two). Peak RSS: the server's over all its cells; the limit's over its processes together (an N-session limit is N processes, each with its own Bun runtime).",
    "",
    "| server | its limit | cell | tokens/s | limit tokens/s | / limit | goal | verdict | server peak RSS MiB | limit peak RSS MiB |",
    "|---|---|---|---:|---:|---:|---|---|---:|---:|",
  ];
  for (const r of rows) L.push(`| ${r.label} | ${r.limitLabel} | ${r.cell} | ${f0(r.tokensPerSec)} | ${f0(r.limit)} | ${f2(r.ratio)} | >= ${r.target} | ${r.verdict} | ${f0(r.serverPeakRssMb)} | ${f0(r.limitPeakRssMb)} |`);
  return L;
}
