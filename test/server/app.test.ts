// Operator features on a live server: several models by name, auth, CORS, limits, metrics, OpenAPI, memory
// budget, graceful shutdown.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RunningServer } from "../../src/server/serve";
import { fixture, maxAbsDiff, offlineHub, postJson, startTestServer } from "../helpers";
import { buildConfig } from "../../src/config";
import { startServer } from "../../src/server/serve";
import { CPU_BATCH_TOKENS, tokenBudgetWithin } from "../../src/engine/memory-budget";

describe("two models in one process, auth, CORS, limits, metrics, OpenAPI", () => {
  let s: RunningServer;
  beforeAll(async () => {
    s = await startTestServer({
      "model-id": [fixture("bert-mean-norm"), fixture("bert-rerank")],
      "served-model-name": ["embedder", "reranker"],
      "batch-size": ["8", "4"],
      "api-key": ["k-one", "k-two"],
      "cors-allow-origins": "https://app.example",
      "max-request-bytes": "2000",
      "url-prefix": "/api",
    });
  });
  afterAll(async () => {
    await s.shutdown();
  });
  const auth = { authorization: "Bearer k-two" };

  test("models addressed by served name, per-model options by position", async () => {
    const res = await fetch(`${s.url}/api/models`, { headers: auth });
    const body = (await res.json()) as { data: Array<{ id: string; batch_size: number; task: string; memory_bytes: number }> };
    expect(body.data.map((m) => [m.id, m.task, m.batch_size])).toEqual([["embedder", "embed", 8], ["reranker", "rerank", 4]]);
    for (const m of body.data) expect(m.memory_bytes).toBeGreaterThan(0);
    const e = await postJson(`${s.url}/api/embeddings`, { model: "embedder", input: "x" }, auth);
    expect(e.status).toBe(200);
    const r = await postJson(`${s.url}/api/v1/rerank`, { model: "reranker", query: "q", documents: ["d"] }, auth);
    expect(r.status).toBe(200);
    const unknown = await postJson(`${s.url}/api/embeddings`, { model: "bert-mean-norm", input: "x" }, auth);
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toContain("embedder, reranker");
  });

  test("API key: 401 in the common shape without or with a wrong key; health and metrics stay public", async () => {
    const none = await postJson(`${s.url}/api/embeddings`, { model: "embedder", input: "x" });
    expect(none.status).toBe(401);
    expect(none.json.error.type).toBe("authentication_error");
    const bare = await postJson(`${s.url}/api/embeddings`, { model: "embedder", input: "x" }, { authorization: "k-one" });
    expect(bare.status).toBe(200);
    const wrong = await postJson(`${s.url}/api/embeddings`, { model: "embedder", input: "x" }, { authorization: "Bearer k-three" });
    expect(wrong.status).toBe(401);
    expect((await fetch(`${s.url}/api/models`)).status).toBe(401);
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
    expect((await fetch(`${s.url}/metrics`)).status).toBe(200);
  });

  test("url prefix: API routes only under it", async () => {
    expect((await postJson(`${s.url}/embeddings`, { model: "embedder", input: "x" }, auth)).status).toBe(404);
  });

  test("CORS: allowed origin gets headers and preflight; others do not", async () => {
    const pre = await fetch(`${s.url}/api/embeddings`, { method: "OPTIONS", headers: { origin: "https://app.example", "access-control-request-method": "POST" } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get("access-control-allow-origin")).toBe("https://app.example");
    const ok = await postJson(`${s.url}/api/embeddings`, { model: "embedder", input: "x" }, { ...auth, origin: "https://app.example" });
    expect(ok.headers.get("access-control-allow-origin")).toBe("https://app.example");
    const other = await postJson(`${s.url}/api/embeddings`, { model: "embedder", input: "x" }, { ...auth, origin: "https://evil.example" });
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    const badPre = await fetch(`${s.url}/api/embeddings`, { method: "OPTIONS", headers: { origin: "https://evil.example" } });
    expect(badPre.status).toBe(403);
    // Preflights are answered before the in-flight count: were they counted, graceful shutdown would wait for
    // them until its timeout. Every request above has been answered, so the count drains to zero.
    for (let i = 0; i < 100 && s.ctx.inflight > 0; i++) await Bun.sleep(10);
    expect(s.ctx.inflight).toBe(0);
  });

  test("body over the limit is a 413 in the common shape", async () => {
    const r = await postJson(`${s.url}/api/embeddings`, { model: "embedder", input: "x".repeat(3000) }, auth);
    expect(r.status).toBe(413);
    expect(r.json.error.code).toBe("payload_too_large");
    expect(r.json.error.message).toContain("2000-byte limit (--max-request-bytes)");
  });

  test("metrics change after requests", async () => {
    const before = await (await fetch(`${s.url}/metrics`)).text();
    const count = (text: string) => Number(/infinity_tokens_total\{model="embedder"\} (\d+)/.exec(text)?.[1] ?? 0);
    await postJson(`${s.url}/api/embeddings`, { model: "embedder", input: ["a b c", "d e f g"] }, auth);
    const after = await (await fetch(`${s.url}/metrics`)).text();
    expect(count(after)).toBeGreaterThan(count(before));
    for (const name of ["infinity_requests_total", "infinity_requests_in_flight", "infinity_request_duration_seconds_bucket", "infinity_queue_duration_seconds_count", "infinity_inference_duration_seconds_sum", "infinity_batch_size_bucket", "infinity_batch_tokens_bucket", "infinity_queue_depth", "infinity_model_memory_bytes", "process_resident_memory_bytes"]) {
      expect(after).toContain(name);
    }
    expect(after).toMatch(/infinity_requests_total\{[^}]*status="401"[^}]*\} \d+/);
  });

  test("OpenAPI document from the route schemas, and the docs page", async () => {
    const doc = (await (await fetch(`${s.url}/openapi.json`)).json()) as { paths: Record<string, any>; openapi: string };
    expect(doc.openapi).toStartWith("3.");
    for (const p of ["/api/embeddings", "/api/v1/embeddings", "/api/rerank", "/api/classify", "/api/models", "/health", "/metrics"]) expect(doc.paths[p]).toBeDefined();
    const schema = doc.paths["/api/embeddings"].post.requestBody.content["application/json"].schema;
    expect(schema.required).toContain("input");
    expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(["input", "model", "encoding_format", "dimensions"]));
    expect(doc.paths["/api/rerank"].post.security).toEqual([{ bearer: [] }]);
    const html = await (await fetch(`${s.url}/docs`)).text();
    expect(html).toContain("openapi.json");
    // Offline: the page loads only this server's own files (the viewer ships inside the server).
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.filter((r) => /^(https?:)?\/\//.test(r))).toEqual([]);
    for (const ref of refs) {
      const res = await fetch(new URL(ref, `${s.url}/docs`));
      expect(res.status).toBe(200);
      expect((await res.text()).length).toBeGreaterThan(ref.endsWith(".js") ? 100_000 : 0);
    }
    // /docs/ (a trailing slash) would resolve those links under /docs/docs/: it redirects to the page instead.
    const slash = await fetch(`${s.url}/docs/`, { redirect: "manual" });
    expect(slash.status).toBe(301);
    expect(new URL(slash.headers.get("location")!, `${s.url}/docs/`).href).toBe(`${s.url}/docs`);
    const followed = await fetch(`${s.url}/docs/`);
    expect(followed.url).toBe(`${s.url}/docs`);
    expect(await followed.text()).toBe(html);
  });
});

describe("memory budget", () => {
  test("the automatic token budget on CPU; inputs longer than an explicit budget run alone, correctly", async () => {
    const auto = await startTestServer({ "model-id": fixture("bert-mean-norm"), "model-warmup": "false" });
    const low = await startTestServer({ "model-id": fixture("bert-mean-norm"), "model-warmup": "false", "max-batch-tokens": "10" });
    try {
      const tokens = async (s: typeof auto) => ((await (await fetch(`${s.url}/models`)).json()) as { data: Array<{ max_batch_tokens: number }> }).data[0]!.max_batch_tokens;
      expect(await tokens(auto)).toBe(CPU_BATCH_TOKENS);
      expect(await tokens(low)).toBe(10);
      // Every input here is the same 13 tokens in another order, longer than 10: each runs in a batch of its own, and the vectors match the
      // automatic budget's (where the three share one batch).
      const input = ["a b c d e f g h i j k", "k j i h g f e d c b a", "b a d c f e h g j i k"];
      const embed = async (s: typeof auto) => {
        const res = await postJson(`${s.url}/embeddings`, { model: "m", input, encoding_format: "float" });
        expect(res.status).toBe(200);
        return (res.json as { data: Array<{ embedding: number[] }> }).data.map((d) => d.embedding);
      };
      const [a, b] = await Promise.all([embed(auto), embed(low)]);
      for (let i = 0; i < input.length; i++) expect(maxAbsDiff(a[i]!, b[i]!)).toBeLessThan(1e-5);
      const batches = async (s: typeof auto) => {
        const m = /^infinity_batch_size_count\S* (\d+)/m.exec(await (await fetch(`${s.url}/metrics`)).text());
        return Number(m?.[1]);
      };
      expect(await batches(low)).toBe(3);
      expect(await batches(auto)).toBe(1);
    } finally {
      await auto.shutdown();
      await low.shutdown();
    }
  });

  test("a budget lowers the batch token budget; /models reports it", async () => {
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), "memory-budget-mb": "4000", "max-batch-tokens": "100000000" });
    try {
      const models = (await (await fetch(`${s.url}/models`)).json()) as { data: Array<{ max_batch_tokens: number; max_batch_tokens_source: string }> };
      expect(models.data[0]!.max_batch_tokens).toBeLessThan(100000000);
      expect(models.data[0]!.max_batch_tokens_source).toBe("memory-budget");
      expect(models.data[0]!.max_batch_tokens).toBeGreaterThanOrEqual(48);
    } finally {
      await s.shutdown();
    }
  });

  test("the budget arithmetic: tokens that fit after the session, and a clear error when one input does not", () => {
    // 100 MB budget, 20 MB session, 40 KB per token -> 2048 tokens.
    expect(tokenBudgetWithin(100, 20 * 1048576, 40960, 512, "m")).toBe(2048);
    expect(() => tokenBudgetWithin(30, 20 * 1048576, 40960, 512, "big-model")).toThrow(/too small for big-model: one full-length input needs about 40 MB/);
  });
});

describe("graceful shutdown", () => {
  test("in-flight and queued requests are answered; new ones get 503; health says stopping", async () => {
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), "batch-size": "2" });
    const texts = Array.from({ length: 40 }, (_, i) => `request number ${i} with some words to embed`);
    const inflight = texts.map((t) => postJson(`${s.url}/embeddings`, { input: [t, t + " again"] }));
    // Shut down only once the server has received all 40 (answered or in flight): a request arriving after the
    // shutdown began correctly gets 503, which under load would make this test flaky.
    const answered = () => s.ctx.metrics.requests.get({ route: "/embeddings", method: "POST", status: "200" });
    for (const until = Date.now() + 30000; s.ctx.inflight + answered() < texts.length && Date.now() < until;) await Bun.sleep(2);
    const stopping = s.shutdown();
    const health = await fetch(`${s.url}/health`).catch(() => null);
    if (health) expect(health.status).toBe(503);
    const late = await postJson(`${s.url}/embeddings`, { input: "late" }).catch(() => null);
    if (late) expect(late.status).toBe(503);
    const results = await Promise.all(inflight);
    for (const r of results) expect(r.status).toBe(200);
    await stopping;
  });
});

describe("client disconnect", () => {
  test("a client that goes away has its queued inputs dropped; others are served", async () => {
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), "batch-size": "1", "model-warmup": "false" });
    try {
      const tokensRun = async () => Number(/infinity_tokens_total\{model="bert-mean-norm"\} (\d+)/.exec(await (await fetch(`${s.url}/metrics`)).text())?.[1] ?? 0);
      const long = Array.from({ length: 2000 }, (_, i) => `a long enough sentence number ${i} to keep the engine busy for a while, and a little longer still`);
      const busy = postJson(`${s.url}/embeddings`, { input: long });
      // Wait until the long request sits in the engine's queue, so the next one queues behind it.
      const engine = s.ctx.registry.list()[0]!.engine;
      while (engine.queued < 1000) await Bun.sleep(2);
      // A raw HTTP client that sends a request and hangs up before the answer.
      const body = JSON.stringify({ input: Array.from({ length: 50 }, (_, i) => `abandoned input ${i}`) });
      const port = new URL(s.url).port;
      const socket = await Bun.connect({
        hostname: "127.0.0.1",
        port: Number(port),
        socket: { data() {}, open() {}, close() {}, error() {} },
      });
      const before = engine.queued;
      socket.write(`POST /embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      // The abandoned request's 50 inputs are queued (behind the long request) before the client hangs up.
      while (engine.queued < before + 30) await Bun.sleep(1);
      socket.end();
      const after = postJson(`${s.url}/embeddings`, { input: "served after the abandoned one" });
      const a = await busy;
      const b = await after;
      expect(a.status).toBe(200);
      expect(b.status).toBe(200);
      await Bun.sleep(50);
      // Every token run belongs to the two answered requests: none of the abandoned inputs ran.
      expect(await tokensRun()).toBe(a.json.usage.prompt_tokens + b.json.usage.prompt_tokens);
      expect(s.ctx.registry.list()[0]!.engine.queued).toBe(0);
    } finally {
      await s.shutdown();
    }
  });
});

describe("/health follows the engines", () => {
  test("503 while loading, 200 when ready, 503 when an engine is broken", async () => {
    const config = buildConfig({
      flags: new Map([["model-id", [fixture("bert-mean-norm")]], ["host", ["127.0.0.1"]], ["port", ["0"]], ["tokenizer-workers", ["1"]]]),
      env: {},
      file: null,
      cpuCount: 2,
    });
    const s = startServer(config, offlineHub);
    try {
      const loading = await fetch(`${s.url}/health`);
      expect(loading.status).toBe(503);
      expect(((await loading.json()) as { status: string }).status).toBe("loading");
      await s.loaded;
      expect((await fetch(`${s.url}/health`)).status).toBe(200);
      const engine = s.ctx.registry.list()[0]!.engine;
      engine.state = "broken";
      engine.lastError = "simulated";
      const broken = await fetch(`${s.url}/health`);
      expect(broken.status).toBe(503);
      const body = (await broken.json()) as { status: string; models: Array<{ error: string }> };
      expect(body.status).toBe("broken");
      expect(body.models[0]!.error).toBe("simulated");
      engine.state = "ready";
    } finally {
      await s.shutdown();
    }
  });
});
