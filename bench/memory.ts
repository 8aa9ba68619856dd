// The memory cell: resident size of one server serving the benchmark model (bge-small class) after one request of
// 64 inputs of 512 tokens (the issue's target: <= 300 MiB, with the server's default flags). Starts the server (its
// own thread and instance choice unless a --server-arg=--num-threads is given), reads VmRSS from /proc/<pid>/status
// when it is ready (after warm-up), after the request, and its peak (VmHWM); also what GET /models says the model
// takes. RSS is a count of resident pages, not a timing: it does not depend on the machine's load (the request's
// time does).
//
//   bun bench/memory.ts [--server-arg=--flag --server-arg=value ...] [--server-root DIR] [--threads N] [--rounds N]
//
// Also run by `bun run bench` (a cell of its own at the end) and `bun bench/run.ts --memory-only`.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { ensureBenchModel, REPO_ROOT } from "./model";
import { startSystem, stop } from "./system";
import { peakRssMb, residentSplitMb, rssMb } from "./stats";

export const MEMORY_TARGET_MB = 300;

export interface MemoryResult {
  /** Server flags beyond the benchmark's (--num-threads, --model-id...). */
  label: string;
  readyMb: number;
  afterMb: number;
  peakMb: number;
  /** GET /models memory_bytes of the model (what the server measured at load), MiB. */
  modelMb: number | null;
  requestMs: number;
  /** After the request: anonymous (heaps, arenas, weights) and file-backed (code, mapped files) resident MiB. */
  anonMb: number;
  fileMb: number;
  /** The process's threads (main, tokenizer workers, inference workers and their onnxruntime pools). */
  threads: number;
  /** GET /models: session instances x intra-op threads and where that came from (flag, calibrated, default). */
  instances: string;
}

/** 64 texts of well over 512 tokens: the server cuts each to the model's 512. */
function longTexts(): string[] {
  const words = "retrieval memory server batch token layer attention weight vector embedding".split(" ");
  return Array.from({ length: 64 }, (_, i) => Array.from({ length: 700 }, (_, k) => words[(i + k * 7) % words.length]).join(" "));
}

function threadCount(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/^Threads:\s+(\d+)/m)?.[1] ?? NaN);
}

export async function measureMemory(modelDir: string, threads: number, serverArgs: string[], serverRoot = REPO_ROOT): Promise<MemoryResult> {
  // The target is for the server's defaults: its own thread and instance choice, not the benchmark's --num-threads
  // (a --num-threads among serverArgs still replaces it).
  const args = serverArgs.some((a) => a === "--num-threads" || a.startsWith("--num-threads=")) ? serverArgs : ["--num-threads", "0", ...serverArgs];
  const r = await startSystem("server", modelDir, threads, args, serverRoot);
  try {
    const pid = r.proc.pid;
    const readyMb = rssMb(pid);
    const t0 = performance.now();
    const res = await fetch(`${r.url}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "bench-model", input: longTexts(), encoding_format: "base64" }) });
    const json = (await res.json()) as { data?: unknown[]; usage?: { prompt_tokens?: number } };
    const requestMs = performance.now() - t0;
    if (res.status !== 200 || json.data?.length !== 64) throw new Error(`request failed: HTTP ${res.status}`);
    if ((json.usage?.prompt_tokens ?? 0) < 64 * 500) throw new Error(`expected 64 x 512 tokens, the server counted ${json.usage?.prompt_tokens}`);
    // Let freed buffers settle (the worker's outputs, the request's JSON).
    await Bun.sleep(500);
    const afterMb = rssMb(pid);
    const split = residentSplitMb(pid);
    const models = (await (await fetch(`${r.url}/models`)).json()) as { data?: Array<{ memory_bytes?: number | null; instances?: number; intra_op_threads?: number; instances_source?: string; instances_reason?: string | null }> };
    const model = models.data?.[0];
    if (model?.instances_reason) console.error(`instances: ${model.instances_reason}`);
    const bytes = model?.memory_bytes;
    return {
      label: serverArgs.join(" ") || "defaults", readyMb, afterMb, peakMb: peakRssMb(pid),
      modelMb: typeof bytes === "number" ? bytes / 1048576 : null, requestMs, anonMb: split.anon, fileMb: split.file, threads: threadCount(pid),
      instances: `${model?.instances ?? "?"} x ${model?.intra_op_threads ?? "?"} (${model?.instances_source ?? "?"})`,
    };
  } finally {
    await stop(r);
  }
}

export function memoryMarkdown(results: readonly MemoryResult[]): string[] {
  const f = (x: number) => x.toFixed(0);
  const L = [
    `| server flags | RSS ready | RSS after 64 x 512 tokens (target <= ${MEMORY_TARGET_MB} MiB) | anon / file | peak (VmHWM) | /models memory_bytes | instances | threads | request |`,
    "|---|---:|---:|---:|---:|---:|---|---:|---:|",
  ];
  for (const m of results) {
    L.push(`| ${m.label} | ${f(m.readyMb)} MiB | ${f(m.afterMb)} MiB | ${f(m.anonMb)} / ${f(m.fileMb)} MiB | ${f(m.peakMb)} MiB | ${m.modelMb === null ? "-" : `${f(m.modelMb)} MiB`} | ${m.instances} | ${m.threads} | ${f(m.requestMs)} ms |`);
  }
  return L;
}

if (import.meta.main) {
  const argv = process.argv.slice(2);
  const serverArgs: string[] = [];
  let serverRoot = REPO_ROOT, rounds = 1;
  const threads = 2;
  for (let i = 0; i < argv.length; i++) {
    const [name, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? "";
    if (name === "--server-arg") serverArgs.push(value());
    else if (name === "--server-root") serverRoot = resolve(value());
    // The server's --num-threads (the default measures the server's own choice).
    else if (name === "--threads") serverArgs.push("--num-threads", value());
    else if (name === "--rounds") rounds = Number(value());
    else throw new Error(`unknown option ${name}`);
  }
  const modelDir = ensureBenchModel({ log: (m) => console.error(m) });
  console.error(`server ${serverRoot}, flags: ${serverArgs.join(" ") || "defaults"}`);
  const results: MemoryResult[] = [];
  for (let k = 0; k < rounds; k++) results.push(await measureMemory(modelDir, threads, serverArgs, serverRoot));
  console.log(memoryMarkdown(results).join("\n"));
}
