// /health, /models and /metrics while a model's inference worker is busy, dies or hangs: the event loop keeps
// answering, the model shows `broken` while it has no working worker, every accepted request gets an answer, and
// shutdown answers what it could not run within --shutdown-timeout.
import { describe, expect, test } from "bun:test";
import { fixture, postJson, startTestServer } from "../helpers";

const MODEL = fixture("bert-mean-norm");

async function health(url: string): Promise<{ status: number; json: any; ms: number }> {
  const t0 = performance.now();
  const res = await fetch(`${url}/health`);
  return { status: res.status, json: await res.json(), ms: performance.now() - t0 };
}

describe("inference worker faults, seen from HTTP", () => {
  test("a worker that hangs: /health keeps answering at once; past --inference-timeout the batch is retried on a new worker", async () => {
    const s = await startTestServer({ "model-id": MODEL, "inference-timeout": "2", "model-warmup": "false" });
    try {
      const want = await postJson(`${s.url}/embeddings`, { input: "a hanging worker", encoding_format: "float" });
      expect(want.status).toBe(200);
      s.ctx.registry.list()[0]!.session.injectFault("hang");
      let settled = false;
      const pending = postJson(`${s.url}/embeddings`, { input: "a hanging worker", encoding_format: "float" }).finally(
        () => (settled = true),
      );
      const polls: number[] = [];
      let answeredWhileStuck = 0;
      for (let i = 0; i < 8; i++) {
        await Bun.sleep(60);
        const h = await health(s.url);
        expect(h.status).toBe(200);
        polls.push(h.ms);
        if (!settled) answeredWhileStuck++;
      }
      // The loop is never held by the stuck run: /health answers while the batch is still stuck (a run on the main
      // thread would hold every poll until the 2 s --inference-timeout, so none would answer before the batch does),
      // and no poll waits anywhere near that long. The bounds leave room for a loaded CI machine (2 cores, load ~14
      // in helpers' full runs gave single polls of 600+ ms).
      expect(answeredWhileStuck).toBeGreaterThanOrEqual(3);
      expect(Math.max(...polls)).toBeLessThan(1500);
      const got = await pending;
      expect(got.status).toBe(200);
      expect(got.json.data[0].embedding).toEqual(want.json.data[0].embedding);
      const models = (await (await fetch(`${s.url}/models`)).json()) as any;
      const worker = models.data[0].inference_workers[0];
      expect(worker.restarts).toBe(1);
      expect(worker.state).toBe("ready");
      expect(worker.last_fault).toContain("hung");
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      expect(metrics).toMatch(/infinity_inference_worker_restarts_total\{model="bert-mean-norm"\} 1/);
      expect(metrics).toMatch(/infinity_event_loop_lag_seconds_count [1-9]/);
    } finally {
      await s.shutdown();
    }
  });

  test("a batch whose worker dies twice gets a 503 in the one error shape; the model is broken until a new worker serves", async () => {
    const s = await startTestServer({ "model-id": MODEL, "model-warmup": "false" });
    try {
      const session = s.ctx.registry.list()[0]!.session;
      // The run, its replacement's session creation, and the second replacement's: the model has no worker left.
      session.injectFault("exit", 3);
      const r = await postJson(`${s.url}/embeddings`, { input: "lost twice" });
      expect(r.status).toBe(503);
      expect(r.json.error.code).toBe("inference_worker_failed");
      expect(r.json.error.type).toBe("service_unavailable_error");
      expect(r.headers.get("retry-after")).toBe("1");
      const h = await health(s.url);
      expect(h.status).toBe(503);
      expect(h.json.status).toBe("broken");
      expect(h.json.models[0].state).toBe("broken");
      expect(h.json.models[0].workers[0].state).toBe("failed");
      expect(h.json.models[0].error).toContain("exited");
      // The next request starts a new worker and is served; the model is ready again.
      const ok = await postJson(`${s.url}/embeddings`, { input: "served again" });
      expect(ok.status).toBe(200);
      expect((await health(s.url)).status).toBe(200);
    } finally {
      await s.shutdown();
    }
  });

  test("models run concurrently: while one model's worker is stuck in a batch, another model keeps serving", async () => {
    const s = await startTestServer({
      "model-id": [MODEL, MODEL], "served-model-name": ["stuck", "free"], "inference-timeout": "0", "shutdown-timeout": "1", "model-warmup": "false",
    });
    const stuck = s.ctx.registry.list().find((m) => m.name === "stuck")!;
    stuck.session.injectFault("hang");
    const pending = postJson(`${s.url}/embeddings`, { model: "stuck", input: "held" });
    await Bun.sleep(100);
    try {
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        const r = await postJson(`${s.url}/embeddings`, { model: "free", input: `free ${i}` });
        expect(r.status).toBe(200);
        expect(performance.now() - t0).toBeLessThan(1000);
      }
    } finally {
      await s.shutdown();
    }
    expect((await pending).status).toBe(503);
  });

  test("shutdown with a stuck batch answers it (503) within --shutdown-timeout instead of losing it", async () => {
    const s = await startTestServer({ "model-id": MODEL, "inference-timeout": "0", "shutdown-timeout": "1", "model-warmup": "false" });
    s.ctx.registry.list()[0]!.session.injectFault("hang");
    const stuck = postJson(`${s.url}/embeddings`, { input: "never finishes" });
    await Bun.sleep(100);
    // Queued behind the stuck batch.
    const queued = postJson(`${s.url}/embeddings`, { input: ["queued one", "queued two"] });
    await Bun.sleep(100);
    const t0 = performance.now();
    await s.shutdown();
    expect(performance.now() - t0).toBeLessThan(5000);
    const [a, b] = await Promise.all([stuck, queued]);
    for (const r of [a, b]) {
      expect(r.status).toBe(503);
      expect(typeof r.json.error.message).toBe("string");
    }
  });
});
