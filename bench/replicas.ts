// Replicas sharing one Redis result cache: this server once as 1 replica and once as 3, each behind a round-robin
// proxy (what a Kubernetes Service does), driven by the same seeded workload with repeats. Reports throughput and the
// cache hit ratio read from the replicas' /metrics. Redis is flushed before each configuration. Loopback only.
// Usage: bun bench/replicas.ts [--requests N] [--size N] [--pool N] [--concurrency N] [--replicas A,B]
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { startRedis } from "../test/redis-server";
import { ensureBenchModel, prng, REPO_ROOT } from "./model";
import { startServer } from "./process";
import { percentiles } from "./stats";
import { makeWorkload, type WorkloadText } from "./workload";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

/** Forwards POST /embeddings to the targets in turn. */
function roundRobinProxy(targets: readonly string[]) {
  let next = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 120,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      if (req.method !== "POST" || path !== "/embeddings") return new Response("not found", { status: 404 });
      const target = targets[next++ % targets.length]!;
      const headers = { "content-type": req.headers.get("content-type") ?? "application/json" };
      const upstream = await fetch(`${target}${path}`, { method: "POST", headers, body: await req.arrayBuffer() });
      // Re-wrapped: fetch has already decoded the body, so the upstream's transfer headers no longer apply.
      return new Response(await upstream.arrayBuffer(), { status: upstream.status, headers: { "content-type": upstream.headers.get("content-type") ?? "" } });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

/** Sum of a counter over its label sets in a Prometheus text exposition. */
function counter(text: string, name: string): number {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))) sum += Number(m[1]);
  return sum;
}

async function cacheCounts(urls: readonly string[]): Promise<{ hits: number; misses: number }> {
  let hits = 0, misses = 0;
  for (const url of urls) {
    const text = await (await fetch(`${url}/metrics`)).text();
    hits += counter(text, "infinity_result_cache_hits_total");
    misses += counter(text, "infinity_result_cache_misses_total");
  }
  return { hits, misses };
}

async function embed(url: string, input: string[]): Promise<void> {
  const res = await fetch(`${url}/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input, encoding_format: "base64" }),
  });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`status ${res.status}: ${body.slice(0, 300)}`);
}

interface Row {
  replicas: number;
  seconds: number;
  inputsPerS: number;
  tokensPerS: number;
  p50: number;
  p95: number;
  hitRatio: number;
}

async function measure(replicas: number, model: string, cacheUrl: string, requests: WorkloadText[][], concurrency: number): Promise<Row> {
  const args = ["--model-id", model, "--num-threads", "1", "--result-cache", cacheUrl, "--no-model-warmup"];
  const servers = await Promise.all(Array.from({ length: replicas }, () => startServer(args)));
  const proxy = roundRobinProxy(servers.map((s) => s.url));
  try {
    // First batches on each replica outside the timing, with texts outside the pool.
    await Promise.all(servers.map((s, i) => embed(s.url, [`warm-up request for replica ${i}`, "a second warm-up text"])));
    const before = await cacheCounts(servers.map((s) => s.url));
    const latencies: number[] = [];
    let next = 0;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: concurrency }, async () => {
      for (let k = next++; k < requests.length; k = next++) {
        const start = performance.now();
        await embed(proxy.url, requests[k]!.map((t) => t.text));
        latencies.push(performance.now() - start);
      }
    }));
    const seconds = (performance.now() - t0) / 1000;
    const after = await cacheCounts(servers.map((s) => s.url));
    const hits = after.hits - before.hits, misses = after.misses - before.misses;
    const inputs = requests.reduce((n, r) => n + r.length, 0);
    const tokens = requests.reduce((n, r) => n + r.reduce((m, t) => m + t.ids.length, 0), 0);
    const p = percentiles(latencies);
    return { replicas, seconds, inputsPerS: inputs / seconds, tokensPerS: tokens / seconds, p50: p.p50, p95: p.p95, hitRatio: hits / (hits + misses) };
  } finally {
    proxy.stop();
    await Promise.all(servers.map((s) => s.stop()));
  }
}

function flushAll(port: number): void {
  const r = Bun.spawnSync(["redis-cli", "-h", "127.0.0.1", "-p", String(port), "flushall"], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0 || r.stdout.toString().trim() !== "OK") throw new Error(`redis-cli flushall: ${r.stdout}${r.stderr}`);
}

if (import.meta.main) {
  const count = Number(arg("requests", "400"));
  const size = Number(arg("size", "8"));
  const poolSize = Number(arg("pool", "2000"));
  const concurrency = Number(arg("concurrency", "16"));
  const configurations = arg("replicas", "1,3").split(",").map(Number);
  const model = ensureBenchModel({ log: (m) => console.error(m) });
  const pool = (await makeWorkload(model, poolSize)).texts;
  // Uniform draws with replacement: 3,200 draws from 2,000 texts leave ~1,600 distinct, so about half repeat.
  const draw = prng(4242, 7);
  const requests = Array.from({ length: count }, () => Array.from({ length: size }, () => pool[draw() % pool.length]!));
  const distinct = new Set(requests.flat()).size;
  const redis = await startRedis();
  const rows: Row[] = [];
  try {
    for (const replicas of configurations) {
      flushAll(redis.port);
      console.error(`${replicas} replica(s)...`);
      rows.push(await measure(replicas, model, redis.url, requests, concurrency));
    }
  } finally {
    await redis.stop();
  }
  const base = rows[0]!;
  const cpu = cpus();
  const md = [
    `# Replicas sharing a Redis result cache`,
    "",
    `\`bun bench/replicas.ts\`, ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${cpu.length} cores (${cpu[0]?.model.trim() ?? "?"}).`,
    `Bench model (bge-small architecture), each replica \`--num-threads 1 --result-cache redis://127.0.0.1:PORT --no-model-warmup\`,`,
    `behind a round-robin proxy. ${count} requests of ${size} inputs drawn from ${poolSize} workload texts (${distinct} distinct,`,
    `${(100 * (1 - distinct / (count * size))).toFixed(0)}% repeats), concurrency ${concurrency}; Redis flushed before each configuration.`,
    "Tokens/s counts every input sent, cached or computed.",
    "",
    "| replicas | wall | inputs/s | tokens/s | vs 1 replica | p50 / p95 latency | cache hit ratio |",
    "|---:|---:|---:|---:|---:|---:|---:|",
    ...rows.map((r) =>
      `| ${r.replicas} | ${r.seconds.toFixed(1)} s | ${r.inputsPerS.toFixed(1)} | ${Math.round(r.tokensPerS).toLocaleString("en-US")} | ` +
      `${(r.tokensPerS / base.tokensPerS).toFixed(2)}x | ${Math.round(r.p50)} / ${Math.round(r.p95)} ms | ${(100 * r.hitRatio).toFixed(1)}% |`),
    "",
  ].join("\n");
  const out = join(REPO_ROOT, "bench", "results");
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, "replicas.md"), md);
  console.log(md);
}
