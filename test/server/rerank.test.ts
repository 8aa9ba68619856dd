// /rerank and /classify against a live server: parity with the references, ordering, top_n and
// return_documents, truncation of long documents, the cohere-ai SDK, and bad inputs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { CohereClient, CohereClientV2 } from "cohere-ai";
import type { RunningServer } from "../../src/server/serve";
import { fixture, postJson, reference, startTestServer } from "../helpers";
import { Value } from "@sinclair/typebox/value";
import { ClassifyResponse, ModelsResponse, RerankResponse } from "../../src/server/schemas";

let server: RunningServer;
let url: string;

beforeAll(async () => {
  server = await startTestServer({
    "model-id": [fixture("bert-rerank"), fixture("bert-classify"), fixture("bert-mean-norm")],
    "batch-size": "4",
    "max-inputs-per-request": "50",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));

describe("rerank parity with the cross-encoder reference", () => {
  test("each pair alone: raw logits and sigmoid scores", async () => {
    const ref = await reference("bert-rerank");
    for (const c of ref.cases) {
      const raw = await postJson(`${url}/rerank`, { model: "bert-rerank", query: c.query, documents: [c.document], raw_scores: true });
      expect(raw.status).toBe(200);
      expect(Math.abs(raw.json.results[0].relevance_score - c.logit)).toBeLessThanOrEqual(1e-4);
      expect(raw.json.usage.prompt_tokens).toBe(c.input_ids.length);
      const scored = await postJson(`${url}/rerank`, { model: "bert-rerank", query: c.query, documents: [c.document] });
      expect(Math.abs(scored.json.results[0].relevance_score - c.score)).toBeLessThanOrEqual(1e-4);
    }
  });

  test("concurrent requests, several documents each, sorted by score", async () => {
    const ref = await reference("bert-rerank");
    const byQuery = new Map<string, Array<{ document: string; score: number }>>();
    for (const c of ref.cases)
      byQuery.set(c.query, [...(byQuery.get(c.query) ?? []), { document: c.document, score: c.score }]);
    const runs = [...byQuery].flatMap(([query, docs]) =>
      Array.from({ length: 3 }, () =>
        postJson(`${url}/rerank`, { model: "bert-rerank", query, documents: docs.map((d) => d.document), return_documents: true }).then((r) => ({ r, docs })),
      ),
    );
    for (const { r, docs } of await Promise.all(runs)) {
      expect(r.status).toBe(200);
      const scores = r.json.results.map((x: { relevance_score: number }) => x.relevance_score);
      expect([...scores].sort((a, b) => b - a)).toEqual(scores);
      for (const res of r.json.results) {
        expect(Math.abs(res.relevance_score - docs[res.index]!.score)).toBeLessThanOrEqual(1e-4);
        expect(res.document.text).toBe(docs[res.index]!.document);
      }
    }
  });
});

describe("rerank options", () => {
  const docs = ["alpha beta", "the cat sat on the mat", "completely unrelated text about rockets", "cats and mats"];

  test("responses match the schemas the OpenAPI document publishes", async () => {
    const r = await postJson(`${url}/rerank`, { query: "q", documents: docs, model: "bert-rerank", return_documents: true });
    expect(Value.Check(RerankResponse, r.json)).toBe(true);
    const c = await postJson(`${url}/classify`, { input: ["a", "b"], model: "bert-classify" });
    expect(Value.Check(ClassifyResponse, c.json)).toBe(true);
    const m = await (await fetch(`${url}/models`)).json();
    expect(Value.Check(ModelsResponse, m)).toBe(true);
  });

  test("top_n cuts after sorting; return_documents off by default", async () => {
    const all = await postJson(`${url}/rerank`, { query: "cat on a mat", documents: docs, model: "bert-rerank" });
    const top = await postJson(`${url}/rerank`, { query: "cat on a mat", documents: docs, model: "bert-rerank", top_n: 2 });
    expect(top.json.results).toHaveLength(2);
    expect(top.json.results).toEqual(all.json.results.slice(0, 2));
    expect(top.json.results[0].document).toBeUndefined();
    expect(all.json.object).toBe("rerank");
  });

  test("top_n larger than the documents returns them all", async () => {
    const r = await postJson(`${url}/rerank`, { query: "q", documents: docs, model: "bert-rerank", top_n: 100 });
    expect(r.json.results).toHaveLength(docs.length);
  });

  test("documents as {text} objects", async () => {
    const r = await postJson(`${url}/rerank`, { query: "q", documents: docs.map((text) => ({ text })), model: "bert-rerank", return_documents: true });
    expect(r.status).toBe(200);
    expect(r.json.results.map((x: { document: { text: string } }) => x.document.text).sort()).toEqual([...docs].sort());
  });

  test("raw_scores returns logits whose sigmoid is the default score", async () => {
    const raw = await postJson(`${url}/rerank`, { query: "q", documents: docs, model: "bert-rerank", raw_scores: true });
    const def = await postJson(`${url}/rerank`, { query: "q", documents: docs, model: "bert-rerank" });
    for (const r of raw.json.results) {
      const d = def.json.results.find((x: { index: number }) => x.index === r.index);
      expect(d.relevance_score).toBeCloseTo(sigmoid(r.relevance_score), 6);
    }
  });

  test("a very long document is truncated, never fails", async () => {
    const long = "word ".repeat(20000);
    const r = await postJson(`${url}/rerank`, { query: "a question", documents: [long, "short"], model: "bert-rerank" });
    expect(r.status).toBe(200);
    expect(r.json.usage.prompt_tokens).toBeLessThanOrEqual(64 + 10);
  });
});

describe("rerank bad inputs", () => {
  const cases: Array<[string, unknown, string]> = [
    ["missing query", { documents: ["a"], model: "bert-rerank" }, "query"],
    ["empty query", { query: "", documents: ["a"], model: "bert-rerank" }, "query"],
    ["empty documents", { query: "q", documents: [], model: "bert-rerank" }, "documents"],
    ["documents a number", { query: "q", documents: 5, model: "bert-rerank" }, "document"],
    ["document of wrong type", { query: "q", documents: [1], model: "bert-rerank" }, "document"],
    ["empty document", { query: "q", documents: ["a", ""], model: "bert-rerank" }, "documents[1]"],
    ["top_n zero", { query: "q", documents: ["a"], top_n: 0, model: "bert-rerank" }, "top_n"],
    ["top_n negative", { query: "q", documents: ["a"], top_n: -3, model: "bert-rerank" }, "top_n"],
    // An embedder reranks by cosine (test/server/similarity-rerank.test.ts); an instruction is for LLM rerankers only.
    ["instruction to an embedder", { query: "q", documents: ["a"], model: "bert-mean-norm", instruction: "x" }, "instruction"],
  ];
  test("too many documents: 413 naming the flag", async () => {
    const r = await postJson(`${url}/rerank`, { query: "q", documents: Array(51).fill("d"), model: "bert-rerank" });
    expect(r.status).toBe(413);
    expect(r.json.error.message).toContain("at most 50 are accepted per request (--max-inputs-per-request)");
  });
  for (const [name, body, needle] of cases) {
    test(name, async () => {
      const r = await postJson(`${url}/rerank`, body);
      expect(r.status).toBe(400);
      expect(r.json.error.message).toContain(needle);
    });
  }
});

test("no model named with several served: the one reranker serves it", async () => {
  const r = await postJson(`${url}/rerank`, { query: "q", documents: ["a"] });
  expect(r.status).toBe(200);
  expect(r.json.model).toBe("bert-rerank");
});

test("a string where the documents list belongs is a 400, not a list of characters", async () => {
  const r = await postJson(`${url}/rerank`, { query: "q", documents: "one doc", model: "bert-rerank" });
  expect(r.status).toBe(400);
  expect(r.json.error.message).toContain("documents");
});

describe("cohere-ai SDK", () => {
  test("v1 client rerank works unchanged", async () => {
    const cohere = new CohereClient({ token: "unused", environment: url });
    const res = await cohere.rerank({ model: "bert-rerank", query: "cat on a mat", documents: ["the cat sat on the mat", "rockets"], topN: 2, returnDocuments: true });
    expect(res.results).toHaveLength(2);
    expect(res.results[0]!.relevanceScore).toBeGreaterThanOrEqual(res.results[1]!.relevanceScore);
    expect(["the cat sat on the mat", "rockets"]).toContain(res.results[0]!.document!.text);
  });

  test("v2 client rerank works unchanged", async () => {
    const cohere = new CohereClientV2({ token: "unused", environment: url });
    const res = await cohere.rerank({ model: "bert-rerank", query: "cat", documents: ["a cat", "a dog", "rockets"], topN: 1 });
    expect(res.results).toHaveLength(1);
    expect(typeof res.results[0]!.relevanceScore).toBe("number");
  });
});

describe("classify", () => {
  test("parity with the reference: softmax over labels, sorted, every label present", async () => {
    const ref = await reference("bert-classify");
    const labels: string[] = Object.keys(ref.id2label).sort().map((k) => ref.id2label[k]);
    const texts = ref.cases.map((c: { text: string }) => c.text);
    const r = await postJson(`${url}/classify`, { model: "bert-classify", input: texts });
    expect(r.status).toBe(200);
    expect(r.json.object).toBe("classify");
    ref.cases.forEach((c: { probabilities: number[]; input_ids: number[] }, i: number) => {
      const row = r.json.data[i] as Array<{ label: string; score: number }>;
      expect(row.map((x) => x.label).sort()).toEqual([...labels].sort());
      for (let k = 1; k < row.length; k++) expect(row[k - 1]!.score).toBeGreaterThanOrEqual(row[k]!.score);
      for (const x of row) expect(Math.abs(x.score - c.probabilities[labels.indexOf(x.label)]!)).toBeLessThanOrEqual(1e-4);
    });
    expect(r.json.usage.prompt_tokens).toBe(ref.cases.reduce((s: number, c: { input_ids: number[] }) => s + c.input_ids.length, 0));
  });

  test("raw_scores returns the logits", async () => {
    const ref = await reference("bert-classify");
    const labels: string[] = Object.keys(ref.id2label).sort().map((k) => ref.id2label[k]);
    const c = ref.cases[3];
    const r = await postJson(`${url}/classify`, { model: "bert-classify", input: c.text, raw_scores: true });
    for (const x of r.json.data[0]) expect(Math.abs(x.score - c.logits[labels.indexOf(x.label)])).toBeLessThanOrEqual(1e-4);
  });

  test("concurrent single-text requests match the batch answer", async () => {
    const ref = await reference("bert-classify");
    const rs = await Promise.all(ref.cases.map((c: { text: string }) => postJson(`${url}/classify`, { model: "bert-classify", input: [c.text] })));
    const labels: string[] = Object.keys(ref.id2label).sort().map((k) => ref.id2label[k]);
    rs.forEach((r, i) => {
      for (const x of r.json.data[0]) expect(Math.abs(x.score - ref.cases[i].probabilities[labels.indexOf(x.label)])).toBeLessThanOrEqual(1e-4);
    });
  });

  const bad: Array<[string, unknown, string]> = [
    ["empty list", { model: "bert-classify", input: [] }, "empty"],
    ["empty string", { model: "bert-classify", input: "" }, "empty"],
    ["number", { model: "bert-classify", input: 5 }, "input"],
    ["reranker on /classify", { model: "bert-rerank", input: "x" }, "/rerank"],
  ];
  for (const [name, body, needle] of bad) {
    test(`bad input: ${name}`, async () => {
      const r = await postJson(`${url}/classify`, body);
      expect(r.status).toBe(400);
      expect(r.json.error.message).toContain(needle);
    });
  }
});
