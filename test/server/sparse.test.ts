// Sparse (SPLADE) encoders through the HTTP API: parity with sentence-transformers' SparseEncoder on
// /embeddings (indices + values) and /embed_sparse (TEI shape), pruning, and both layouts (SparseEncoder folder,
// masked-LM export declared with --pooling-method splade).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RunningServer } from "../../src/server/serve";
import { fixture, maxAbsDiff, postJson, reference, startTestServer } from "../helpers";

let server: RunningServer;
let url: string;
let ref: { vocab_size: number; cases: { text: string; input_ids: number[]; indices: number[]; values: number[] }[] };

beforeAll(async () => {
  ref = await reference("splade");
  server = await startTestServer({
    "model-id": [fixture("splade"), fixture("splade-mlm"), fixture("bert-mean-norm")],
    "pooling-method": ["auto", "splade", "auto"],
    "batch-size": "4",
    // parity only: warm-up's timed runs add nothing here (warm-up itself: options.test.ts, instances.test.ts)
    "model-warmup": "false",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

function dense(indices: ArrayLike<number>, values: ArrayLike<number>, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < indices.length; i++) out[indices[i]!] = values[i]!;
  return out;
}

function expectAscending(indices: number[]) {
  for (let i = 1; i < indices.length; i++) expect(indices[i]!).toBeGreaterThan(indices[i - 1]!);
}

describe("parity with SparseEncoder.encode", () => {
  for (const name of ["splade", "splade-mlm"]) {
    test(`${name}: /embeddings answers {indices, values}, all texts in one batched request`, async () => {
      const { status, json } = await postJson(`${url}/embeddings`, { model: name, input: ref.cases.map((c) => c.text) });
      expect(status).toBe(200);
      ref.cases.forEach((c, i) => {
        const e = json.data[i].embedding;
        expectAscending(e.indices);
        expect(maxAbsDiff(dense(e.indices, e.values, ref.vocab_size), dense(c.indices, c.values, ref.vocab_size))).toBeLessThanOrEqual(1e-4);
        expect(e.indices.length).toBeGreaterThan(0);
      });
      expect(json.usage.prompt_tokens).toBe(ref.cases.reduce((s, c) => s + c.input_ids.length, 0));
    });
  }

  test("/embed_sparse answers TEI's [[{index, value}]], one request per text", async () => {
    for (const c of ref.cases.slice(0, 6)) {
      const { status, json } = await postJson(`${url}/embed_sparse`, { model: "splade", inputs: c.text });
      expect(status).toBe(200);
      expect(json.length).toBe(1);
      const idx = json[0].map((x: { index: number }) => x.index);
      expectAscending(idx);
      const vals = json[0].map((x: { value: number }) => x.value);
      expect(maxAbsDiff(dense(idx, vals, ref.vocab_size), dense(c.indices, c.values, ref.vocab_size))).toBeLessThanOrEqual(1e-4);
    }
  });
});

describe("pruning", () => {
  test("top_k keeps the k largest weights; threshold drops the small ones", async () => {
    const c = ref.cases[4]!;
    const order = c.values.map((v, i) => [v, c.indices[i]!] as const).sort((a, b) => b[0] - a[0]);
    const { json } = await postJson(`${url}/embeddings`, { model: "splade", input: c.text, top_k: 5 });
    const top = json.data[0].embedding;
    expect(top.indices).toEqual(order.slice(0, 5).map((x) => x[1]).sort((a, b) => a - b));
    // Midway between the 10th and 11th weights, so float noise cannot move a weight across it.
    const cut = (order[9]![0] + order[10]![0]) / 2;
    const res = await postJson(`${url}/embed_sparse`, { model: "splade", inputs: [c.text], threshold: cut });
    expect(res.json[0].length).toBe(10);
    for (const x of res.json[0]) expect(x.value).toBeGreaterThan(cut);
  });
});

describe("errors", () => {
  test("bad options and wrong models answer 400 in the one error shape", async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ["/embeddings", { model: "splade", input: "x", top_k: 0 }, /top_k/],
      ["/embed_sparse", { model: "splade", inputs: "x", threshold: -1 }, /threshold/],
      ["/embeddings", { model: "splade", input: "x", dimensions: 8 }, /dimensions/],
      ["/embed_sparse", { model: "bert-mean-norm", inputs: "x" }, /serves \/embeddings and \/rerank, not \/embed_sparse/],
      ["/embed_sparse", { model: "splade", inputs: [] }, /empty/],
    ];
    for (const [route, body, message] of cases) {
      const { status, json } = await postJson(`${url}${route}`, body);
      expect(status).toBe(400);
      expect(json.error.message).toMatch(message);
      expect(json.error.type).toBe("invalid_request_error");
    }
  });

  test("/models lists a sparse model's routes", async () => {
    const models = await (await fetch(`${url}/models`)).json();
    const m = models.data.find((x: { id: string }) => x.id === "splade");
    expect(m.task).toBe("sparse");
    expect(m.capabilities).toEqual(["embed", "embed_sparse", "rerank"]);
    expect(m.pooling).toBe("splade (max, relu)");
  });
});
