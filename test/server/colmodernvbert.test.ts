// ColModernVBERT through the HTTP API: parity with transformers' ColModernVBertProcessor (Idefics3ImageProcessorPil) +
// ColModernVBertForRetrieval (references from test/fixtures/generate/colmodernvbert.py) for text queries and image
// documents split into a variable number of tiles, alone and batched; the unsplit processing (do_image_splitting
// false) and the flat ModernVBert config of the original / Qdrant export; MaxSim and /rerank order.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunningServer } from "../../src/server/serve";
import { expectVectorsClose, fixture, fixtureBytes, postJson, reference, startTestServer } from "../helpers";

interface Case { input_ids: number[]; embeddings: number[][] }
interface Ref {
  dimension: number;
  query_cases: Array<Case & { text: string }>;
  image_cases: Array<Case & { file: string; tiles: number }>;
  nosplit_cases: Array<Case & { file: string; tiles: number }>;
  scores: number[][];
}

let server: RunningServer;
let url: string;
let ref: Ref;
let uris: string[];
let dirs: string[] = [];
// The four reference images (305 vectors) fit in one request; three times them do not.
const MAX_VECTORS = 400;

/** A copy of the fixture with its processor_config.json / config.json changed. */
function variant(edit: (read: (f: string) => any, write: (f: string, v: unknown) => void) => void): string {
  const dir = mkdtempSync(join(tmpdir(), "colmodernvbert-"));
  cpSync(fixture("colmodernvbert"), dir, { recursive: true });
  edit((f) => JSON.parse(readFileSync(join(dir, f), "utf8")), (f, v) => writeFileSync(join(dir, f), JSON.stringify(v)));
  dirs.push(dir);
  return dir;
}

beforeAll(async () => {
  ref = await reference("colmodernvbert");
  uris = await Promise.all(
    ref.image_cases.map(async (c) => `data:image/${c.file.endsWith(".png") ? "png" : "jpeg"};base64,${Buffer.from(await fixtureBytes(c.file)).toString("base64")}`),
  );
  const nosplit = variant((read, write) => {
    const proc = read("processor_config.json");
    write("processor_config.json", { ...proc, image_processor: { ...proc.image_processor, do_image_splitting: false } });
  });
  // The original / Qdrant export: a flat ModernVBert config naming the ColModernVBert architecture, the image processor
  // in preprocessor_config.json and processor_config.json with image_seq_len only.
  const flat = variant((read, write) => {
    const config = read("config.json");
    write("config.json", { ...config.vlm_config, architectures: ["ColModernVBert"], embedding_dim: config.embedding_dim });
    const proc = read("processor_config.json");
    write("preprocessor_config.json", proc.image_processor);
    write("processor_config.json", { image_seq_len: proc.image_seq_len, processor_class: "ColModernVBertProcessor" });
  });
  server = await startTestServer({
    "model-id": [fixture("colmodernvbert"), nosplit, flat],
    "served-model-name": ["colmodernvbert", "nosplit", "flat"],
    "batch-size": "4",
    // warm-up stays on: this family's warm-up hook (src/engine/families/) runs here and nowhere else in the suite
    "max-vectors-per-request": String(MAX_VECTORS),
    "media-workers": "1",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("ColModernVBERT parity with transformers' classes", () => {
  for (const model of ["colmodernvbert", "flat"]) {
    test(`${model}: text queries (10 <end_of_utterance> augmentation tokens, the tokenizer's template), alone and batched`, async () => {
      const answers = await Promise.all(ref.query_cases.map((q) => postJson(`${url}/embeddings`, { model, input: q.text, input_type: "query" })));
      answers.forEach(({ status, json }, i) => {
        expect(status).toBe(200);
        expectVectorsClose(json.data[0].embedding, ref.query_cases[i]!.embeddings);
        expect(json.usage.prompt_tokens).toBe(ref.query_cases[i]!.input_ids.length);
      });
      const { json } = await postJson(`${url}/embeddings`, { model, input: ref.query_cases.map((q) => q.text) });
      ref.query_cases.forEach((q, i) => expectVectorsClose(json.data[i].embedding, q.embeddings));
    });

    test(`${model}: images split into tiles (different grids), alone and all in one batch`, async () => {
      for (const [i, uri] of uris.entries()) {
        const { status, json } = await postJson(`${url}/embeddings`, { model, modality: "image", input: uri });
        expect(status).toBe(200);
        expectVectorsClose(json.data[0].embedding, ref.image_cases[i]!.embeddings);
        expect(json.usage.prompt_tokens).toBe(ref.image_cases[i]!.input_ids.length);
      }
      const { status, json } = await postJson(`${url}/embeddings`, { model, modality: "image", input: uris });
      expect(status).toBe(200);
      ref.image_cases.forEach((c, i) => expectVectorsClose(json.data[i].embedding, c.embeddings));
    });
  }

  test("do_image_splitting false: each image one tile, resized square", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model: "nosplit", modality: "image", input: uris });
    expect(status).toBe(200);
    ref.nosplit_cases.forEach((c, i) => expectVectorsClose(json.data[i].embedding, c.embeddings));
  });

  test("the reference images split into different tile counts", () => {
    expect(new Set(ref.image_cases.map((c) => c.tiles)).size).toBeGreaterThan(1);
  });

  test("/rerank: a text query against image documents ranks as score_retrieval does", async () => {
    for (const [i, q] of ref.query_cases.entries()) {
      const { status, json } = await postJson(`${url}/rerank`, { model: "colmodernvbert", query: q.text, documents: uris, raw_scores: true });
      expect(status).toBe(200);
      const want = ref.scores[i]!.map((s, index) => ({ s, index })).sort((a, b) => b.s - a.s);
      expect(json.results.map((r: { index: number }) => r.index)).toEqual(want.map((w) => w.index));
      json.results.forEach((r: { index: number; relevance_score: number }) => expect(Math.abs(r.relevance_score - ref.scores[i]![r.index]!)).toBeLessThanOrEqual(1e-3));
    }
  });
});

test("/models: text and image, embedding_dim as its dimensions", async () => {
  const json = await (await fetch(`${url}/models`)).json();
  const m = json.data.find((x: { id: string }) => x.id === "colmodernvbert");
  expect(m.modalities).toEqual(["text", "image"]);
  expect(m.dimensions).toBe(32);
  expect(m.capabilities).toEqual(["embed", "rerank"]);
});

describe("ColModernVBERT errors", () => {
  test("more image vectors than --max-vectors-per-request is a 413 (counted from each image's grid) before the model runs", async () => {
    const docs = [...uris, ...uris, ...uris];
    const total = [...ref.image_cases, ...ref.image_cases, ...ref.image_cases].reduce((n, c) => n + c.input_ids.length, 0);
    expect(total).toBeGreaterThan(MAX_VECTORS);
    const { status, json } = await postJson(`${url}/embeddings`, { model: "colmodernvbert", modality: "image", input: docs });
    expect(status).toBe(413);
    expect(json.error.code).toBe("too_many_vectors");
    expect(json.error.message).toContain(`${total} token vectors; at most ${MAX_VECTORS}`);
  });

  test("a query longer than the model takes is refused (cutting it would drop its augmentation tokens); document text is refused", async () => {
    const long = await postJson(`${url}/embeddings`, { model: "colmodernvbert", input: "word ".repeat(600) });
    expect(long.status).toBe(413);
    expect(long.json.error.message).toContain("as a ColPali or ColModernVBERT query");
    const doc = await postJson(`${url}/embeddings`, { model: "colmodernvbert", input: "x", input_type: "document" });
    expect(doc.status).toBe(400);
    expect(doc.json.error.message).toMatch(/documents are images/);
  });

  test("a bad image names its place in the list, also past the first /rerank chunk", async () => {
    const docs = [...uris, ...uris, ...uris, "data:image/png;base64,AAAA"];
    const { status, json } = await postJson(`${url}/rerank`, { model: "colmodernvbert", query: "x", documents: docs });
    expect(status).toBe(400);
    expect(json.error.param).toBe(`documents[${docs.length - 1}]`);
    const ok = await postJson(`${url}/embeddings`, { model: "colmodernvbert", input: "hello" });
    expect(ok.status).toBe(200);
  });
});
