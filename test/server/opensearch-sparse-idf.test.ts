// Inference-free sparse models in the older OpenSearch hub layout (doc-v1 / doc-v2-distill / doc-v2-mini: the MLM
// export with idf.json, no sentence-transformers Router) through the HTTP API. References follow the model card's
// usage code, computed in test/fixtures/generate/sparse.py (build_idf_layout): queries = idf.json's weight of each
// distinct token (no special tokens), documents = max over tokens of log(1 + relu(logit)), special tokens set to 0.
// With --idf-missing-weight 1, queries follow OpenSearch's in-cluster rule instead (a token idf.json lacks weighs 1.0).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config";
import { startServer, type RunningServer } from "../../src/server/serve";
import { fixture, offlineHub, postJson, reference, sparseDiff, startTestServer } from "../helpers";

interface Case { text: string; input_ids: number[]; indices: number[]; values: number[]; missing_one?: { indices: number[]; values: number[] } }
let ref: { queries: Case[]; documents: Case[]; special_ids: number[] };
let server: RunningServer;
let url: string;

beforeAll(async () => {
  ref = await reference("opensearch-sparse-idf");
  // The same folder twice: the model cards' rule (default) and OpenSearch's in-cluster one.
  server = await startTestServer({
    "model-id": [fixture("opensearch-sparse-idf"), fixture("opensearch-sparse-idf")],
    "served-model-name": ["opensearch-sparse-idf", "opensearch-in-cluster"],
    "idf-missing-weight": ["0", "1"],
    "batch-size": "4",
    // Exact weights only: warm-up's timed runs add nothing here (warm-up itself: options.test.ts, instances.test.ts).
    "model-warmup": "false",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

// Exact: the same float32 weights (the server's JSON prints float32 values in full).
const f32 = (v: { indices: number[]; values: number[] }) => ({ indices: v.indices, values: v.values.map(Math.fround) });
const pairs = (json: { index: number; value: number }[]) => ({ indices: json.map((x) => x.index), values: json.map((x) => x.value) });

describe("queries: idf.json lookup, no model run", () => {
  test("/embeddings with input_type query, batched and alone: exact; usage counts content tokens", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model: "opensearch-sparse-idf", input: ref.queries.map((c) => c.text), input_type: "query" });
    expect(status).toBe(200);
    ref.queries.forEach((c, i) => {
      expect(f32(json.data[i].embedding)).toEqual(f32(c));
    });
    expect(json.usage.prompt_tokens).toBe(ref.queries.reduce((s, c) => s + c.input_ids.length, 0));
    for (const c of ref.queries.slice(-3)) {
      const one = await postJson(`${url}/embeddings`, { model: "opensearch-sparse-idf", input: c.text, input_type: "search_query" });
      expect(f32(one.json.data[0].embedding)).toEqual(f32(c));
    }
  });

  test("--idf-missing-weight 1: a token idf.json lacks weighs 1.0, as OpenSearch's in-cluster query; exact, and it changes /rerank", async () => {
    const { status, json } = await postJson(`${url}/embed_sparse`, { model: "opensearch-in-cluster", inputs: ref.queries.map((c) => c.text), input_type: "query" });
    expect(status).toBe(200);
    ref.queries.forEach((c, i) => expect(f32(pairs(json[i]))).toEqual(f32(c.missing_one!)));
    // A query with a token idf.json lacks that some reference document holds: the two rules rank differently there.
    const addedOf = (c: Case) => c.missing_one!.indices.filter((x) => !c.indices.includes(x));
    const q = ref.queries.find((c) => ref.documents.some((d) => addedOf(c).some((x) => d.indices.includes(x))))!;
    expect(q).toBeDefined();
    const added = addedOf(q);
    // A document holding such a token scores higher by each of them: 1.0 x its weight.
    const docs = ref.documents.map((d) => d.text);
    const [card, cluster] = await Promise.all(
      ["opensearch-sparse-idf", "opensearch-in-cluster"].map((model) => postJson(`${url}/rerank`, { model, query: q.text, documents: docs, raw_scores: true })),
    );
    const score = (json: { results: { index: number; relevance_score: number }[] }, d: number) => json.results.find((r) => r.index === d)!.relevance_score;
    let differ = 0;
    ref.documents.forEach((d, k) => {
      const extra = d.indices.reduce((s, ix, j) => s + (added.includes(ix) ? d.values[j]! : 0), 0);
      if (extra > 0) differ++;
      expect(Math.abs(score(cluster!.json, k) - score(card!.json, k) - extra)).toBeLessThanOrEqual(1e-3);
    });
    expect(differ).toBeGreaterThan(0);
  });

  test("--idf-missing-weight 1 on a model without idf.json is refused at load", async () => {
    // The Router layout (opensearch-sparse: SparseStaticEmbedding weights over the whole vocabulary) has no idf.json.
    const flags = new Map([["model-id", [fixture("opensearch-sparse")]], ["idf-missing-weight", ["1"]], ["host", ["127.0.0.1"]], ["port", ["0"]], ["tokenizer-workers", ["1"]], ["num-threads", ["1"]]]);
    const other = startServer(buildConfig({ flags, env: {}, file: null, cpuCount: 2 }), offlineHub);
    try {
      await expect(other.loaded).rejects.toThrow("--idf-missing-weight 1 applies to inference-free sparse models with an idf.json (the older OpenSearch layout); this model has none");
    } finally {
      await other.shutdown();
    }
  });

  test("/embed_sparse with input_type query: exact", async () => {
    const { status, json } = await postJson(`${url}/embed_sparse`, { model: "opensearch-sparse-idf", inputs: ref.queries.map((c) => c.text), input_type: "query" });
    expect(status).toBe(200);
    ref.queries.forEach((c, i) => expect(f32(pairs(json[i]))).toEqual(f32(c)));
  });
});

describe("documents: the MLM, log(1 + relu) max pooling, special tokens left out", () => {
  test("/embeddings (input_type document and the default) and /embed_sparse, batched and alone, <= 1e-4", async () => {
    for (const body of [{ input_type: "document" }, {}]) {
      const { status, json } = await postJson(`${url}/embeddings`, { model: "opensearch-sparse-idf", input: ref.documents.map((c) => c.text), ...body });
      expect(status).toBe(200);
      ref.documents.forEach((c, i) => {
        expect(sparseDiff(json.data[i].embedding, c)).toBeLessThanOrEqual(1e-4);
        for (const id of ref.special_ids) expect(json.data[i].embedding.indices).not.toContain(id);
      });
    }
    const { json } = await postJson(`${url}/embed_sparse`, { model: "opensearch-sparse-idf", inputs: ref.documents.map((c) => c.text), input_type: "document" });
    ref.documents.forEach((c, i) => expect(sparseDiff(pairs(json[i]), c)).toBeLessThanOrEqual(1e-4));
    for (const c of ref.documents.slice(0, 4)) {
      const one = await postJson(`${url}/embed_sparse`, { model: "opensearch-sparse-idf", inputs: c.text });
      expect(sparseDiff(pairs(one.json[0]), c)).toBeLessThanOrEqual(1e-4);
    }
  });

  test("/models lists it as sparse with the layout's pooling", async () => {
    const models = await (await fetch(`${url}/models`)).json();
    const m = models.data.find((x: { id: string }) => x.id === "opensearch-sparse-idf");
    expect(m.task).toBe("sparse");
    expect(m.pooling).toBe("splade (max, relu)");
  });
});
