// Real client packages from npm against a live server on 127.0.0.1, each used as its docs say, with results compared
// to the fixtures' reference outputs (sentence-transformers / transformers), not just "no error": openai,
// cohere-ai (v1 rerank, v2 rerank, v1 embed, v2 embed with every embedding type), @huggingface/inference (endpoint(url):
// featureExtraction, textClassification), @langchain/openai, ai with @ai-sdk/openai-compatible, @ai-sdk/cohere and
// @ai-sdk/togetherai, @llamaindex/openai (with the @llamaindex/core it runs on); and the bodies Michael Feil's Python
// infinity_client sends (not installable here: its generated models' defaults, posted as they are).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createCohere } from "@ai-sdk/cohere";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { createTogetherAI } from "@ai-sdk/togetherai";
import { InferenceClient } from "@huggingface/inference";
import { OpenAIEmbeddings } from "@langchain/openai";
import { getTopKEmbeddings } from "@llamaindex/core/embeddings";
import { Document, MetadataMode } from "@llamaindex/core/schema";
import { OpenAI as LlamaIndexOpenAI, OpenAIEmbedding } from "@llamaindex/openai";
import { embedMany, rerank } from "ai";
import { CohereClient, CohereClientV2 } from "cohere-ai";
import OpenAI from "openai";
import type { RunningServer } from "../../src/server/serve";
import { cosine, fixture, l2, maxAbsDiff, postJson, reference, startTestServer } from "../helpers";

let server: RunningServer;
let url: string;
let emb: { cases: Array<{ text: string; embedding: number[] }> };
let rr: { cases: Array<{ query: string; document: string; score: number }> };
let cls: { id2label: Record<string, string>; cases: Array<{ text: string; probabilities: number[] }> };

beforeAll(async () => {
  server = await startTestServer({
    "model-id": [fixture("bert-mean-norm"), fixture("bert-rerank"), fixture("bert-classify")],
    "served-model-name": ["bge", "reranker", "classifier"],
    "api-key": "sk-test",
  });
  url = server.url;
  [emb, rr, cls] = await Promise.all([reference("bert-mean-norm"), reference("bert-rerank"), reference("bert-classify")]);
});
afterAll(async () => {
  await server.shutdown();
});

const texts = () => emb.cases.slice(0, 4).map((c) => c.text);
const expectVectors = (got: ArrayLike<number>[], from = 0) =>
  got.forEach((v, i) => expect(maxAbsDiff(Array.from(v), l2(emb.cases[from + i]!.embedding))).toBeLessThanOrEqual(1e-4));
/** The reference cases of the first query, with their sigmoid scores. */
const rerankCase = () => {
  const q = rr.cases[0]!.query;
  const cases = rr.cases.filter((c) => c.query === q);
  return { query: q, documents: cases.map((c) => c.document), scores: cases.map((c) => c.score) };
};

describe("OpenAI-shaped clients", () => {
  test("openai: embeddings.create, float and base64 (the SDK's default decodes base64)", async () => {
    const client = new OpenAI({ apiKey: "sk-test", baseURL: `${url}/v1` });
    const res = await client.embeddings.create({ model: "bge", input: texts() });
    expectVectors(res.data.map((d) => d.embedding));
    const f = await client.embeddings.create({ model: "bge", input: texts(), encoding_format: "float" });
    expectVectors(f.data.map((d) => d.embedding));
  });

  test("@langchain/openai OpenAIEmbeddings: embedDocuments and embedQuery", async () => {
    const lc = new OpenAIEmbeddings({ model: "bge", apiKey: "sk-test", configuration: { baseURL: `${url}/v1` } });
    expectVectors(await lc.embedDocuments(texts()));
    expectVectors([await lc.embedQuery(texts()[0]!)]);
  });

  test("ai + @ai-sdk/openai-compatible embedMany", async () => {
    const provider = createOpenAICompatible({ name: "infinity", baseURL: `${url}/v1`, apiKey: "sk-test" });
    const { embeddings } = await embedMany({ model: provider.textEmbeddingModel("bge"), values: texts() });
    expectVectors(embeddings);
  });
});

describe("@llamaindex/openai OpenAIEmbedding (baseURL: this server)", () => {
  /** The OpenAI client LlamaIndex builds gets this fetch (its documented additionalSessionOptions): the inputs of every call. */
  const sent: unknown[][] = [];
  const recording: typeof fetch = Object.assign(
    async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
      if (typeof init?.body === "string") sent.push((JSON.parse(init.body) as { input: unknown[] }).input);
      return fetch(input, init);
    },
    { preconnect: fetch.preconnect },
  );
  const llama = (extra: ConstructorParameters<typeof OpenAIEmbedding>[0] = {}) =>
    new OpenAIEmbedding({ model: "bge", apiKey: "sk-test", baseURL: `${url}/v1`, maxRetries: 0, additionalSessionOptions: { fetch: recording }, ...extra });
  // Texts that LlamaIndex's nodes keep as they are (a node's content is trimmed).
  const plain = () => emb.cases.slice(0, 7);

  test("getTextEmbeddings, getTextEmbedding and getQueryEmbedding: the reference vectors", async () => {
    const model = llama();
    expectVectors(await model.getTextEmbeddings(texts()));
    expectVectors([await model.getTextEmbedding(texts()[1]!)], 1);
    expectVectors([(await model.getQueryEmbedding({ type: "text", text: texts()[2]! }))!], 2);
  });

  test("getTextEmbeddingsBatch cuts the list by embedBatchSize: one request per chunk, vectors in order", async () => {
    sent.length = 0;
    const progress: number[] = [];
    const out = await llama({ embedBatchSize: 3 }).getTextEmbeddingsBatch(plain().map((c) => c.text), { progressCallback: (done: number) => progress.push(done) });
    expect(sent.map((inputs) => inputs.length)).toEqual([3, 3, 1]);
    expect(progress).toEqual([3, 6, 7]);
    expectVectors(out);
  });

  test("as a transformation: Documents get their reference vectors (metadata left out of the embedded text when excluded)", async () => {
    const docs = plain().map((c, i) => new Document({ text: c.text, id_: `doc-${i}`, metadata: { source: `file-${i}.txt` }, excludedEmbedMetadataKeys: ["source"] }));
    expect(docs.map((d) => d.getContent(MetadataMode.EMBED))).toEqual(plain().map((c) => c.text));
    const nodes = await llama({ embedBatchSize: 4 })(docs);
    expectVectors(nodes.map((n) => n.embedding!));
    // With the metadata in, LlamaIndex sends "source: ...\n\n<text>": the server embeds what it is sent.
    sent.length = 0;
    const withMeta = new Document({ text: plain()[0]!.text, metadata: { source: "file-0.txt" } });
    const [node] = await llama()([withMeta]);
    expect(sent).toEqual([[`source: file-0.txt\n\n${plain()[0]!.text}`]]);
    expect(maxAbsDiff(node!.embedding!, l2(emb.cases[0]!.embedding))).toBeGreaterThan(1e-3);
  });

  test("retrieval with LlamaIndex's own similarity (getTopKEmbeddings): the ranking of the reference vectors", async () => {
    const model = llama();
    const docs = plain().slice(1);
    const query = plain()[0]!;
    const [scores, ids] = getTopKEmbeddings(
      (await model.getQueryEmbedding({ type: "text", text: query.text }))!,
      await model.getTextEmbeddingsBatch(docs.map((d) => d.text)),
      3,
      docs.map((_, i) => i),
    );
    const byRef = docs.map((d, i) => ({ i, s: cosine(query.embedding, d.embedding) })).sort((a, b) => b.s - a.s).slice(0, 3);
    expect(ids).toEqual(byRef.map((r) => r.i));
    scores.forEach((s, k) => expect(Math.abs(s - byRef[k]!.s)).toBeLessThan(1e-4));
  });

  test("dimensions (Matryoshka): the reference vector cut and re-normalised", async () => {
    const out = await llama({ dimensions: 8 }).getTextEmbeddings(texts());
    out.forEach((v, i) => {
      expect(v).toHaveLength(8);
      expect(maxAbsDiff(v, l2(emb.cases[i]!.embedding.slice(0, 8)))).toBeLessThanOrEqual(1e-4);
    });
  });

  test("errors reach the caller as the SDK's errors with the server's message: wrong key (401), unknown model (400 model_not_found), chat (not served, 404)", async () => {
    const fail = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e as { status?: number; code?: string; message?: string });
    const badKey = await fail(llama({ apiKey: "wrong" }).getTextEmbedding("hello"));
    expect(badKey?.status).toBe(401);
    expect(badKey?.message).toContain("invalid API key");
    const badModel = await fail(llama({ model: "nope" }).getTextEmbedding("hello"));
    expect(badModel?.status).toBe(400);
    expect(badModel?.code).toBe("model_not_found");
    expect(badModel?.message).toContain('model "nope" is not served');
    // @llamaindex/openai's LLM class asks /chat/completions, which an embedding server does not serve.
    const chat = new LlamaIndexOpenAI({ model: "gpt-4o-mini", apiKey: "sk-test", baseURL: `${url}/v1`, maxRetries: 0 });
    const noChat = await fail(chat.chat({ messages: [{ role: "user", content: "hi" }] }));
    expect(noChat?.status).toBe(404);
    // The server kept serving.
    expectVectors([await llama().getTextEmbedding(texts()[0]!)]);
  });
});

describe("Cohere clients", () => {
  test("cohere-ai v1 rerank and v2 rerank: the reference's scores, best first", async () => {
    const { query, documents, scores } = rerankCase();
    const v1 = await new CohereClient({ token: "sk-test", environment: url }).rerank({ model: "reranker", query, documents });
    const v2 = await new CohereClientV2({ token: "sk-test", environment: url }).rerank({ model: "reranker", query, documents, topN: 2 });
    for (const r of v1.results) expect(r.relevanceScore).toBeCloseTo(scores[r.index]!, 4);
    expect(v1.results.map((r) => r.index)).toEqual([...scores.keys()].sort((a, b) => scores[b]! - scores[a]!));
    expect(v2.results).toHaveLength(2);
    expect(v2.results[0]!.index).toBe(v1.results[0]!.index);
  });

  test("cohere-ai v2 embed with every embedding type", async () => {
    const q = await reference("quantize");
    const client = new CohereClientV2({ token: "sk-test", environment: url });
    const res = await client.embed({
      model: "bge",
      texts: q.texts.slice(0, 5),
      inputType: "search_document",
      embeddingTypes: ["float", "int8", "uint8", "binary", "ubinary", "base64"],
    });
    const e = res.embeddings;
    e.float!.forEach((v, i) => expect(maxAbsDiff(v, q.float[i])).toBeLessThanOrEqual(1e-4));
    expect(e.binary).toEqual(q.binary.slice(0, 5));
    expect(e.ubinary).toEqual(q.ubinary.slice(0, 5));
    e.int8!.forEach((v, i) => expect(maxAbsDiff(v, q.int8[i])).toBeLessThanOrEqual(1));
    e.uint8!.forEach((v, i) => expect(maxAbsDiff(v, q.uint8[i])).toBeLessThanOrEqual(1));
    expect(e.base64).toHaveLength(5);
  });

  test("cohere-ai v1 embed (POST /v1/embed): embeddings_floats without types, embeddings_by_type with them", async () => {
    const q = await reference("quantize");
    const client = new CohereClient({ token: "sk-test", environment: url });
    const floats = await client.embed({ model: "bge", texts: q.texts.slice(0, 5), inputType: "search_document" });
    expect(floats.responseType).toBe("embeddings_floats");
    if (floats.responseType !== "embeddings_floats") throw new Error("unreachable");
    expect(floats.embeddings).toHaveLength(5);
    floats.embeddings.forEach((v, i) => expect(maxAbsDiff(v, q.float[i])).toBeLessThanOrEqual(1e-4));
    expect(floats.texts).toEqual(q.texts.slice(0, 5));
    expect(floats.meta?.billedUnits?.inputTokens).toBeGreaterThan(0);
    const typed = await client.embed({ model: "bge", texts: q.texts.slice(0, 5), embeddingTypes: ["float", "binary", "ubinary", "int8"], truncate: "END" });
    expect(typed.responseType).toBe("embeddings_by_type");
    if (typed.responseType !== "embeddings_by_type") throw new Error("unreachable");
    typed.embeddings.float!.forEach((v, i) => expect(maxAbsDiff(v, q.float[i])).toBeLessThanOrEqual(1e-4));
    expect(typed.embeddings.binary).toEqual(q.binary.slice(0, 5));
    expect(typed.embeddings.ubinary).toEqual(q.ubinary.slice(0, 5));
    typed.embeddings.int8!.forEach((v, i) => expect(maxAbsDiff(v, q.int8[i])).toBeLessThanOrEqual(1));
    // A too-long text with truncate NONE: the client raises the server's 413.
    // (cohere-ai's HttpResponsePromise is a thenable of its own: awaited here, not handed to expect().rejects.)
    const refused = await client.embed({ model: "bge", texts: ["word ".repeat(300)], truncate: "NONE" }).then(() => null, (e: unknown) => e);
    expect(refused).toMatchObject({ statusCode: 413 });
  });

  test("ai rerank through @ai-sdk/cohere (/v2/rerank)", async () => {
    const { query, documents, scores } = rerankCase();
    const cohere = createCohere({ apiKey: "sk-test", baseURL: `${url}/v2` });
    const { ranking } = await rerank({ model: cohere.reranking("reranker"), query, documents, topN: 2 });
    expect(ranking).toHaveLength(2);
    for (const r of ranking) expect(r.score).toBeCloseTo(scores[r.originalIndex]!, 4);
  });
});

describe("Together-shaped rerank", () => {
  test("ai rerank through @ai-sdk/togetherai (/v1/rerank): its schema needs usage with prompt, completion and total tokens", async () => {
    const { query, documents, scores } = rerankCase();
    const together = createTogetherAI({ apiKey: "sk-test", baseURL: `${url}/v1` });
    const order = [...scores.keys()].sort((a, b) => scores[b]! - scores[a]!);
    const all = await rerank({ model: together.reranking("reranker"), query, documents });
    expect(all.ranking.map((r) => r.originalIndex)).toEqual(order);
    for (const r of all.ranking) expect(r.score).toBeCloseTo(scores[r.originalIndex]!, 4);
    expect(all.response.modelId).toBe("reranker");
    const top = await rerank({ model: together.reranking("reranker"), query, documents, topN: 1 });
    expect(top.ranking.map((r) => r.originalIndex)).toEqual([order[0]!]);
  });
});

describe("infinity_client (Python) request bodies", () => {
  // OpenAIEmbeddingInputText / RerankInput / ClassifyInput defaults: model "default/not-specified", dimensions 0,
  // modality "text", return_documents true; Authorization "Bearer <key>". Its result models require model and usage.
  const auth = { authorization: "Bearer sk-test" };

  test("embeddings: model \"default/not-specified\" is the one embedder, dimensions 0 the full size", async () => {
    const r = await postJson(`${url}/embeddings`, { input: texts(), model: "default/not-specified", encoding_format: "float", dimensions: 0, modality: "text" }, auth);
    expect(r.status).toBe(200);
    expect(r.json.object).toBe("list");
    expect(r.json.model).toBe("bge");
    expect(r.json.usage.total_tokens).toBeGreaterThan(0);
    expectVectors(r.json.data.map((d: { embedding: number[] }) => d.embedding));
    expect(r.json.data.map((d: { index: number }) => d.index)).toEqual([0, 1, 2, 3]);
  });

  test("rerank: model \"default/not-specified\" is the one cross-encoder; the answer has model and usage", async () => {
    const { query, documents, scores } = rerankCase();
    const r = await postJson(`${url}/rerank`, { query, documents, return_documents: true, model: "default/not-specified" }, auth);
    expect(r.status).toBe(200);
    expect(r.json.object).toBe("rerank");
    expect(r.json.model).toBe("reranker");
    expect(r.json.usage.prompt_tokens).toBeGreaterThan(0);
    expect(r.json.usage.total_tokens).toBe(r.json.usage.prompt_tokens);
    for (const x of r.json.results) {
      expect(x.relevance_score).toBeCloseTo(scores[x.index]!, 4);
      expect(x.document.text).toBe(documents[x.index]);
    }
  });

  test("classify: model \"default/not-specified\" is the one classifier", async () => {
    const c = cls.cases[0]!;
    const r = await postJson(`${url}/classify`, { input: [c.text], model: "default/not-specified", raw_scores: false }, auth);
    expect(r.status).toBe(200);
    expect(r.json.model).toBe("classifier");
    expect(r.json.usage.total_tokens).toBeGreaterThan(0);
    for (const p of r.json.data[0]) expect(p.score).toBeCloseTo(c.probabilities[Object.values(cls.id2label).indexOf(p.label)]!, 4);
  });
});

describe("@huggingface/inference against endpoint(url)", () => {
  test("featureExtraction on /models/{name}: the reference vector", async () => {
    const hf = new InferenceClient("sk-test").endpoint(`${url}/models/bge`);
    const out = (await hf.featureExtraction({ inputs: texts()[0]! })) as number[] | number[][];
    const v = Array.isArray(out[0]) ? (out as number[][])[0]! : (out as number[]);
    expectVectors([v]);
  });

  test("textClassification on /models/{name}: labels with the reference's probabilities", async () => {
    const hf = new InferenceClient("sk-test").endpoint(`${url}/models/classifier`);
    const c = cls.cases[0]!;
    const out = await hf.textClassification({ inputs: c.text });
    expect(out.length).toBe(Object.keys(cls.id2label).length);
    for (const p of out) {
      const idx = Object.values(cls.id2label).indexOf(p.label);
      expect(p.score).toBeCloseTo(c.probabilities[idx]!, 4);
    }
  });
});
