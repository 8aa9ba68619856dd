// Graphs built from config.json + safetensors (--graph build, and auto for repositories without an ONNX export),
// through the HTTP API, against the references computed with sentence-transformers / transformers / CrossEncoder
// (test/fixtures/generate): every case alone, all in one request, and concurrent requests of mixed lengths. A second
// start reads the graphs from the cache.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunningServer } from "../../src/server/serve";
import { cosine, expectVectorsClose, fixture, l2, maxAbsDiff, postJson, reference, sparseDiff, startTestServer } from "../helpers";

/**
 * Embedders (sentence-transformers references); the last four have no ONNX export, so auto builds them (nomic-st's
 * references come from nomic's own remote code; nomic-embed holds BERT weights under a nomic_bert config).
 */
const EMBEDDERS = ["bert-mean-norm", "bert-dense", "roberta-cls", "xlmr-max", "modernbert-embed", "nomic-embed", "qwen3-embed", "gemma-st", "nomic-st", "distilbert-embed", "mpnet-embed"] as const;
const NO_EXPORT = new Set<string>(["distilbert-embed", "mpnet-embed", "gemma-st", "nomic-st"]);
const RERANKERS = ["bert-rerank", "deberta-rerank", "qwen3-rerank", "qwen3-rerank-seq-cls"] as const;
const CLASSIFIERS = ["bert-classify", "deberta-classify"] as const;
/**
 * Heads beside the encoder: SPLADE's masked-LM head (BertForMaskedLM) in the graph, Stanford ColBERT's projection in
 * the graph (HF_ColBERT's linear), PyLate's 1_Dense and bge-m3's pickled sparse / ColBERT heads run by the server.
 */
const HEADS = ["splade", "colbert-stanford", "colbert-pylate", "bge-m3-baai"] as const;
const MODELS = [...EMBEDDERS, ...RERANKERS, ...CLASSIFIERS, ...HEADS];

let server: RunningServer;
let url: string;
const cacheDir = mkdtempSync(join(tmpdir(), "infinity-graphs-test-"));

beforeAll(async () => {
  server = await startTestServer({
    "model-id": MODELS.map(fixture),
    graph: MODELS.map((m) => (NO_EXPORT.has(m) ? "auto" : "build")),
    "cache-dir": cacheDir,
    "batch-size": "8",
    "max-inputs-per-request": "64",
    "max-vectors-per-request": "1000",
    "model-warmup": "false",
  });
  url = server.url;
}, 120_000);
afterAll(async () => {
  await server.shutdown();
  rmSync(cacheDir, { recursive: true, force: true });
});

type EmbedCase = { text: string; input_ids: number[]; embedding: number[]; prompt_name?: string };
const embed = (body: Record<string, unknown>) => postJson(`${url}/embeddings`, { encoding_format: "float", ...body });
const promptOf = (c: EmbedCase) => (c.prompt_name ? { prompt_name: c.prompt_name } : {});

describe("GET /models says which graph runs and why", () => {
  test("built for --graph build and for a repository without an export", async () => {
    const res = await fetch(`${url}/models`);
    const byId = new Map((await res.json()).data.map((m: { id: string }) => [m.id, m]));
    for (const name of MODELS) {
      const g = (byId.get(name) as { graph: { source: string; reason: string; architecture: string; cached: boolean } }).graph;
      expect(g.source).toBe("build");
      expect(g.cached).toBe(false);
      expect(g.reason).toContain(NO_EXPORT.has(name) ? "no ONNX export" : "--graph build");
      expect(g.architecture.length).toBeGreaterThan(0);
    }
  });
});

describe("embeddings from built graphs match sentence-transformers (<= 1e-4)", () => {
  for (const name of EMBEDDERS) {
    test(`${name}: alone, all in one request, concurrent mixed lengths`, async () => {
      const ref = await reference(name);
      const cases = [...(ref.cases as EmbedCase[]), ...((ref.prompt_cases ?? []) as EmbedCase[])];
      for (const c of cases) {
        const { status, json } = await embed({ model: name, input: c.text, ...promptOf(c) });
        expect(status).toBe(200);
        expect(maxAbsDiff(json.data[0].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4);
        expect(json.usage.prompt_tokens).toBe(c.input_ids.length);
      }
      const plain = cases.filter((c) => !c.prompt_name);
      const all = await embed({ model: name, input: plain.map((c) => c.text) });
      plain.forEach((c, i) => expect(maxAbsDiff(all.json.data[i].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4));
      const requests = Array.from({ length: 12 }, (_, r) => {
        const picked = plain.filter((_, i) => (i + r) % 3 !== 0);
        return embed({ model: name, input: picked.map((c) => c.text) }).then((res) => ({ res, picked }));
      });
      for (const { res, picked } of await Promise.all(requests)) {
        expect(res.status).toBe(200);
        picked.forEach((c, i) => expect(maxAbsDiff(res.json.data[i].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4));
      }
    });
  }
});

describe("rerankers and classifiers from built graphs match CrossEncoder / transformers (<= 1e-4)", () => {
  type Pair = { query: string; document: string; input_ids: number[]; logit: number; score: number };
  const rerank = (body: Record<string, unknown>) => postJson(`${url}/rerank`, body);

  for (const name of RERANKERS) {
    test(`${name}: each pair alone, every query's documents batched`, async () => {
      const ref = await reference(name);
      const cases = ref.cases as Pair[];
      for (const c of cases) {
        const raw = await rerank({ model: name, query: c.query, documents: [c.document], raw_scores: true });
        expect(raw.status).toBe(200);
        expect(Math.abs(raw.json.results[0].relevance_score - c.logit)).toBeLessThanOrEqual(1e-4);
        expect(raw.json.usage.total_tokens).toBe(c.input_ids.length);
        const scored = await rerank({ model: name, query: c.query, documents: [c.document] });
        expect(Math.abs(scored.json.results[0].relevance_score - c.score)).toBeLessThanOrEqual(1e-4);
      }
      const docs = cases.map((c) => c.document);
      const queries = [...new Set(cases.map((c) => c.query))];
      const answers = await Promise.all(queries.map((q) => rerank({ model: name, query: q, documents: docs, raw_scores: true })));
      answers.forEach((a, qi) => {
        expect(a.status).toBe(200);
        for (const r of a.json.results) {
          const c = cases[r.index]!;
          if (c.query === queries[qi]) expect(Math.abs(r.relevance_score - c.logit)).toBeLessThanOrEqual(1e-4);
        }
      });
    });
  }

  for (const name of CLASSIFIERS) {
    test(`${name}: /classify alone and batched`, async () => {
      const ref = await reference(name);
      type Case = { text: string; input_ids: number[]; probabilities: number[] };
      const check = (got: Array<{ label: string; score: number }>, c: Case) => {
        for (const [i, label] of Object.entries(ref.id2label as Record<string, string>)) {
          expect(Math.abs(got.find((x) => x.label === label)!.score - c.probabilities[Number(i)]!)).toBeLessThanOrEqual(1e-4);
        }
      };
      for (const c of ref.cases as Case[]) {
        const { status, json } = await postJson(`${url}/classify`, { model: name, input: c.text });
        expect(status).toBe(200);
        check(json.data[0], c);
      }
      const all = await postJson(`${url}/classify`, { model: name, input: ref.cases.map((c: Case) => c.text) });
      (ref.cases as Case[]).forEach((c, i) => check(all.json.data[i], c));
    });
  }
});

describe("heads beside the encoder, over built graphs, match their references (<= 1e-4)", () => {
  type Sparse = { indices: number[]; values: number[] };
  test("splade (BertForMaskedLM's head in the graph): /embeddings batched and alone", async () => {
    const ref = await reference("splade");
    const cases = ref.cases as ({ text: string } & Sparse)[];
    const all = await postJson(`${url}/embeddings`, { model: "splade", input: cases.map((c) => c.text) });
    expect(all.status).toBe(200);
    cases.forEach((c, i) => expect(sparseDiff(all.json.data[i].embedding, c)).toBeLessThanOrEqual(1e-4));
    for (const c of cases.slice(0, 4)) {
      const one = await postJson(`${url}/embeddings`, { model: "splade", input: c.text });
      expect(sparseDiff(one.json.data[0].embedding, c)).toBeLessThanOrEqual(1e-4);
      expect(one.json.data[0].embedding.indices).toEqual(c.indices);
    }
  });

  for (const name of ["colbert-stanford", "colbert-pylate"]) {
    test(`${name}: documents batched, queries alone`, async () => {
      const ref = await reference(name);
      type Case = { text: string; embeddings: number[][] };
      const docs = await postJson(`${url}/embeddings`, { model: name, input: ref.documents.map((d: Case) => d.text), encoding_format: "float" });
      expect(docs.status).toBe(200);
      (ref.documents as Case[]).forEach((d, i) => expectVectorsClose(docs.json.data[i].embedding, d.embeddings));
      for (const q of ref.queries as Case[]) {
        const { json } = await postJson(`${url}/embeddings`, { model: name, input: q.text, input_type: "query", encoding_format: "float" });
        expectVectorsClose(json.data[0].embedding, q.embeddings);
      }
    });
  }

  test("bge-m3-baai (XLMRobertaModel + sparse_linear.pt / colbert_linear.pt): dense, sparse and multi-vector in one request", async () => {
    const ref = await reference("bge-m3");
    type Case = { text: string; dense: number[]; sparse: Sparse; multi_vector: number[][] };
    const cases = ref.cases as Case[];
    const { status, json } = await postJson(`${url}/embeddings`, { model: "bge-m3-baai", input: cases.map((c) => c.text), output: ["dense", "sparse", "multi_vector"], encoding_format: "float" });
    expect(status).toBe(200);
    cases.forEach((c, i) => {
      const e = json.data[i].embedding;
      expect(maxAbsDiff(e.dense, c.dense)).toBeLessThanOrEqual(1e-4);
      expect(sparseDiff(e.sparse, c.sparse)).toBeLessThanOrEqual(1e-4);
      expectVectorsClose(e.multi_vector, c.multi_vector);
    });
  });
});

describe("the graph cache", () => {
  test("a second start reads the built graphs from the cache, and they answer the same", async () => {
    const folders = readdirSync(join(cacheDir, "infinity-graphs"));
    expect(folders.length).toBe(MODELS.length);
    expect(folders.every((f) => !f.includes(".tmp-"))).toBe(true);
    const again = await startTestServer({ "model-id": [fixture("distilbert-embed"), fixture("qwen3-rerank")], graph: ["auto", "build"], "cache-dir": cacheDir, "model-warmup": "false" });
    try {
      const models = (await (await fetch(`${again.url}/models`)).json()).data;
      expect(models.map((m: { graph: { cached: boolean } }) => m.graph.cached)).toEqual([true, true]);
      const ref = await reference("distilbert-embed");
      const c = ref.cases.at(-1) as EmbedCase;
      const { json } = await postJson(`${again.url}/embeddings`, { model: "distilbert-embed", input: c.text, encoding_format: "float" });
      expect(maxAbsDiff(json.data[0].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4);
      expect(readdirSync(join(cacheDir, "infinity-graphs")).length).toBe(MODELS.length);
    } finally {
      await again.shutdown();
    }
  });

  test("--graph export on a repository without an export, and an architecture the builder does not know, are refused with what to do", async () => {
    await expect(startTestServer({ "model-id": fixture("distilbert-embed"), graph: "export", "cache-dir": cacheDir })).rejects.toThrow(/no ONNX export/);
    await expect(startTestServer({ "model-id": fixture("siglip"), graph: "build", "cache-dir": cacheDir })).rejects.toThrow(/does not know SiglipModel \(it builds BertModel, .*Gemma3TextModel\)\. Export the model with `optimum-cli export onnx --model /);
  });
});

describe("--dtype int8 on a built graph: weights quantized at build time (MatMulNBits), activations per row", () => {
  test("close to the float32 references, and a text's vector does not depend on its batch", async () => {
    const names = ["bert-mean-norm", "qwen3-embed", "distilbert-embed"];
    const int8 = await startTestServer({ "model-id": names.map(fixture), graph: "build", dtype: "int8", "cache-dir": cacheDir, "model-warmup": "false", "batch-size": "8" });
    try {
      const models = (await (await fetch(`${int8.url}/models`)).json()).data;
      expect(models.map((m: { dtype: string; graph: { source: string } }) => [m.dtype, m.graph.source])).toEqual(names.map(() => ["int8", "build"]));
      for (const name of names) {
        const cases = ((await reference(name)).cases as EmbedCase[]);
        const alone: number[][] = [];
        for (const c of cases) {
          const { status, json } = await postJson(`${int8.url}/embeddings`, { model: name, input: c.text, encoding_format: "float" });
          expect(status).toBe(200);
          expect(cosine(json.data[0].embedding, c.embedding)).toBeGreaterThan(0.99);
          alone.push(json.data[0].embedding);
        }
        const batched = await postJson(`${int8.url}/embeddings`, { model: name, input: cases.map((c) => c.text), encoding_format: "float" });
        // Activations quantized per block of 32 of each row: no scale is shared across the batch (with blocks of 128
        // onnxruntime's kernel moved vectors by 1e-2 with their batch: bench/built-graph.ts).
        cases.forEach((_, i) => expect(maxAbsDiff(batched.json.data[i].embedding, alone[i]!)).toBeLessThanOrEqual(1e-6));
      }
    } finally {
      await int8.shutdown();
    }
  });
});
