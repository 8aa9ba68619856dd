// /rerank with embedding models: dense by cosine, sparse by dot product, multi-vector (ColBERT) by MaxSim. Expected
// scores come from the generators' reference vectors (sentence-transformers / the PyLate algorithm), computed here.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RunningServer } from "../../src/server/serve";
import { cosine, fixture, postJson, reference, startTestServer } from "../helpers";

let server: RunningServer;
let url: string;

beforeAll(async () => {
  // parity only: warm-up's timed runs add nothing here (warm-up itself: options.test.ts, instances.test.ts)
  server = await startTestServer({ "model-id": [fixture("xlmr-max"), fixture("splade"), fixture("colbert-pylate"), fixture("colbert-stanford"), fixture("bert-classify")], "batch-size": "4", "model-warmup": "false" });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

/** The ranking a /rerank answer must give for these expected scores, and each score. */
function expectRanking(json: { results: { index: number; relevance_score: number }[] }, expected: number[], tolerance: number) {
  const order = expected.map((s, i) => [s, i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]).map((x) => x[1]);
  expect(json.results.map((r) => r.index)).toEqual(order);
  for (const r of json.results) expect(Math.abs(r.relevance_score - expected[r.index]!)).toBeLessThanOrEqual(tolerance);
}

describe("one model for both stages", () => {
  test("dense embedder: cosine of the query's and each document's embedding", async () => {
    const ref = await reference("xlmr-max");
    const q = ref.cases[2];
    const docs = ref.cases.filter((_: unknown, i: number) => i !== 2);
    const { status, json } = await postJson(`${url}/rerank`, { model: "xlmr-max", query: q.text, documents: docs.map((d: { text: string }) => d.text) });
    expect(status).toBe(200);
    expectRanking(json, docs.map((d: { embedding: number[] }) => cosine(q.embedding, d.embedding)), 1e-4);
    expect(json.usage.total_tokens).toBe(ref.cases.reduce((s: number, c: { input_ids: number[] }) => s + c.input_ids.length, 0));
  });

  test("sparse encoder: dot product of the SPLADE weights", async () => {
    const ref = await reference("splade");
    const weights = (c: { indices: number[]; values: number[] }) => new Map(c.indices.map((ix, k) => [ix, c.values[k]!]));
    const q = weights(ref.cases[3]);
    const expected = ref.cases.map((c: { indices: number[]; values: number[] }) => c.indices.reduce((s, ix, k) => s + (q.get(ix) ?? 0) * c.values[k]!, 0));
    const { status, json } = await postJson(`${url}/rerank`, { model: "splade", query: ref.cases[3].text, documents: ref.cases.map((c: { text: string }) => c.text), top_n: 15 });
    expect(status).toBe(200);
    expectRanking(json, expected, 1e-3);
  });

  for (const name of ["colbert-pylate", "colbert-stanford"]) {
    test(`${name}: MaxSim of the query's and each document's token vectors`, async () => {
      const ref = await reference(name);
      for (const qi of [0, 3]) {
        const { status, json } = await postJson(`${url}/rerank`, { model: name, query: ref.queries[qi].text, documents: ref.documents.map((d: { text: string }) => d.text), return_documents: true });
        expect(status).toBe(200);
        expectRanking(json, ref.maxsim[qi], 1e-3);
        expect(json.results[0].document.text).toBe(ref.documents[json.results[0].index].text);
      }
    });
  }

  test("top_n cuts the list; a classifier still cannot rerank; instruction is for LLM rerankers", async () => {
    const ref = await reference("colbert-pylate");
    const { json } = await postJson(`${url}/rerank`, { model: "colbert-pylate", query: "fox", documents: ref.documents.map((d: { text: string }) => d.text), top_n: 3 });
    expect(json.results.length).toBe(3);
    const cls = await postJson(`${url}/rerank`, { model: "bert-classify", query: "a", documents: ["b"] });
    expect(cls.status).toBe(400);
    const ins = await postJson(`${url}/rerank`, { model: "xlmr-max", query: "a", documents: ["b"], instruction: "x" });
    expect(ins.status).toBe(400);
    const models = await (await fetch(`${url}/models`)).json();
    expect(models.data.find((m: { id: string }) => m.id === "xlmr-max").capabilities).toEqual(["embed", "rerank"]);
  });
});
