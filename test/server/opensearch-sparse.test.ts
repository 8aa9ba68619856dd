// Inference-free sparse models (OpenSearch doc-v2/v3-distill layout, sentence-transformers 6 Router SparseEncoder)
// through the HTTP API: queries from the static per-token weights (no model run), documents through the MLM +
// SpladePooling, compared with SparseEncoder.encode_query / encode_document (test/fixtures/generate/sparse.py).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RunningServer } from "../../src/server/serve";
import { fixture, postJson, reference, sparseDiff, startTestServer } from "../helpers";

interface Case { text: string; input_ids: number[]; indices: number[]; values: number[] }
let ref: { queries: Case[]; documents: Case[] };
let server: RunningServer;
let url: string;

beforeAll(async () => {
  ref = await reference("opensearch-sparse");
  // parity only: warm-up's timed runs add nothing here (warm-up itself: options.test.ts, instances.test.ts)
  server = await startTestServer({ "model-id": [fixture("opensearch-sparse"), fixture("splade")], "batch-size": "4", "model-warmup": "false" });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

const pairs = (json: { index: number; value: number }[]) => ({ indices: json.map((x) => x.index), values: json.map((x) => x.value) });

describe("queries: static token weights, no model run", () => {
  test("/embeddings with input_type query, batched and alone; usage counts content tokens", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model: "opensearch-sparse", input: ref.queries.map((c) => c.text), input_type: "query" });
    expect(status).toBe(200);
    ref.queries.forEach((c, i) => {
      expect(json.data[i].embedding.indices).toEqual(c.indices);
      expect(sparseDiff(json.data[i].embedding, c)).toBeLessThanOrEqual(1e-6);
    });
    expect(json.usage.prompt_tokens).toBe(ref.queries.reduce((s, c) => s + c.input_ids.length, 0));
    for (const c of ref.queries.slice(-4)) {
      const one = await postJson(`${url}/embeddings`, { model: "opensearch-sparse", input: c.text, input_type: "search_query" });
      expect(sparseDiff(one.json.data[0].embedding, c)).toBeLessThanOrEqual(1e-6);
    }
  });

  test("/embed_sparse with input_type query", async () => {
    const { status, json } = await postJson(`${url}/embed_sparse`, { model: "opensearch-sparse", inputs: ref.queries.map((c) => c.text), input_type: "query" });
    expect(status).toBe(200);
    ref.queries.forEach((c, i) => expect(sparseDiff(pairs(json[i]), c)).toBeLessThanOrEqual(1e-6));
  });
});

describe("documents: MLM + SpladePooling (log1p_relu)", () => {
  test("/embeddings with input_type document and without input_type (the default route), batched and alone", async () => {
    for (const body of [{ input_type: "document" }, {}]) {
      const { status, json } = await postJson(`${url}/embeddings`, { model: "opensearch-sparse", input: ref.documents.map((c) => c.text), ...body });
      expect(status).toBe(200);
      ref.documents.forEach((c, i) => expect(sparseDiff(json.data[i].embedding, c)).toBeLessThanOrEqual(1e-4));
      expect(json.usage.prompt_tokens).toBe(ref.documents.reduce((s, c) => s + c.input_ids.length, 0));
    }
    for (const c of ref.documents.slice(0, 5)) {
      const one = await postJson(`${url}/embed_sparse`, { model: "opensearch-sparse", inputs: c.text, input_type: "document" });
      expect(sparseDiff(pairs(one.json[0]), c)).toBeLessThanOrEqual(1e-4);
    }
  });

  test("/rerank: the query from its static weights against documents through the model, by dot product", async () => {
    const q = ref.queries[3]!;
    const dot = (a: Case, b: Case) => a.indices.reduce((s, id, k) => s + a.values[k]! * (b.values[b.indices.indexOf(id)] ?? 0), 0);
    const want = ref.documents.map((d, i) => [dot(q, d), i] as const).sort((a, b) => b[0] - a[0]);
    const { status, json } = await postJson(`${url}/rerank`, { model: "opensearch-sparse", query: q.text, documents: ref.documents.map((d) => d.text) });
    expect(status).toBe(200);
    for (const r of json.results) expect(Math.abs(r.relevance_score - dot(q, ref.documents[r.index]!))).toBeLessThanOrEqual(1e-3);
    // Ties aside, the order is the reference order.
    expect(json.results.filter((r: { relevance_score: number }) => r.relevance_score > 0).map((r: { index: number }) => r.index))
      .toEqual(want.filter((x) => x[0] > 0).map((x) => x[1]));
  });
});

describe("errors and routing", () => {
  test("a bad input_type answers 400; OpenAI token ids are decoded to text first, so a query still gets static weights; a plain SPLADE model keeps its prompt handling", async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ["/embeddings", { model: "opensearch-sparse", input: "x", input_type: "classification" }, /input_type for an inference-free sparse model/],
      ["/embed_sparse", { model: "opensearch-sparse", inputs: "x", input_type: "nope" }, /input_type/],
    ];
    for (const [route, body, message] of cases) {
      const { status, json } = await postJson(`${url}${route}`, body);
      expect(status).toBe(400);
      expect(json.error.message).toMatch(message);
    }
    const ids = await postJson(`${url}/embeddings`, { model: "opensearch-sparse", input: [[15339, 1917]], input_type: "query" });
    expect(ids.status).toBe(200);
    const plain = await postJson(`${url}/embed_sparse`, { model: "splade", inputs: "hello world", input_type: "query" });
    expect(plain.status).toBe(200);
  });

  test("/models lists it as a sparse model", async () => {
    const models = await (await fetch(`${url}/models`)).json();
    const m = models.data.find((x: { id: string }) => x.id === "opensearch-sparse");
    expect(m.task).toBe("sparse");
    expect(m.pooling).toBe("splade (max, log1p_relu)");
  });
});
