// --instances: several session instances of one model, each in its own inference worker, running different batches
// at once. Parity with the sentence-transformers reference is unchanged, concurrent requests spread over the
// instances, an instance that dies is replaced and its batch retried (503 when it dies again), one stuck instance
// leaves the other serving, and warm-up calibrates the instance count when neither it nor --num-threads is given.
import { describe, expect, test } from "bun:test";
import { fixture, l2, maxAbsDiff, postJson, reference, startTestServer } from "../helpers";

const MODEL = fixture("bert-mean-norm");

type ModelInfo = {
  id: string;
  instances: number | null;
  intra_op_threads: number;
  instances_source: string | null;
  instances_reason: string | null;
  memory_bytes: number | null;
  max_batch_tokens: number;
  inference_workers: Array<{ state: string; restarts: number; last_fault: string | null; intra_op_threads: number; memory_bytes: number; batches: number }>;
};

async function modelsOf(url: string): Promise<Record<string, ModelInfo>> {
  const json = (await (await fetch(`${url}/models`)).json()) as { data: ModelInfo[] };
  return Object.fromEntries(json.data.map((m) => [m.id, m]));
}

describe("--instances", () => {
  test("two instances: /models shows both workers; parity with the reference, alone and as concurrent requests", async () => {
    const s = await startTestServer({ "model-id": MODEL, instances: "2", "model-warmup": "false" });
    try {
      const m = (await modelsOf(s.url))["bert-mean-norm"]!;
      expect([m.instances, m.intra_op_threads, m.instances_source]).toEqual([2, 1, "flag"]);
      expect(m.inference_workers.map((w) => [w.state, w.restarts, w.intra_op_threads])).toEqual([["ready", 0, 1], ["ready", 0, 1]]);
      const ref = await reference("bert-mean-norm");
      const texts: string[] = ref.cases.map((c: { text: string }) => c.text);
      const requests = Array.from({ length: 24 }, (_, r) => {
        const order = texts.map((_, i) => (i + r) % texts.length).slice(0, 1 + (r % 4));
        return postJson(`${s.url}/embeddings`, { input: order.map((i) => texts[i]), encoding_format: "float" }).then((res) => ({ res, order }));
      });
      for (const { res, order } of await Promise.all(requests)) {
        expect(res.status).toBe(200);
        order.forEach((k, i) => expect(maxAbsDiff(res.json.data[i].embedding, l2(ref.cases[k].embedding))).toBeLessThanOrEqual(1e-4));
      }
    } finally {
      await s.shutdown();
    }
  });

  test("while one instance is stuck in a batch, the other serves the model; shutdown answers the stuck batch with 503", async () => {
    const s = await startTestServer({ "model-id": MODEL, instances: "2", "inference-timeout": "0", "shutdown-timeout": "1", "model-warmup": "false" });
    const session = s.ctx.registry.list()[0]!.session;
    session.injectFault("hang");
    const stuck = postJson(`${s.url}/embeddings`, { input: "held by a stuck instance" });
    // The stuck batch has reached its worker before the next request is sent.
    await Bun.sleep(100);
    for (let i = 0; i < 3; i++) {
      const r = await postJson(`${s.url}/embeddings`, { input: `served by the other instance ${i}` });
      expect(r.status).toBe(200);
    }
    await s.shutdown();
    const held = await stuck;
    expect(held.status).toBe(503);
  });

  test("an instance that dies is replaced and its batch retried; dying again answers 503, and the model comes back", async () => {
    const s = await startTestServer({ "model-id": MODEL, instances: "2", "model-warmup": "false" });
    try {
      const session = s.ctx.registry.list()[0]!.session;
      const want = await postJson(`${s.url}/embeddings`, { input: "a crashing instance", encoding_format: "float" });
      session.injectFault("exit");
      const got = await postJson(`${s.url}/embeddings`, { input: "a crashing instance", encoding_format: "float" });
      expect(got.status).toBe(200);
      expect(got.json.data[0].embedding).toEqual(want.json.data[0].embedding);
      let workers = (await modelsOf(s.url))["bert-mean-norm"]!.inference_workers;
      expect(workers.map((w) => w.state)).toEqual(["ready", "ready"]);
      expect(workers.map((w) => w.restarts).sort()).toEqual([0, 1]);
      expect(workers.find((w) => w.restarts === 1)!.last_fault).toContain("exited");
      // The run, its replacement's creation and the next replacement's: that batch has no worker left.
      session.injectFault("exit", 3);
      const lost = await postJson(`${s.url}/embeddings`, { input: "lost twice" });
      expect(lost.status).toBe(503);
      expect(lost.json.error.code).toBe("inference_worker_failed");
      const health = (await (await fetch(`${s.url}/health`)).json()) as { models: Array<{ state: string }> };
      expect(health.models[0]!.state).toBe("broken");
      // Later requests are served (the other instance, or a new worker for the failed one).
      for (let i = 0; i < 3; i++) expect((await postJson(`${s.url}/embeddings`, { input: `again ${i}` })).status).toBe(200);
    } finally {
      await s.shutdown();
    }
  });

  test("each instance's memory is measured and shown per inference worker; the model's memory counts them all", async () => {
    // The run overhead and token budget given: warm-up's runs are then only its full batches.
    const s = await startTestServer({ "model-id": [MODEL, MODEL], "served-model-name": ["one", "two"], instances: ["1", "2"], "num-threads": "1", "run-overhead-tokens": "24", "max-batch-tokens": "512" });
    try {
      const by = await modelsOf(s.url);
      for (const m of [by.one!, by.two!]) {
        expect(m.inference_workers).toHaveLength(m.instances!);
        for (const w of m.inference_workers) expect(Number.isInteger(w.memory_bytes) && w.memory_bytes >= 0).toBe(true);
        // Warm-up runs its batch twice on every instance, one at a time, so each instance's arena is grown and measured.
        expect(m.inference_workers.map((w) => w.batches)).toEqual(m.inference_workers.map(() => 2));
        // The model's figure (what --max-models-memory-mb counts) holds every instance's.
        expect(m.memory_bytes!).toBeGreaterThanOrEqual(m.inference_workers.reduce((sum, w) => sum + w.memory_bytes, 0));
      }
      expect(by.two!.instances_reason).toBe("--instances 2");
    } finally {
      await s.shutdown();
    }
  });

  test("--memory-budget-mb holds one batch per instance: two instances get half the batch token budget", async () => {
    // No warm-up: the activation estimate is the architecture's, the same for both, so only the instances differ.
    const s = await startTestServer({
      "model-id": [MODEL, MODEL], "served-model-name": ["one", "two"], instances: ["1", "2"], "num-threads": "1",
      "memory-budget-mb": "4000", "max-batch-tokens": "100000000", "model-warmup": "false",
    });
    try {
      const by = await modelsOf(s.url);
      const one = by.one!.max_batch_tokens, two = by.two!.max_batch_tokens;
      expect(one).toBeLessThan(100000000);
      // Each instance's session is measured apart (a few MB against 4000): within 1% of half.
      expect(Math.abs(two / one - 0.5)).toBeLessThan(0.01);
    } finally {
      await s.shutdown();
    }
  });

  test("--instances 0 without --num-threads calibrates at warm-up within --max-models-memory-mb (2 cores: 1 x 2 threads or 2 x 1); with either set, or no warm-up, nothing is timed", async () => {
    const s = await startTestServer({
      "model-id": [MODEL, MODEL, MODEL],
      "served-model-name": ["auto", "threads-set", "cold"],
      // 0: all cores (the test config has 2): the instance count is open.
      "num-threads": ["0", "1", "0"],
      "model-warmup": ["true", "true", "false"],
      "max-models-memory-mb": "8000",
    });
    try {
      const by = await modelsOf(s.url);
      const auto = by.auto!;
      expect(auto.instances_source).toBe("calibrated");
      expect([[1, 2], [2, 1]]).toContainEqual([auto.instances!, auto.intra_op_threads]);
      expect(auto.inference_workers).toHaveLength(auto.instances!);
      expect(auto.inference_workers.every((w) => w.state === "ready" && w.intra_op_threads === auto.intra_op_threads)).toBe(true);
      // The reason gives both timings and both memories, and the decision they led to.
      expect(auto.instances_reason).toMatch(/^2 x 1 thread timed [\d.]+x as fast as 1 x 2 threads \(\d+ against \d+ tokens\/s\) for [\d.]+x the memory \(\d+ MB against \d+ MB\)/);
      expect(auto.instances_reason).toMatch(auto.instances === 2 ? /: 2 instances$/ : /: one session$/);
      expect([by["threads-set"]!.instances, by["threads-set"]!.intra_op_threads, by["threads-set"]!.instances_source]).toEqual([1, 1, "default"]);
      expect(by["threads-set"]!.instances_reason).toBe("one session: --num-threads 1 given");
      expect([by.cold!.instances, by.cold!.intra_op_threads, by.cold!.instances_source]).toEqual([1, 2, "default"]);
      const ref = await reference("bert-mean-norm");
      const r = await postJson(`${s.url}/embeddings`, { model: "auto", input: ref.cases[0].text, encoding_format: "float" });
      expect(maxAbsDiff(r.json.data[0].embedding, l2(ref.cases[0].embedding))).toBeLessThanOrEqual(1e-4);
    } finally {
      await s.shutdown();
    }
  });

  test("without --max-models-memory-mb (the default) warm-up does not trade memory for speed: one session with all cores, and /models says why", async () => {
    const s = await startTestServer({ "model-id": MODEL, "num-threads": "0" });
    try {
      const m = (await modelsOf(s.url))["bert-mean-norm"]!;
      expect([m.instances, m.intra_op_threads, m.instances_source]).toEqual([1, 2, "default"]);
      expect(m.instances_reason).toBe("one session: instances are calibrated only within --max-models-memory-mb (each holds its own weights); --instances 2 --num-threads 1 sets them");
    } finally {
      await s.shutdown();
    }
  });
});
