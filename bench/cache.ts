// Result-cache benchmark: a 32-input request computed (inputs never seen) against the same request answered from
// the cache, alternating, on the benchmark model (bge-small architecture). Checks that cached vectors are
// identical to computed ones. Usage: bun bench/cache.ts [--rounds N] [--backend memory|sqlite|redis://HOST:PORT]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBenchModel } from "./model";
import { startServer } from "./process";
import { percentiles } from "./stats";
import { makeWorkload } from "./workload";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

async function embed(url: string, input: string[]): Promise<{ ms: number; hits: string | null; vectors: number[][] }> {
  const t0 = performance.now();
  const res = await fetch(`${url}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input }) });
  const json = (await res.json()) as { data: { embedding: number[] }[] };
  const ms = performance.now() - t0;
  if (res.status !== 200) throw new Error(`status ${res.status}: ${JSON.stringify(json)}`);
  return { ms, hits: res.headers.get("x-cache-hits"), vectors: json.data.map((d) => d.embedding) };
}

if (import.meta.main) {
  const rounds = Number(arg("rounds", "20"));
  const backendArg = arg("backend", "memory");
  const threads = arg("threads", "2");
  const dir = mkdtempSync(join(tmpdir(), "infinity-bench-cache-"));
  const backend = backendArg === "sqlite" ? `sqlite:${join(dir, "results.db")}` : backendArg;
  const model = ensureBenchModel({ log: (m) => console.error(m) });
  const pool = (await makeWorkload(model, rounds * 32 + 64)).texts.map((t) => t.text);
  const server = await startServer(["--model-id", model, "--result-cache", backend, "--num-threads", threads]);
  try {
    // Warm the HTTP path and the engine first.
    for (let i = 0; i < 3; i++) await embed(server.url, pool.slice(rounds * 32 + i * 16, rounds * 32 + i * 16 + 16));
    const computed: number[] = [];
    const cached: number[] = [];
    let identical = true;
    for (let r = 0; r < rounds; r++) {
      const input = pool.slice(r * 32, r * 32 + 32);
      const cold = await embed(server.url, input);
      if (cold.hits !== "0") throw new Error(`expected a cold request, x-cache-hits ${cold.hits}`);
      const warm = await embed(server.url, input);
      if (warm.hits !== "32") throw new Error(`expected 32 hits, x-cache-hits ${warm.hits}`);
      computed.push(cold.ms);
      cached.push(warm.ms);
      if (JSON.stringify(cold.vectors) !== JSON.stringify(warm.vectors)) identical = false;
    }
    const c = percentiles(computed);
    const h = percentiles(cached);
    const speedup = c.p50 / h.p50;
    console.log(`result cache (${backendArg}), 32-input requests, ${rounds} rounds alternating computed/cached, --num-threads ${threads}`);
    console.log(`computed: p50 ${c.p50.toFixed(2)} ms, p95 ${c.p95.toFixed(2)} ms`);
    console.log(`cached:   p50 ${h.p50.toFixed(2)} ms, p95 ${h.p95.toFixed(2)} ms`);
    console.log(`speedup (p50): ${speedup.toFixed(1)}x (target >= 20x): ${speedup >= 20 ? "met" : "MISSED"}`);
    console.log(`cached vectors identical to computed: ${identical ? "yes" : "NO"}`);
    if (!identical) process.exitCode = 1;
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
