// The responsiveness cells: does the server keep answering while a model is busy? One server serves the benchmark
// model under two names ("busy" and "other", two sessions of the same files). "busy" gets back-to-back requests of
// the pool's longest inputs at concurrency 2, so a long batch is always running or queued.
//   health: /health polled one after another (5 ms apart) while "busy" runs: p50, p99, max.
//   contention: single short requests to "other", one at a time (20 ms apart), idle and while "busy" runs: p50 each
//   and the ratio (target: busy p50 <= 3x idle p50).
import { percentiles } from "./stats";
import type { WorkloadText } from "./workload";

export const BUSY_MODEL = "busy";
export const OTHER_MODEL = "other";

/** Flags that make a server serve `modelDir` under the two names the cells use. */
export function twoModelArgs(modelDir: string): string[] {
  return ["--model-id", modelDir, "--served-model-name", BUSY_MODEL, "--served-model-name", OTHER_MODEL];
}

export interface ResponsivenessResult {
  system: string;
  /** Inputs and their mean tokens in each of "busy"'s requests. */
  busyRequest: { inputs: number; meanTokens: number };
  health: { polls: number; p50: number; p99: number; max: number; errors: number };
  other: { idleP50: number; busyP50: number; ratio: number; requests: number; errors: number };
  /** "busy" requests answered during the two busy phases, and its tokens/s over them. */
  busy: { requests: number; tokensPerSec: number; errors: number };
}

async function post(url: string, model: string, texts: readonly WorkloadText[]): Promise<boolean> {
  const res = await fetch(`${url}/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, input: texts.map((t) => t.text), encoding_format: "base64" }),
  });
  await res.arrayBuffer();
  return res.ok;
}

/** Keeps "busy" saturated until `stop()`; counts its answered requests and tokens. */
function saturate(url: string, request: readonly WorkloadText[], concurrency: number) {
  let running = true;
  let requests = 0, errors = 0, tokens = 0;
  const tokensPerRequest = request.reduce((s, t) => s + t.ids.length, 0);
  const t0 = performance.now();
  const loops = Array.from({ length: concurrency }, async () => {
    while (running) {
      if (await post(url, BUSY_MODEL, request).catch(() => false)) {
        requests++;
        tokens += tokensPerRequest;
      } else errors++;
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      return { requests, errors, tokens, seconds: (performance.now() - t0) / 1000 };
    },
  };
}

async function timed(f: () => Promise<boolean>): Promise<number | null> {
  const t0 = performance.now();
  const ok = await f().catch(() => false);
  return ok ? performance.now() - t0 : null;
}

/** Single short requests to "other", one at a time, `pauseMs` apart, for `seconds`. */
async function otherLatencies(url: string, shorts: readonly WorkloadText[], seconds: number, pauseMs: number): Promise<{ ms: number[]; errors: number }> {
  const ms: number[] = [];
  let errors = 0;
  const until = performance.now() + seconds * 1000;
  for (let k = 0; performance.now() < until; k++) {
    const t = await timed(() => post(url, OTHER_MODEL, [shorts[k % shorts.length]!]));
    if (t === null) errors++;
    else ms.push(t);
    await Bun.sleep(pauseMs);
  }
  return { ms, errors };
}

export async function measureResponsiveness(system: string, url: string, pool: readonly WorkloadText[], seconds: number): Promise<ResponsivenessResult> {
  const byLength = pool.slice().sort((a, b) => b.ids.length - a.ids.length);
  const request = byLength.slice(0, 32);
  // Retrieval-style short texts (median length of the pool and below).
  const shorts = byLength.slice(Math.floor(byLength.length / 2));
  // Warm both models' paths.
  await post(url, BUSY_MODEL, request);
  for (let k = 0; k < 5; k++) await post(url, OTHER_MODEL, [shorts[k]!]);

  const idle = await otherLatencies(url, shorts, seconds / 2, 20);

  const load1 = saturate(url, request, 2);
  await Bun.sleep(500);
  const polls: number[] = [];
  let healthErrors = 0;
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) {
    const t = await timed(async () => (await fetch(`${url}/health`).then((r) => r.arrayBuffer().then(() => r.status))) === 200);
    if (t === null) healthErrors++;
    else polls.push(t);
    await Bun.sleep(5);
  }
  const s1 = await load1.stop();

  const load2 = saturate(url, request, 2);
  await Bun.sleep(500);
  const busy = await otherLatencies(url, shorts, seconds, 20);
  const s2 = await load2.stop();

  const h = percentiles(polls);
  const idleP50 = percentiles(idle.ms).p50;
  const busyP50 = percentiles(busy.ms).p50;
  return {
    system,
    busyRequest: { inputs: request.length, meanTokens: request.reduce((s, t) => s + t.ids.length, 0) / request.length },
    health: { polls: polls.length, p50: h.p50, p99: h.p99, max: Math.max(...polls), errors: healthErrors },
    other: { idleP50, busyP50, ratio: busyP50 / idleP50, requests: idle.ms.length + busy.ms.length, errors: idle.errors + busy.errors },
    busy: { requests: s1.requests + s2.requests, tokensPerSec: (s1.tokens + s2.tokens) / (s1.seconds + s2.seconds), errors: s1.errors + s2.errors },
  };
}

export function responsivenessMarkdown(results: readonly ResponsivenessResult[]): string[] {
  const f = (x: number) => x.toFixed(1);
  const L = [
    "| system | /health p50 | /health p99 | /health max | polls | other idle p50 | other p50 while busy | ratio | busy tokens/s | errors |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const r of results) {
    L.push(`| ${r.system} | ${f(r.health.p50)} ms | ${f(r.health.p99)} ms | ${f(r.health.max)} ms | ${r.health.polls} | ${f(r.other.idleP50)} ms | ${f(r.other.busyP50)} ms | ${r.other.ratio.toFixed(2)}x | ${r.busy.tokensPerSec.toFixed(0)} | ${r.health.errors + r.other.errors + r.busy.errors} |`);
  }
  return L;
}
