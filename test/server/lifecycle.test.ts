// Models on demand seen from HTTP: unloaded at start with /health 200, the first request loads (concurrent ones
// share the load), idle unloading, the admin routes behind the API key, the memory budget's eviction and 503, a
// model that fails to load (503 with Retry-After, no retry before the backoff), unload pressure on a model that
// requests in progress hold.
import { describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fixture, fixtureBytes, postJson, startTestServer } from "../helpers";

/** A loopback file server answering every request with `png` after `delayMs`: requests fetching from it hold their
 * model with its engine idle meanwhile. */
function slowImages(png: Uint8Array<ArrayBuffer>, delayMs: number) {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch() {
      await Bun.sleep(delayMs);
      return new Response(png, { headers: { "content-type": "image/png" } });
    },
  });
}

async function models(url: string, headers: Record<string, string> = {}): Promise<Record<string, any>> {
  const body = (await (await fetch(`${url}/models`, { headers })).json()) as { data: any[] };
  return Object.fromEntries(body.data.map((m) => [m.id, m]));
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(name)).reduce((s, l) => s + Number(l.split(" ").pop()), 0);
}

describe("models on demand", () => {
  test("unloaded at start (health 200), loaded by the first requests, which share one load", async () => {
    const s = await startTestServer({
      "model-id": [fixture("bert-mean-norm"), fixture("bert-rerank")],
      "served-model-name": ["embedder", "reranker"],
      load: ["startup", "on-demand"],
    });
    try {
      let m = await models(s.url);
      expect(m.embedder.state).toBe("ready");
      expect(m.reranker.state).toBe("unloaded");
      expect(m.reranker.load).toBe("on-demand");
      expect(m.reranker.memory_bytes).toBeNull();
      expect(m.reranker.task).toBe("rerank");
      expect((await fetch(`${s.url}/health`)).status).toBe(200);
      expect((await fetch(`${s.url}/live`)).status).toBe(200);
      const body = { model: "reranker", query: "cats", documents: ["a cat", "a rocket"] };
      const answers = await Promise.all(Array.from({ length: 6 }, () => postJson(`${s.url}/rerank`, body)));
      for (const a of answers) expect(a.status).toBe(200);
      expect(answers[5]!.json.results).toEqual(answers[0]!.json.results);
      expect(await metric(s.url, 'infinity_model_loads_total{model="reranker"}')).toBe(1);
      expect(await metric(s.url, 'infinity_model_load_seconds_count{model="reranker"}')).toBe(1);
      m = await models(s.url);
      expect(m.reranker.state).toBe("ready");
      expect(m.reranker.memory_bytes).toBeGreaterThan(0);
      expect(m.reranker.last_used).toBeGreaterThan(Date.now() / 1000 - 60);
      expect(m.reranker.load_seconds).toBeGreaterThan(0);
      // The capability check needs no load: an embedder request for the reranker is a 400 at once.
      const wrong = await postJson(`${s.url}/embeddings`, { model: "reranker", input: "x" });
      expect(wrong.status).toBe(400);
    } finally {
      await s.shutdown();
    }
  });

  test("an idle model is unloaded after --idle-unload-seconds and loaded again by the next request", async () => {
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), "idle-unload-seconds": "1" });
    try {
      const first = await postJson(`${s.url}/embeddings`, { input: "hello" });
      expect((await models(s.url))["bert-mean-norm"].state).toBe("ready");
      // Unloaded (the state turns at once), then released (the metric counts it).
      const unloads = () => metric(s.url, 'infinity_model_unloads_total{model="bert-mean-norm",reason="idle"}');
      for (let i = 0; i < 60 && (await unloads()) === 0; i++) await Bun.sleep(100);
      expect((await models(s.url))["bert-mean-norm"].state).toBe("unloaded");
      expect(s.ctx.registry.list()).toHaveLength(0);
      expect(await unloads()).toBe(1);
      expect((await fetch(`${s.url}/health`)).status).toBe(200);
      const again = await postJson(`${s.url}/embeddings`, { input: "hello" });
      expect(again.status).toBe(200);
      expect(again.json.data).toEqual(first.json.data);
      expect(await metric(s.url, 'infinity_model_loads_total{model="bert-mean-norm"}')).toBe(2);
    } finally {
      await s.shutdown();
    }
  });

  test("admin routes load and unload behind the API key", async () => {
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), load: "on-demand", "api-key": "secret" });
    const auth = { authorization: "Bearer secret" };
    try {
      expect((await fetch(`${s.url}/models/bert-mean-norm/load`, { method: "POST" })).status).toBe(401);
      const loaded = await fetch(`${s.url}/models/bert-mean-norm/load`, { method: "POST", headers: auth });
      expect(loaded.status).toBe(200);
      expect(((await loaded.json()) as any).state).toBe("ready");
      const unloaded = await fetch(`${s.url}/v1/models/bert-mean-norm/unload`, { method: "POST", headers: auth });
      expect(unloaded.status).toBe(200);
      expect(((await unloaded.json()) as any).state).toBe("unloaded");
      expect(await metric(s.url, 'infinity_model_unloads_total{model="bert-mean-norm",reason="admin"}')).toBe(1);
      const unknown = await fetch(`${s.url}/models/nope/load`, { method: "POST", headers: auth });
      expect(unknown.status).toBe(400);
      expect(((await unknown.json()) as any).error.code).toBe("model_not_found");
    } finally {
      await s.shutdown();
    }
  });

  test("--max-models-memory-mb unloads the least recently used idle model, and answers 503 when none is idle", async () => {
    const s = await startTestServer({
      "model-id": [fixture("bert-mean-norm"), fixture("bert-classify")],
      "served-model-name": ["a", "b"],
      load: "on-demand",
      "max-models-memory-mb": "100",
      "model-warmup": "false",
    });
    const MB = 1048576;
    // The fixture models weigh under a megabyte and their measured memory depends on what the test process
    // already holds, so the test sets what the registry measured, as a large model would have.
    const loaded = (name: string) => s.ctx.registry.list().find((x) => x.name === name)!;
    try {
      expect((await postJson(`${s.url}/embeddings`, { model: "a", input: "x" })).status).toBe(200);
      loaded("a").memoryBytes = 99 * MB;
      await Bun.sleep(400);
      expect((await postJson(`${s.url}/classify`, { model: "b", input: "x" })).status).toBe(200);
      let m = await models(s.url);
      expect(m.a.state).toBe("unloaded");
      expect(m.b.state).toBe("ready");
      expect(await metric(s.url, 'infinity_model_evictions_total{model="a"}')).toBe(1);
      loaded("b").memoryBytes = 100 * MB;

      // b busy with a long request: loading a cannot make room.
      const long = Array.from({ length: 1500 }, (_, i) => `a long enough sentence number ${i} to keep the classifier busy for a while`);
      const busy = postJson(`${s.url}/classify`, { model: "b", input: long });
      const engine = () => s.ctx.registry.list().find((x) => x.name === "b")!.engine;
      for (let i = 0; i < 5000 && engine().queued < 500; i++) await Bun.sleep(2);
      expect(engine().busy).toBe(true);
      const refused = await postJson(`${s.url}/embeddings`, { model: "a", input: "x" });
      expect(refused.status).toBe(503);
      expect(refused.json.error.code).toBe("memory_budget_exceeded");
      expect(refused.json.error.message).toContain("--max-models-memory-mb 100");
      expect(refused.json.error.message).toContain("b (100 MB, in use by 1 request)");
      expect(refused.headers.get("retry-after")).toBe("1");
      expect((await busy).status).toBe(200);
      m = await models(s.url);
      expect(m.a.state).toBe("unloaded");
    } finally {
      await s.shutdown();
    }
  });

  test("a model whose load fails: 503 model_load_failed with Retry-After, one try per backoff, served once fixed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "infinity-failing-model-"));
    const folder = join(dir, "embedder");
    cpSync(fixture("bert-mean-norm"), folder, { recursive: true });
    const onnx = join(folder, "onnx", "model.onnx");
    const graph = readFileSync(onnx);
    // The folder reads fine at startup (on-demand); the session cannot be built from this file (the export: a BERT
    // would otherwise be built from its safetensors).
    writeFileSync(onnx, "this is not an ONNX graph");
    const s = await startTestServer({ "model-id": folder, load: "on-demand", "model-load-retry-seconds": "2", graph: "export" });
    try {
      const first = await postJson(`${s.url}/embeddings`, { input: "hello" });
      expect(first.status).toBe(503);
      expect(first.json.error.code).toBe("model_load_failed");
      expect(first.headers.get("retry-after")).toBe("2");
      // A burst within the backoff: all refused at once in the error shape, no load tried.
      const burst = await Promise.all(Array.from({ length: 12 }, () => postJson(`${s.url}/embeddings`, { input: "hello" })));
      for (const r of burst) {
        expect(r.status).toBe(503);
        expect(r.json.error.code).toBe("model_load_failed");
        expect(r.json.error.message).toContain("--model-load-retry-seconds");
        expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      }
      expect(await metric(s.url, "infinity_model_load_failures_total")).toBe(1);
      const m = await models(s.url);
      expect(m.embedder.state).toBe("broken");
      // Fixed on disk; after the backoff the next request loads it.
      writeFileSync(onnx, graph);
      await Bun.sleep(2100);
      const ok = await postJson(`${s.url}/embeddings`, { input: "hello" });
      expect(ok.status).toBe(200);
      expect(await metric(s.url, "infinity_model_load_failures_total")).toBe(1);
      expect(await metric(s.url, "infinity_model_loads_total")).toBe(1);
      expect((await models(s.url)).embedder.state).toBe("ready");
    } finally {
      await s.shutdown();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("unload pressure while requests are in flight: a model is never unloaded under a request it was given", async () => {
    const png = await fixtureBytes("media/landscape.png");
    // Each image arrives 1.5 s after it is asked for: the requests hold clip with its engine idle, longer than its
    // --idle-unload-seconds and the eviction grace, before they queue anything.
    const files = slowImages(png, 1500);
    const s = await startTestServer({ "model-id": fixture("clip"), load: "on-demand", "idle-unload-seconds": "1" });
    try {
      const image = `http://127.0.0.1:${files.port}/landscape.png`;
      const want = await postJson(`${s.url}/embeddings`, { input: `data:image/png;base64,${Buffer.from(png).toString("base64")}`, modality: "image" });
      expect(want.status).toBe(200);
      // Staggered requests (the idle sweeper runs meanwhile), then an admin unload while they are in flight.
      const inFlight: Promise<{ status: number; json: any }>[] = [];
      for (let i = 0; i < 4; i++) {
        inFlight.push(postJson(`${s.url}/embeddings`, { input: `${image}?n=${i}`, modality: "image" }));
        await Bun.sleep(300);
      }
      const unloaded = fetch(`${s.url}/models/clip/unload`, { method: "POST" });
      const answers = await Promise.all(inFlight);
      for (const a of answers) {
        expect(a.status).toBe(200);
        expect(a.json.data[0].embedding).toEqual(want.json.data[0].embedding);
      }
      expect((await unloaded).status).toBe(200);
      expect((await models(s.url)).clip.state).toBe("unloaded");
      expect(await metric(s.url, "infinity_model_unloads_total")).toBeGreaterThanOrEqual(1);
    } finally {
      files.stop(true);
      await s.shutdown();
    }
  });

  test("eviction pressure while a request holds its model: the other load gets 503, the request its answer", async () => {
    const png = await fixtureBytes("media/landscape.png");
    const files = slowImages(png, 1500);
    const s = await startTestServer({
      "model-id": [fixture("clip"), fixture("bert-mean-norm")],
      "served-model-name": ["clip", "text"],
      load: "on-demand",
      "max-models-memory-mb": "100",
      "model-warmup": "false",
    });
    const MB = 1048576;
    try {
      const want = await postJson(`${s.url}/embeddings`, { model: "clip", input: `data:image/png;base64,${Buffer.from(png).toString("base64")}`, modality: "image" });
      expect(want.status).toBe(200);
      // As in the budget test above: what the registry measured set to a large model's, so only one fits.
      s.ctx.registry.list().find((x) => x.name === "clip")!.memoryBytes = 100 * MB;
      const held = postJson(`${s.url}/embeddings`, { model: "clip", input: `http://127.0.0.1:${files.port}/landscape.png`, modality: "image" });
      // clip's engine is idle and its last use past the eviction grace while the image is fetched.
      await Bun.sleep(700);
      const refused = await postJson(`${s.url}/embeddings`, { model: "text", input: "x" });
      expect(refused.status).toBe(503);
      expect(refused.json.error.code).toBe("memory_budget_exceeded");
      expect(refused.json.error.message).toContain("clip (100 MB, in use by 1 request)");
      const answer = await held;
      expect(answer.status).toBe(200);
      expect(answer.json.data[0].embedding).toEqual(want.json.data[0].embedding);
      // Answered: clip may go now.
      await Bun.sleep(400);
      expect((await postJson(`${s.url}/embeddings`, { model: "text", input: "x" })).status).toBe(200);
      expect(await metric(s.url, 'infinity_model_evictions_total{model="clip"}')).toBe(1);
    } finally {
      files.stop(true);
      await s.shutdown();
    }
  });

  test("liveness stays 200 while readiness says stopping", async () => {
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), "model-warmup": "false" });
    try {
      s.ctx.shuttingDown = true;
      expect((await fetch(`${s.url}/health`)).status).toBe(503);
      expect((await fetch(`${s.url}/live`)).status).toBe(200);
      expect((await fetch(`${s.url}/models`)).status).toBe(503);
    } finally {
      s.ctx.shuttingDown = false;
      await s.shutdown();
    }
  });
});
