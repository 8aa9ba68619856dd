// Model families beyond BERT-style encoders, through the HTTP API, against references computed with
// sentence-transformers / transformers (test/fixtures/generate/families.py): every case alone, all cases in one
// request and as concurrent requests of mixed lengths (so batches pad, on the model's padding side).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RunningServer } from "../../src/server/serve";
import { fixture, fixtureBytes, l2, maxAbsDiff, postJson, reference, startTestServer } from "../helpers";

const QWEN = ["qwen3-embed", "qwen3-embed-qdrant"] as const;
const DENSE = ["bert-dense", "gemma-embed"] as const;
const RERANKERS = ["qwen3-rerank", "qwen3-rerank-seq-cls", "qwen3-rerank-keep"] as const;
const ENCODERS = ["modernbert-embed", "deberta-classify", "siglip"] as const;
let server: RunningServer;
let url: string;

beforeAll(async () => {
  server = await startTestServer({
    "model-id": [...QWEN.map(fixture), ...DENSE.map(fixture), ...RERANKERS.map(fixture), ...ENCODERS.map(fixture)],
    "batch-size": "8",
    "max-inputs-per-request": "64",
    // Parity of 11 models: warm-up's timed runs add nothing here (warm-up itself: options.test.ts, instances.test.ts).
    "model-warmup": "false",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

const embed = (body: Record<string, unknown>) => postJson(`${url}/embeddings`, { encoding_format: "float", ...body });

type EmbedCase = { text: string; input_ids: number[]; embedding: number[]; prompt_name?: string };

/** Every case alone, then all in one request, then concurrent requests of rotating subsets. */
async function checkParity(model: string, cases: EmbedCase[], extra: (c: EmbedCase) => Record<string, unknown> = () => ({})) {
  for (const c of cases) {
    const { status, json } = await embed({ model, input: c.text, ...extra(c) });
    expect(status).toBe(200);
    expect(maxAbsDiff(json.data[0].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4);
    expect(json.usage.prompt_tokens).toBe(c.input_ids.length);
  }
  const requests = Array.from({ length: 16 }, (_, r) => {
    const order = cases.map((_, i) => (i + r) % cases.length).slice(0, 1 + (r % 6));
    const groups = new Map<string, number[]>();
    for (const i of order) {
      const key = JSON.stringify(extra(cases[i]!));
      groups.set(key, [...(groups.get(key) ?? []), i]);
    }
    return [...groups].map(([key, idx]) =>
      embed({ model, input: idx.map((i) => cases[i]!.text), ...JSON.parse(key) }).then((res) => ({ res, idx })),
    );
  }).flat();
  for (const { res, idx } of await Promise.all(requests)) {
    expect(res.status).toBe(200);
    idx.forEach((refIndex, i) => {
      expect(maxAbsDiff(res.json.data[i].embedding, l2(cases[refIndex]!.embedding))).toBeLessThanOrEqual(1e-4);
    });
  }
}

describe("decoder embedders (Qwen3-Embedding): last-token pooling, left padding", () => {
  for (const name of QWEN) {
    test(`${name}: parity alone, batched and concurrent`, async () => {
      const ref = await reference("qwen3-embed");
      expect(ref.cases.some((c: EmbedCase) => c.input_ids.length === ref.max_seq_length)).toBe(true);
      await checkParity(name, ref.cases);
    });

    test(`${name}: query instruction from the model's prompts, mixed with plain inputs`, async () => {
      const ref = await reference("qwen3-embed");
      await checkParity(name, [...ref.prompt_cases, ...ref.cases.slice(0, 5)], (c) => (c.prompt_name ? { prompt_name: c.prompt_name } : {}));
    });

    test(`${name}: Matryoshka dimensions`, async () => {
      const ref = await reference("qwen3-embed");
      const m = ref.matryoshka;
      const { status, json } = await embed({ model: name, input: m.cases.map((c: EmbedCase) => c.text), dimensions: m.dimensions });
      expect(status).toBe(200);
      m.cases.forEach((c: EmbedCase, i: number) => {
        expect(json.data[i].embedding.length).toBe(m.dimensions);
        expect(maxAbsDiff(json.data[i].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4);
      });
    });
  }
});

describe("sentence-transformers Dense modules", () => {
  test("bert-dense: the export stops at last_hidden_state; Tanh and Identity Dense layers applied after pooling", async () => {
    const ref = await reference("bert-dense");
    expect(ref.dimension).toBe(16);
    await checkParity("bert-dense", ref.cases);
    const models = await (await fetch(`${url}/models`)).json();
    expect(models.data.find((m: { id: string }) => m.id === "bert-dense").dimensions).toBe(16);
  });

  test("gemma-embed (EmbeddingGemma layout): the sentence_embedding output is read; prompts", async () => {
    // Its Dense folders hold only config.json: without sentence_embedding the model would not load.
    const ref = await reference("gemma-embed");
    await checkParity("gemma-embed", ref.cases);
    await checkParity("gemma-embed", [...ref.prompt_cases, ...ref.cases.slice(3, 7)], (c) => (c.prompt_name ? { prompt_name: c.prompt_name } : {}));
    // /models says where the pooling happens: inside the graph for gemma-embed, by the server for bert-dense.
    const models = (await (await fetch(`${url}/models`)).json()).data as { id: string; pooling: string; dimensions: number }[];
    const gemma = models.find((m) => m.id === "gemma-embed")!;
    expect(gemma.pooling).toBe("sentence_embedding");
    expect(gemma.dimensions).toBe(ref.cases[0].embedding.length);
    expect(models.find((m) => m.id === "bert-dense")!.pooling).toBe((await reference("bert-dense")).pooling);
  });
});

describe("request fields input_type and normalize", () => {
  test("input_type query / search_query selects the model's query prompt (Qwen3 instruction); document its document prompt", async () => {
    const ref = await reference("qwen3-embed");
    const q = ref.prompt_cases.filter((c: EmbedCase) => c.prompt_name === "query");
    for (const inputType of ["query", "search_query"]) {
      const { status, json } = await embed({ model: "qwen3-embed", input: q.map((c: EmbedCase) => c.text), input_type: inputType });
      expect(status).toBe(200);
      q.forEach((c: EmbedCase, i: number) => expect(maxAbsDiff(json.data[i].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4));
    }
    const gemma = await reference("gemma-embed");
    const docs = gemma.prompt_cases.filter((c: EmbedCase) => c.prompt_name === "document");
    expect(docs.length).toBeGreaterThan(0);
    for (const inputType of ["document", "search_document"]) {
      const { json } = await embed({ model: "gemma-embed", input: docs.map((c: EmbedCase) => c.text), input_type: inputType });
      docs.forEach((c: EmbedCase, i: number) => expect(maxAbsDiff(json.data[i].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4));
    }
  });

  test("a model without prompts embeds the text as it is for either input_type", async () => {
    const ref = await reference("bert-dense");
    for (const inputType of ["query", "document"]) {
      const { status, json } = await embed({ model: "bert-dense", input: ref.cases[2].text, input_type: inputType });
      expect(status).toBe(200);
      expect(maxAbsDiff(json.data[0].embedding, l2(ref.cases[2].embedding))).toBeLessThanOrEqual(1e-4);
    }
  });

  test("normalize: false returns the pooled (and Dense) vector as the model computes it before Normalize", async () => {
    const ref = await reference("bert-dense");
    const { status, json } = await embed({ model: "bert-dense", input: ref.raw_cases.map((c: EmbedCase) => c.text), normalize: false });
    expect(status).toBe(200);
    ref.raw_cases.forEach((c: EmbedCase, i: number) => {
      expect(Math.abs(Math.hypot(...json.data[i].embedding) - 1)).toBeGreaterThan(1e-3);
      expect(maxAbsDiff(json.data[i].embedding, c.embedding)).toBeLessThanOrEqual(1e-4);
    });
    const cut = await embed({ model: "bert-dense", input: ref.raw_cases[0].text, normalize: false, dimensions: 4 });
    expect(maxAbsDiff(cut.json.data[0].embedding, ref.raw_cases[0].embedding.slice(0, 4))).toBeLessThanOrEqual(1e-4);
  });

  test("bad values answer 400 in the one error shape", async () => {
    const both = await embed({ model: "qwen3-embed", input: "x", input_type: "query", prompt_name: "query" });
    expect([both.status, both.json.error.param]).toEqual([400, "input_type"]);
    const bad = await embed({ model: "qwen3-embed", input: "x", input_type: "questions" });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("search_query");
    // Token ids of the model's own vocabulary (TEI's /embed; /embeddings reads integers as OpenAI's cl100k_base ids).
    const ids = await postJson(`${url}/embed`, { model: "qwen3-embed", inputs: [5, 6, 7], input_type: "query" });
    expect([ids.status, ids.json.error.param]).toEqual([400, "input_type"]);
    const norm = await embed({ model: "qwen3-embed", input: "x", normalize: "yes" });
    expect(norm.status).toBe(400);
    expect(norm.json.error.message).toContain("normalize");
  });
});

describe("LLM rerankers: Qwen3-Reranker prompt, left padding, score at the last position", () => {
  type Pair = { query: string; document: string; input_ids: number[]; logit: number; score: number };
  const rerank = (body: Record<string, unknown>) => postJson(`${url}/rerank`, body);

  for (const name of RERANKERS) {
    test(`${name}: each pair alone, and every query's documents batched together`, async () => {
      const ref = await reference(name);
      expect(ref.cases.some((c: Pair) => c.input_ids.length === ref.max_length)).toBe(true);
      for (const c of ref.cases as Pair[]) {
        const { status, json } = await rerank({ model: name, query: c.query, documents: [c.document] });
        expect(status).toBe(200);
        expect(Math.abs(json.results[0].relevance_score - c.score)).toBeLessThanOrEqual(1e-4);
        expect(json.usage.total_tokens).toBe(c.input_ids.length);
        const raw = await rerank({ model: name, query: c.query, documents: [c.document], raw_scores: true });
        expect(Math.abs(raw.json.results[0].relevance_score - c.logit)).toBeLessThanOrEqual(1e-4);
      }
      // Concurrent requests, one per query with all documents of the reference: rows of different lengths pad left.
      const docs = (ref.cases as Pair[]).map((c) => c.document);
      const queries = [...new Set((ref.cases as Pair[]).map((c) => c.query))];
      const answers = await Promise.all(queries.map((q) => rerank({ model: name, query: q, documents: docs, raw_scores: true })));
      answers.forEach((a, qi) => {
        expect(a.status).toBe(200);
        for (const r of a.json.results) {
          const c = (ref.cases as Pair[])[r.index]!;
          if (c.query === queries[qi]) expect(Math.abs(r.relevance_score - c.logit)).toBeLessThanOrEqual(1e-4);
        }
      });
    });
  }

  test("qwen3-rerank: a too-long document is cut and reported, or refused with truncate false", async () => {
    const long = "the quick brown fox jumps over the lazy dog ".repeat(40);
    const cut = await rerank({ model: "qwen3-rerank", query: "q", documents: ["short", long] });
    expect(cut.status).toBe(200);
    expect(cut.headers.get("x-truncated-inputs")).toBe("1");
    const refused = await rerank({ model: "qwen3-rerank", query: "q", documents: ["short", long], truncate: false });
    expect(refused.status).toBe(413);
    expect(refused.json.error.param).toBe("documents[1]");
    expect(refused.json.error.message).toMatch(/^`documents\[1\]` has \d+ tokens; model "qwen3-rerank" takes at most \d+/);
  });

  test("qwen3-rerank: a request's instruction replaces the default one in the prompt", async () => {
    const ref = await reference("qwen3-rerank");
    const c = ref.instruction_case;
    const { status, json } = await rerank({ model: "qwen3-rerank", query: c.query, documents: [c.document], instruction: c.instruction });
    expect(status).toBe(200);
    expect(Math.abs(json.results[0].relevance_score - c.score)).toBeLessThanOrEqual(1e-4);
    expect(json.usage.total_tokens).toBe(c.input_ids.length);
    const other = await rerank({ model: "qwen3-rerank", query: c.query, documents: [c.document] });
    expect(Math.abs(other.json.results[0].relevance_score - c.score)).toBeGreaterThan(1e-4);
  });
});

describe("encoder families: ModernBERT, DeBERTa-v2", () => {
  test("modernbert-embed (no token_type_ids): parity; input_type picks the search_query: / search_document: prompts", async () => {
    const ref = await reference("modernbert-embed");
    await checkParity("modernbert-embed", ref.cases);
    await checkParity("modernbert-embed", [...ref.prompt_cases, ...ref.cases.slice(0, 4)], (c) => (c.prompt_name ? { input_type: c.prompt_name } : {}));
  });

  test("deberta-classify (config and tokenizer only inside onnx/): /classify parity alone and batched", async () => {
    const ref = await reference("deberta-classify");
    type Case = { text: string; input_ids: number[]; logits: number[]; probabilities: number[] };
    const check = (got: Array<{ label: string; score: number }>, c: Case) => {
      for (const [i, label] of Object.entries(ref.id2label as Record<string, string>)) {
        const s = got.find((x) => x.label === label)!.score;
        expect(Math.abs(s - c.probabilities[Number(i)]!)).toBeLessThanOrEqual(1e-4);
      }
    };
    for (const c of ref.cases as Case[]) {
      const { status, json } = await postJson(`${url}/classify`, { model: "deberta-classify", input: c.text });
      expect(status).toBe(200);
      check(json.data[0], c);
      expect(json.usage.total_tokens).toBe(c.input_ids.length);
    }
    const all = await postJson(`${url}/classify`, { model: "deberta-classify", input: ref.cases.map((c: Case) => c.text) });
    (ref.cases as Case[]).forEach((c, i) => check(all.json.data[i], c));
    expect(new Set(all.json.data.map((d: Array<{ label: string }>) => d[0]!.label)).size).toBe(2);
  });
});

describe("SigLIP: text padded to the processor's fixed length, pooler_output of both towers", () => {
  test("text alone and batched (every row fed 64 tokens); usage counts real tokens", async () => {
    const ref = await reference("siglip");
    type T = { text: string; input_ids: number[]; text_embeds: number[] };
    for (const c of ref.text_cases as T[]) {
      const { status, json } = await embed({ model: "siglip", input: c.text });
      expect(status).toBe(200);
      expect(maxAbsDiff(json.data[0].embedding, l2(c.text_embeds))).toBeLessThanOrEqual(1e-4);
      expect(json.usage.prompt_tokens).toBe(c.input_ids.length);
    }
    const all = await embed({ model: "siglip", input: ref.text_cases.map((c: T) => c.text) });
    (ref.text_cases as T[]).forEach((c, i) => expect(maxAbsDiff(all.json.data[i].embedding, l2(c.text_embeds))).toBeLessThanOrEqual(1e-4));
  });

  test("images through the vision tower's pooler_output", async () => {
    const ref = await reference("siglip");
    type I = { file: string; image_embeds: number[] };
    const uris = await Promise.all(
      (ref.image_cases as I[]).map(async (c) => `data:image/${c.file.endsWith(".png") ? "png" : "jpeg"};base64,${Buffer.from(await fixtureBytes(c.file)).toString("base64")}`),
    );
    const { status, json } = await embed({ model: "siglip", modality: "image", input: uris });
    expect(status).toBe(200);
    (ref.image_cases as I[]).forEach((c, i) => expect(maxAbsDiff(json.data[i].embedding, l2(c.image_embeds))).toBeLessThanOrEqual(1e-4));
  });
});
