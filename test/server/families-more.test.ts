// More model families through the HTTP API (test/fixtures/generate/families_more.py): Jina v3 task adapters, ...
// Each against references computed in the generator (torch), alone, batched and as concurrent requests.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RunningServer } from "../../src/server/serve";
import { fixture, l2, maxAbsDiff, postJson, reference, startTestServer } from "../helpers";

const MODELS = ["jina-v3", "bert-mean-norm", "nomic-embed", "deberta-rerank"] as const;
let server: RunningServer;
let url: string;

beforeAll(async () => {
  server = await startTestServer({
    "model-id": MODELS.map(fixture),
    "batch-size": "8",
    "max-inputs-per-request": "64",
    "result-cache": "memory",
    // Parity only: warm-up's timed runs add nothing here (warm-up itself: options.test.ts, instances.test.ts).
    "model-warmup": "false",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

const embed = (body: Record<string, unknown>) => postJson(`${url}/embeddings`, { encoding_format: "float", ...body });
const close = (got: number[], want: number[]) => expect(maxAbsDiff(got, l2(want))).toBeLessThanOrEqual(1e-4);

type JinaCase = { task: string; text: string; input_ids: number[]; embedding: number[] };

describe("Jina v3: task adapters fed as the scalar task_id, task instruction, mean pooling", () => {
  test("every task: parity alone (instruction tokens counted), then one request per task", async () => {
    const ref = await reference("jina-v3");
    expect(ref.cases.some((c: JinaCase) => c.input_ids.length === ref.max_length)).toBe(true);
    for (const c of ref.cases as JinaCase[]) {
      const { status, json } = await embed({ model: "jina-v3", input: c.text, task: c.task });
      expect(status).toBe(200);
      close(json.data[0].embedding, c.embedding);
      expect(json.usage.prompt_tokens).toBe(c.input_ids.length);
    }
    for (const task of ref.tasks as string[]) {
      const cases = (ref.cases as JinaCase[]).filter((c) => c.task === task);
      const { json } = await embed({ model: "jina-v3", input: cases.map((c) => c.text), task });
      cases.forEach((c, i) => close(json.data[i].embedding, c.embedding));
    }
  });

  test("concurrent requests of different tasks never share a batch (one task_id per run)", async () => {
    const ref = await reference("jina-v3");
    const cases = ref.cases as JinaCase[];
    const requests = Array.from({ length: 30 }, (_, r) => {
      const task = ref.tasks[r % ref.tasks.length] as string;
      const mine = cases.filter((c) => c.task === task);
      const picked = mine.filter((_, i) => (i + r) % 3 === 0).slice(0, 1 + (r % 5));
      return embed({ model: "jina-v3", input: picked.map((c) => c.text), task }).then((res) => ({ res, picked }));
    });
    for (const { res, picked } of await Promise.all(requests)) {
      expect(res.status).toBe(200);
      picked.forEach((c, i) => close(res.json.data[i].embedding, c.embedding));
    }
  });

  test("defaults: no task is text-matching; input_type maps onto tasks (also on Cohere /v2/embed, TEI prompt_name)", async () => {
    const ref = await reference("jina-v3");
    const of = (task: string) => (ref.cases as JinaCase[]).filter((c) => c.task === task).slice(0, 4);
    const plain = await embed({ model: "jina-v3", input: of("text-matching").map((c) => c.text) });
    of("text-matching").forEach((c, i) => close(plain.json.data[i].embedding, c.embedding));
    const mapping: Record<string, string> = {
      query: "retrieval.query", search_query: "retrieval.query", document: "retrieval.passage", search_document: "retrieval.passage",
      classification: "classification", clustering: "separation",
    };
    for (const [inputType, task] of Object.entries(mapping)) {
      const { status, json } = await embed({ model: "jina-v3", input: of(task).map((c) => c.text), input_type: inputType });
      expect(status).toBe(200);
      of(task).forEach((c, i) => close(json.data[i].embedding, c.embedding));
    }
    const cohere = await postJson(`${url}/v2/embed`, { model: "jina-v3", texts: of("retrieval.query").map((c) => c.text), input_type: "search_query", embedding_types: ["float"] });
    expect(cohere.status).toBe(200);
    of("retrieval.query").forEach((c, i) => close(cohere.json.embeddings.float[i], c.embedding));
    // sentence-transformers names Jina v3's prompts after its tasks: prompt_name works as task (TEI sends it)
    const tei = await postJson(`${url}/embed`, { model: "jina-v3", inputs: of("separation").map((c) => c.text), prompt_name: "separation" });
    expect(tei.status).toBe(200);
    of("separation").forEach((c, i) => close(tei.json[i], c.embedding));
  });

  test("the task is part of the result-cache key (tasks with the same empty instruction differ)", async () => {
    const ref = await reference("jina-v3");
    const text = "The quick brown fox jumps over the lazy dog.";
    const sep = (ref.cases as JinaCase[]).find((c) => c.task === "separation" && c.text === text)!;
    const cls = (ref.cases as JinaCase[]).find((c) => c.task === "classification" && c.text === text)!;
    const a = await embed({ model: "jina-v3", input: [text], task: "separation" });
    const b = await embed({ model: "jina-v3", input: [text], task: "classification" });
    const again = await embed({ model: "jina-v3", input: [text], task: "separation" });
    close(a.json.data[0].embedding, sep.embedding);
    close(b.json.data[0].embedding, cls.embedding);
    close(again.json.data[0].embedding, sep.embedding);
    // Both were cached by the first test: with one key for both tasks, one of them would get the other's vector.
    expect(maxAbsDiff(sep.embedding, cls.embedding)).toBeGreaterThan(0.01);
    expect(b.headers.get("x-cache-hits")).toBe("1");
    expect(again.headers.get("x-cache-hits")).toBe("1");
  });

  test("/rerank by similarity: the query as retrieval.query, documents as retrieval.passage", async () => {
    const ref = await reference("jina-v3");
    const q = (ref.cases as JinaCase[]).find((c) => c.task === "retrieval.query")!;
    const docs = (ref.cases as JinaCase[]).filter((c) => c.task === "retrieval.passage").slice(0, 5);
    const { status, json } = await postJson(`${url}/rerank`, { model: "jina-v3", query: q.text, documents: docs.map((d) => d.text), return_documents: false });
    expect(status).toBe(200);
    const dot = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);
    for (const r of json.results) expect(Math.abs(r.relevance_score - dot(l2(q.embedding), l2(docs[r.index]!.embedding)))).toBeLessThanOrEqual(1e-4);
  });

  test("bad task values answer 400 naming the valid tasks; task on a model without adapters is refused", async () => {
    const bad = await embed({ model: "jina-v3", input: "hi", task: "retrieval" });
    expect(bad.status).toBe(400);
    expect(bad.json.error.param).toBe("task");
    expect(bad.json.error.message).toContain("retrieval.query, retrieval.passage, separation, classification, text-matching");
    const both = await embed({ model: "jina-v3", input: "hi", task: "separation", input_type: "query" });
    expect(both.status).toBe(400);
    const other = await embed({ model: "bert-mean-norm", input: "hi", task: "separation" });
    expect(other.status).toBe(400);
    expect(other.json.error.message).toContain("task adapters");
    const ok = await embed({ model: "bert-mean-norm", input: "hi" });
    expect(ok.status).toBe(200);
  });
});

type NomicCase = { text: string; prompt_name?: string; input_ids: number[]; embedding: number[]; matryoshka: Record<string, number[]>; matryoshka_raw_8: number[] };

describe("NomicBERT (model_type nomic_bert): layer norm over the full vector before Matryoshka truncation", () => {
  const promptOf = (c: NomicCase) => (c.prompt_name ? { prompt_name: c.prompt_name } : {});

  test("without dimensions: mean pooling + normalise (no layer norm), alone and batched; prompts", async () => {
    const ref = await reference("nomic-embed");
    const cases = ref.cases as NomicCase[];
    expect(cases.some((c) => c.input_ids.length === ref.max_seq_length)).toBe(true);
    for (const c of cases) {
      const { status, json } = await embed({ model: "nomic-embed", input: c.text, ...promptOf(c) });
      expect(status).toBe(200);
      close(json.data[0].embedding, c.embedding);
      expect(json.usage.prompt_tokens).toBe(c.input_ids.length);
    }
    const plain = cases.filter((c) => !c.prompt_name);
    const { json } = await embed({ model: "nomic-embed", input: plain.map((c) => c.text) });
    plain.forEach((c, i) => close(json.data[i].embedding, c.embedding));
  });

  test("dimensions 8 and 32 (full size): layer_norm, truncate, normalise; batched, concurrent, input_type, Cohere output_dimension", async () => {
    const ref = await reference("nomic-embed");
    const cases = ref.cases as NomicCase[];
    const plain = cases.filter((c) => !c.prompt_name);
    const requests = (ref.matryoshka_dimensions as number[]).flatMap((d) =>
      [0, 1, 2, 3].map((r) => {
        const picked = plain.filter((_, i) => i % 4 === r);
        return embed({ model: "nomic-embed", input: picked.map((c) => c.text), dimensions: d }).then((res) => ({ res, picked, d }));
      }),
    );
    for (const { res, picked, d } of await Promise.all(requests)) {
      expect(res.status).toBe(200);
      picked.forEach((c, i) => {
        expect(res.json.data[i].embedding.length).toBe(d);
        close(res.json.data[i].embedding, c.matryoshka[String(d)]!);
      });
    }
    const queries = cases.filter((c) => c.prompt_name === "query");
    const q = await embed({ model: "nomic-embed", input: queries.map((c) => c.text), input_type: "query", dimensions: 8 });
    queries.forEach((c, i) => close(q.json.data[i].embedding, c.matryoshka["8"]!));
    const docs = cases.filter((c) => c.prompt_name === "document");
    const cohere = await postJson(`${url}/v2/embed`, { model: "nomic-embed", texts: docs.map((c) => c.text), input_type: "search_document", output_dimension: 8, embedding_types: ["float"] });
    expect(cohere.status).toBe(200);
    docs.forEach((c, i) => close(cohere.json.embeddings.float[i], c.matryoshka["8"]!));
  });

  test("normalize: false with dimensions returns the layer-normed, truncated vector", async () => {
    const ref = await reference("nomic-embed");
    const cases = (ref.cases as NomicCase[]).filter((c) => !c.prompt_name).slice(0, 5);
    const { json } = await embed({ model: "nomic-embed", input: cases.map((c) => c.text), dimensions: 8, normalize: false });
    cases.forEach((c, i) => expect(maxAbsDiff(json.data[i].embedding, c.matryoshka_raw_8)).toBeLessThanOrEqual(1e-4));
  });

  test("/models reports the dimension from n_embd (no hidden_size in nomic's config)", async () => {
    const models = await (await fetch(`${url}/models`)).json();
    expect(models.data.find((m: { id: string }) => m.id === "nomic-embed").dimensions).toBe(32);
  });
});

type RerankCase = { query: string; document: string; input_ids: number[]; logit: number; score: number };

describe("DeBERTa-v2 one-label reranker (mxbai-rerank-base-v1 layout)", () => {
  test("/rerank scores and raw logits equal CrossEncoder's, per pair and with every document of a query in one request", async () => {
    const ref = await reference("deberta-rerank");
    const cases = ref.cases as RerankCase[];
    expect(cases.filter((c) => c.input_ids.length === ref.max_length).length).toBeGreaterThanOrEqual(3);
    for (const c of cases) {
      for (const raw of [false, true]) {
        const { status, json } = await postJson(`${url}/rerank`, { model: "deberta-rerank", query: c.query, documents: [c.document], raw_scores: raw });
        expect(status).toBe(200);
        expect(Math.abs(json.results[0].relevance_score - (raw ? c.logit : c.score))).toBeLessThanOrEqual(1e-4);
      }
    }
    const byQuery = new Map<string, RerankCase[]>();
    for (const c of cases) byQuery.set(c.query, [...(byQuery.get(c.query) ?? []), c]);
    const requests = [...byQuery].map(([query, docs]) =>
      postJson(`${url}/rerank`, { model: "deberta-rerank", query, documents: docs.map((d) => d.document) }).then((res) => ({ res, docs })),
    );
    for (const { res, docs } of await Promise.all(requests)) {
      expect(res.status).toBe(200);
      expect(res.json.results.length).toBe(docs.length);
      for (const r of res.json.results) expect(Math.abs(r.relevance_score - docs[r.index]!.score)).toBeLessThanOrEqual(1e-4);
    }
  });

  test("TEI /rerank shape: the same scores", async () => {
    const ref = await reference("deberta-rerank");
    const c = (ref.cases as RerankCase[])[0]!;
    const { status, json } = await postJson(`${url}/rerank`, { model: "deberta-rerank", query: c.query, texts: [c.document] });
    expect(status).toBe(200);
    expect(Math.abs(json[0].score - c.score)).toBeLessThanOrEqual(1e-4);
  });
});
