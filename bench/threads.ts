// Where a saturated server's CPU goes: one server on the benchmark model, `concurrency` clients sending requests of
// `size` workload inputs back to back for `seconds`, and each thread's CPU time over that window from
// /proc/<pid>/task/*/stat (Linux), with tokens/s and the server's batch figures from /metrics.
//
//   bun bench/threads.ts [--size 32] [--concurrency 16] [--seconds 20] [--server-arg=X ...]
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { statJiffies, TICKS_PER_SECOND } from "../src/engine/cpu-load";
import { ensureBenchModel } from "./model";
import { startServer } from "./process";
import { makeWorkload, requestTexts } from "./workload";

const argv = process.argv.slice(2);
const opt = (name: string, dflt: number) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
};
const size = opt("size", 32);
const concurrency = opt("concurrency", 16);
const seconds = opt("seconds", 20);
const serverArgs = argv.filter((a) => a.startsWith("--server-arg=")).map((a) => a.slice("--server-arg=".length));

function threads(pid: number): Map<string, { comm: string; ticks: number }> {
  const out = new Map<string, { comm: string; ticks: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      out.set(tid, { comm, ticks: statJiffies(stat) });
    } catch {
      // thread ended
    }
  }
  return out;
}

function metric(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split("\n")) if (line.startsWith(name)) sum += Number(line.split(" ").at(-1));
  return sum;
}

const modelDir = ensureBenchModel();
const work = await makeWorkload(modelDir, 2048);
const server = await startServer(["--model-id", modelDir, "--served-model-name", "bench", ...serverArgs]);
try {
  const send = async (k: number) => {
    const texts = requestTexts(work.texts, size, k);
    const r = await fetch(`${server.url}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "bench", input: texts.map((t) => t.text), encoding_format: "base64" }) });
    if (r.status !== 200) throw new Error(`status ${r.status}: ${await r.text()}`);
    await r.arrayBuffer();
    return texts.reduce((s, t) => s + t.ids.length, 0);
  };
  for (let k = 0; k < 4; k++) await send(k);
  const info = ((await (await fetch(`${server.url}/models`)).json()) as { data: Array<Record<string, unknown>> }).data[0]!;
  const pick = Object.fromEntries(Object.entries(info).filter(([k]) => /batch|thread|instance|overhead/.test(k)));
  console.log(JSON.stringify(pick));
  const m0 = await (await fetch(`${server.url}/metrics`)).text();
  const t0 = threads(server.pid);
  const start = performance.now();
  let tokens = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() - start < seconds * 1000) {
        const n = await send(next++);
        tokens += n;
      }
    }),
  );
  const wall = (performance.now() - start) / 1000;
  const t1 = threads(server.pid);
  const m1 = await (await fetch(`${server.url}/metrics`)).text();
  const byComm = new Map<string, number>();
  const rows: Array<[string, string, number]> = [];
  for (const [tid, b] of t1) {
    const used = (b.ticks - (t0.get(tid)?.ticks ?? 0)) / TICKS_PER_SECOND / wall;
    if (used >= 0.005) rows.push([tid, b.comm, used]);
    byComm.set(b.comm, (byComm.get(b.comm) ?? 0) + used);
  }
  rows.sort((a, b) => b[2] - a[2]);
  console.log(`server ${serverArgs.join(" ") || "(defaults)"}: ${size} inputs x concurrency ${concurrency}, ${wall.toFixed(1)} s, ${(tokens / wall).toFixed(0)} tokens/s, ${next} requests`);
  const batches = metric(m1, "infinity_batch_size_count") - metric(m0, "infinity_batch_size_count");
  const inputs = metric(m1, "infinity_batch_size_sum") - metric(m0, "infinity_batch_size_sum");
  const padded = metric(m1, "infinity_batch_tokens_sum") - metric(m0, "infinity_batch_tokens_sum");
  const real = metric(m1, "infinity_tokens_total") - metric(m0, "infinity_tokens_total");
  console.log(`batches ${batches}, mean batch ${(inputs / batches).toFixed(2)}, padded tokens per batch ${(padded / batches).toFixed(0)}, padding ${((1 - real / padded) * 100).toFixed(1)}%`);
  let total = 0;
  for (const [tid, comm, used] of rows) {
    total += used;
    console.log(`  ${tid.padStart(8)} ${comm.padEnd(18)} ${used.toFixed(2)} cores`);
  }
  console.log(`  total ${total.toFixed(2)} cores; load ${readFileSync("/proc/loadavg", "utf8").trim()}`);
} finally {
  await server.stop();
}
