// ColPali through the HTTP API: parity with transformers' ColPaliProcessor + ColPaliForRetrieval (references from
// test/fixtures/generate/colpali.py) for text queries and image documents, alone and batched, float and base64;
// MaxSim scores and /rerank order (text query against image documents) matching ColPaliProcessor.score_retrieval.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunningServer } from "../../src/server/serve";
import { expectVectorsClose, fixture, fixtureBytes, maxAbsDiff, postJson, reference, startTestServer } from "../helpers";
import { maxSim } from "../../src/tasks/multivector";

interface Case { input_ids: number[]; embeddings: number[][] }
interface Ref {
  dimension: number;
  query_cases: Array<Case & { text: string }>;
  image_cases: Array<Case & { file: string }>;
  scores: number[][];
}

let server: RunningServer;
let url: string;
let ref: Ref;
let uris: string[];
// All 5 reference queries (271 vectors) fit in one request; 9 images (9 x 34 vectors) do not.
const MAX_VECTORS = 280;

beforeAll(async () => {
  ref = await reference("colpali");
  uris = await Promise.all(
    ref.image_cases.map(async (c) => `data:image/${c.file.endsWith(".png") ? "png" : "jpeg"};base64,${Buffer.from(await fixtureBytes(c.file)).toString("base64")}`),
  );
  server = await startTestServer({ "model-id": fixture("colpali"), "batch-size": "4", "max-vectors-per-request": String(MAX_VECTORS), "media-workers": "1" });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

const asVectors = (rows: number[][]) => ({ data: Float32Array.from(rows.flat()), rows: rows.length, dim: rows[0]!.length });

describe("ColPali parity with transformers' ColPali classes", () => {
  test("text queries (query_prefix from processor_config.json, 10 augmentation tokens): one request each, concurrently", async () => {
    const answers = await Promise.all(ref.query_cases.map((q) => postJson(`${url}/embeddings`, { model: "colpali", input: q.text, input_type: "query" })));
    answers.forEach(({ status, json }, i) => {
      expect(status).toBe(200);
      expectVectorsClose(json.data[0].embedding, ref.query_cases[i]!.embeddings);
      expect(json.usage.prompt_tokens).toBe(ref.query_cases[i]!.input_ids.length);
    });
  });

  test("text queries batched in one request (input_type defaults to query)", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model: "colpali", input: ref.query_cases.map((q) => q.text) });
    expect(status).toBe(200);
    ref.query_cases.forEach((q, i) => expectVectorsClose(json.data[i].embedding, q.embeddings));
    expect(json.usage.prompt_tokens).toBe(ref.query_cases.reduce((n, q) => n + q.input_ids.length, 0));
  });

  test("images (modality image, data: URIs): alone and all in one batched request", async () => {
    for (const [i, uri] of uris.entries()) {
      const { status, json } = await postJson(`${url}/embeddings`, { model: "colpali", modality: "image", input: uri });
      expect(status).toBe(200);
      expectVectorsClose(json.data[0].embedding, ref.image_cases[i]!.embeddings);
      expect(json.usage.prompt_tokens).toBe(ref.image_cases[i]!.input_ids.length);
    }
    const { status, json } = await postJson(`${url}/embeddings`, { model: "colpali", modality: "image", input: uris });
    expect(status).toBe(200);
    ref.image_cases.forEach((c, i) => expectVectorsClose(json.data[i].embedding, c.embeddings));
  });

  test("base64: the row-major float32 matrix with its shape", async () => {
    const c = ref.image_cases[1]!;
    const { json } = await postJson(`${url}/embeddings`, { model: "colpali", modality: "image", input: [uris[1]], encoding_format: "base64" });
    expect(json.data[0].shape).toEqual([c.embeddings.length, ref.dimension]);
    const bytes = Buffer.from(json.data[0].embedding, "base64");
    const flat = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    expect(maxAbsDiff(flat, c.embeddings.flat())).toBeLessThanOrEqual(1e-4);
  });

  test("MaxSim of the served vectors equals score_retrieval's", async () => {
    const q = await postJson(`${url}/embeddings`, { model: "colpali", input: ref.query_cases.map((c) => c.text) });
    const d = await postJson(`${url}/embeddings`, { model: "colpali", modality: "image", input: uris });
    ref.scores.forEach((row, i) =>
      row.forEach((want, j) => expect(Math.abs(maxSim(asVectors(q.json.data[i].embedding), asVectors(d.json.data[j].embedding)) - want)).toBeLessThanOrEqual(1e-3)),
    );
  });

  test("/rerank: a text query against image documents (data: URIs) ranks as the reference scores do, in chunks within --max-vectors-per-request", async () => {
    // The reference images repeated to 9 images of 34 vectors (306), past the 280 bound: they are run and scored 8
    // (272 vectors) at a time.
    const docs = Array.from({ length: 9 }, (_, k) => uris[k % uris.length]!);
    const model = server.ctx.registry.list().find((m) => m.name === "colpali")! as unknown as { colpali: { images: { submit: (x: unknown[], s: AbortSignal) => Promise<unknown> } } };
    const images = model.colpali.images;
    const original = images.submit.bind(images);
    const sizes: number[] = [];
    images.submit = (x, s) => (sizes.push(x.length), original(x, s));
    try {
      for (const [i, q] of ref.query_cases.entries()) {
        const { status, json } = await postJson(`${url}/rerank`, { model: "colpali", query: q.text, documents: docs });
        expect(status).toBe(200);
        const scores = docs.map((_, k) => ref.scores[i]![k % uris.length]!);
        const want = scores.map((s, index) => ({ s, index })).sort((a, b) => b.s - a.s || a.index - b.index);
        // Copies of one image tie: the order is checked by which reference image each place holds.
        expect(json.results.map((r: { index: number }) => r.index % uris.length)).toEqual(want.map((w) => w.index % uris.length));
        json.results.forEach((r: { index: number; relevance_score: number }) => expect(Math.abs(r.relevance_score - scores[r.index]!)).toBeLessThanOrEqual(1e-3));
      }
    } finally {
      images.submit = original;
    }
    expect(docs.length * 34).toBeGreaterThan(MAX_VECTORS);
    expect(sizes).toEqual(ref.query_cases.flatMap(() => [8, 1]));
  });
});

test("/models: a multi-vector model over text and image, with embedding_dim as its dimensions", async () => {
  const json = await (await fetch(`${url}/models`)).json();
  const m = json.data.find((x: { id: string }) => x.id === "colpali");
  expect(m.modalities).toEqual(["text", "image"]);
  expect(m.dimensions).toBe(32);
  expect(m.capabilities).toEqual(["embed", "rerank"]);
});

describe("ColPali errors", () => {
  test("more image vectors than --max-vectors-per-request is a 413 before anything runs", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model: "colpali", modality: "image", input: [...uris, ...uris, uris[0]] });
    expect(status).toBe(413);
    expect(json.error.code).toBe("too_many_vectors");
    expect(json.error.message).toContain(`${9 * ref.image_cases[0]!.input_ids.length} token vectors; at most ${MAX_VECTORS}`);
  });

  test("a query longer than the model takes is refused (cutting it would drop its augmentation tokens)", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model: "colpali", input: "word ".repeat(400) });
    expect(status).toBe(413);
    expect(json.error.message).toContain("as a ColPali or ColModernVBERT query");
  });

  test("document text, audio, prompt_name and a bad image answer 400 and the server keeps serving", async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ input: "x", input_type: "document" }, /documents are images/],
      [{ input: "x", modality: "audio" }, /modality "audio" is not supported/],
      [{ input: "x", prompt_name: "query" }, /prompt_name/],
      [{ input: "data:image/png;base64,AAAA", modality: "image" }, /image/],
    ];
    for (const [body, message] of cases) {
      const { status, json } = await postJson(`${url}/embeddings`, { model: "colpali", ...body });
      expect(status).toBe(400);
      expect(json.error.message).toMatch(message);
    }
    const bad = await postJson(`${url}/rerank`, { model: "colpali", query: "x", documents: ["not an image"] });
    expect(bad.status).toBe(400);
    expect(bad.json.error.param).toBe("documents[0]");
    const ok = await postJson(`${url}/embeddings`, { model: "colpali", input: "hello" });
    expect(ok.status).toBe(200);
  });
});

describe("a merged PaliGemma export (the Qdrant/colpali-v1.3 layout)", () => {
  // The fixture rewritten as a merged export: config.json is the PaliGemma config (model_type paligemma, no
  // embedding_dim), the image processor in preprocessor_config.json, processor_config.json with the prefixes only, and a
  // tokenizer.json whose template adds <s> (BOS) as PaliGemma's does; the processor turns that off, so the server
  // must strip it. Same graph, so the same reference vectors.
  let merged: RunningServer;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "colpali-merged-"));
    cpSync(fixture("colpali"), dir, { recursive: true });
    const read = (f: string) => JSON.parse(readFileSync(join(dir, f), "utf8"));
    const config = read("config.json");
    writeFileSync(join(dir, "config.json"), JSON.stringify({ ...config.vlm_config, architectures: ["PaliGemmaForConditionalGeneration"] }));
    const proc = read("processor_config.json");
    writeFileSync(join(dir, "preprocessor_config.json"), JSON.stringify(proc.image_processor));
    writeFileSync(join(dir, "processor_config.json"), JSON.stringify({ query_prefix: proc.query_prefix, visual_prompt_prefix: proc.visual_prompt_prefix }));
    const tok = read("tokenizer.json");
    tok.post_processor = {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }],
      special_tokens: { "<s>": { id: "<s>", ids: [0], tokens: ["<s>"] } },
    };
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tok));
    merged = await startTestServer({ "model-id": dir, "served-model-name": "colpali-merged", "media-workers": "1" });
  });
  afterAll(async () => {
    await merged.shutdown();
    rmSync(dir, { recursive: true, force: true });
  });

  test("queries (the tokenizer's own BOS stripped) and images match the reference", async () => {
    const q = await postJson(`${merged.url}/embeddings`, { model: "colpali-merged", input: ref.query_cases.slice(0, 3).map((c) => c.text) });
    expect(q.status).toBe(200);
    ref.query_cases.slice(0, 3).forEach((c, i) => expectVectorsClose(q.json.data[i].embedding, c.embeddings));
    const d = await postJson(`${merged.url}/embeddings`, { model: "colpali-merged", modality: "image", input: uris.slice(0, 2) });
    expect(d.status).toBe(200);
    ref.image_cases.slice(0, 2).forEach((c, i) => expectVectorsClose(d.json.data[i].embedding, c.embeddings));
  });
});
