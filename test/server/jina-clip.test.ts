// jina-clip (jinaai/jina-clip-v2 layout): one onnx/model.onnx with both towers (input_ids + pixel_values ->
// text_embeddings, image_embeddings and their l2norm_ variants), through the HTTP API against the torch model of
// test/fixtures/generate/jina_clip.py: text batched with other texts (right padding with the pad id; the graph makes
// its mask from it), images batched with other images, each tower through its own graph cut from the combined one
// (also with the weights as external data); the query instruction; Matryoshka truncation before normalising; raw
// vectors; refusals.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import type { RunningServer } from "../../src/server/serve";
import { fixture, fixtureBytes, l2, maxAbsDiff, postJson, reference, ROOT, startTestServer } from "../helpers";

type TextCase = { text: string; task: string | null; input_ids: number[]; text_embeddings: number[] };
type ImageCase = { file: string; image_embeddings: number[] };

let server: RunningServer;
let url: string;
let ref: { text_cases: TextCase[]; image_cases: ImageCase[]; dimension: number };
let uris: string[];

beforeAll(async () => {
  ref = await reference("jina-clip");
  uris = await Promise.all(
    ref.image_cases.map(async (c) => `data:image/${c.file.endsWith(".png") ? "png" : "jpeg"};base64,${Buffer.from(await fixtureBytes(c.file)).toString("base64")}`),
  );
  server = await startTestServer({ "model-id": [fixture("jina-clip"), fixture("bert-mean-norm")], "batch-size": "4", "max-inputs-per-request": "64" });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

const embed = (body: Record<string, unknown>) => postJson(`${url}/embeddings`, { model: "jina-clip", encoding_format: "float", ...body });
const cut = (v: number[], n: number) => l2(v.slice(0, n));

describe("jina-clip: text tower of the combined export", () => {
  test("every text alone, all in one request (batch size 4: several padded batches) and concurrently", async () => {
    const plain = ref.text_cases.filter((c) => c.task === null);
    expect(plain.some((c) => c.input_ids.length === 64)).toBe(true);
    for (const c of plain) {
      const { status, json } = await embed({ input: c.text });
      expect(status).toBe(200);
      expect(maxAbsDiff(json.data[0].embedding, l2(c.text_embeddings))).toBeLessThanOrEqual(1e-4);
      expect(json.usage.prompt_tokens).toBe(c.input_ids.length);
    }
    const all = await embed({ input: plain.map((c) => c.text) });
    expect(all.status).toBe(200);
    plain.forEach((c, i) => expect(maxAbsDiff(all.json.data[i].embedding, l2(c.text_embeddings))).toBeLessThanOrEqual(1e-4));
    const many = await Promise.all(plain.map((_, r) => embed({ input: [plain[r]!.text, plain[(r + 3) % plain.length]!.text] })));
    many.forEach((res, r) => {
      expect(res.status).toBe(200);
      expect(maxAbsDiff(res.json.data[0].embedding, l2(plain[r]!.text_embeddings))).toBeLessThanOrEqual(1e-4);
      expect(maxAbsDiff(res.json.data[1].embedding, l2(plain[(r + 3) % plain.length]!.text_embeddings))).toBeLessThanOrEqual(1e-4);
    });
  });

  test("input_type query prepends the model's retrieval.query instruction (encode_text(task='retrieval.query')); document adds none", async () => {
    const queries = ref.text_cases.filter((c) => c.task === "retrieval.query");
    expect(queries.length).toBeGreaterThan(0);
    const res = await embed({ input: queries.map((c) => c.text), input_type: "query" });
    expect(res.status).toBe(200);
    queries.forEach((c, i) => expect(maxAbsDiff(res.json.data[i].embedding, l2(c.text_embeddings))).toBeLessThanOrEqual(1e-4));
    expect(res.json.usage.prompt_tokens).toBe(queries.reduce((n, c) => n + c.input_ids.length, 0));
    const named = await embed({ input: queries[0]!.text, prompt_name: "retrieval.query" });
    expect(maxAbsDiff(named.json.data[0].embedding, l2(queries[0]!.text_embeddings))).toBeLessThanOrEqual(1e-4);
    const plain = ref.text_cases.find((c) => c.task === null && c.text === queries[0]!.text)!;
    const doc = await embed({ input: plain.text, input_type: "document" });
    expect(maxAbsDiff(doc.json.data[0].embedding, l2(plain.text_embeddings))).toBeLessThanOrEqual(1e-4);
    expect(maxAbsDiff(doc.json.data[0].embedding, l2(queries[0]!.text_embeddings))).toBeGreaterThan(1e-2);
  });

  test("Matryoshka: dimensions keeps the first n of the raw vector, then normalises (encode_text truncate_dim)", async () => {
    const c = ref.text_cases[1]!;
    for (const n of [8, 16]) {
      const { status, json } = await embed({ input: c.text, dimensions: n });
      expect(status).toBe(200);
      expect(json.data[0].embedding.length).toBe(n);
      expect(maxAbsDiff(json.data[0].embedding, cut(c.text_embeddings, n))).toBeLessThanOrEqual(1e-4);
    }
  });

  test("normalize false returns text_embeddings as the graph gives them (not the l2norm_ output)", async () => {
    const c = ref.text_cases[0]!;
    const { json } = await embed({ input: c.text, normalize: false });
    expect(maxAbsDiff(json.data[0].embedding, c.text_embeddings)).toBeLessThanOrEqual(1e-4);
    expect(Math.abs(Math.hypot(...json.data[0].embedding) - 1)).toBeGreaterThan(1e-2);
  });
});

describe("jina-clip: vision tower of the combined export", () => {
  test("images alone and batched (open_clip's eval transform from preprocessor_config.json's jina keys)", async () => {
    for (const [i, c] of ref.image_cases.entries()) {
      const { status, json } = await embed({ modality: "image", input: uris[i] });
      expect(status).toBe(200);
      expect(maxAbsDiff(json.data[0].embedding, l2(c.image_embeddings))).toBeLessThanOrEqual(1e-4);
    }
    const all = await embed({ modality: "image", input: [...uris, ...uris.slice(0, 2)] });
    expect(all.status).toBe(200);
    [...ref.image_cases, ...ref.image_cases.slice(0, 2)].forEach((c, i) => expect(maxAbsDiff(all.json.data[i].embedding, l2(c.image_embeddings))).toBeLessThanOrEqual(1e-4));
  });

  test("images and texts concurrently, Matryoshka and raw images", async () => {
    const [img, txt, cutImg, raw] = await Promise.all([
      embed({ modality: "image", input: uris.slice(1) }),
      embed({ input: ref.text_cases.slice(0, 3).map((c) => c.text) }),
      embed({ modality: "image", input: uris[0], dimensions: 8 }),
      embed({ modality: "image", input: uris[2], normalize: false }),
    ]);
    ref.image_cases.slice(1).forEach((c, i) => expect(maxAbsDiff(img.json.data[i].embedding, l2(c.image_embeddings))).toBeLessThanOrEqual(1e-4));
    ref.text_cases.slice(0, 3).forEach((c, i) => expect(maxAbsDiff(txt.json.data[i].embedding, l2(c.text_embeddings))).toBeLessThanOrEqual(1e-4));
    expect(maxAbsDiff(cutImg.json.data[0].embedding, cut(ref.image_cases[0]!.image_embeddings, 8))).toBeLessThanOrEqual(1e-4);
    expect(maxAbsDiff(raw.json.data[0].embedding, ref.image_cases[2]!.image_embeddings)).toBeLessThanOrEqual(1e-4);
  });

  test("/models lists it with text and image inputs, the projection size, and one session per tower (the graph split)", async () => {
    const { data } = (await (await fetch(`${url}/models`)).json()) as { data: Array<{ id: string; modalities: string[]; dimensions: number; inference_workers: unknown[] }> };
    const m = data.find((d) => d.id === "jina-clip")!;
    expect(m.modalities).toEqual(["text", "image"]);
    expect(m.dimensions).toBe(ref.dimension);
    expect(m.inference_workers.length).toBe(2);
  });
});

describe("jina-clip with its weights as external data (as the hub's fp32 export)", () => {
  test("each tower's graph reads the weights beside the export: text and images as the references; the split's folder goes at shutdown", async () => {
    const dir = mkdtempSync(join(tmpdir(), "jina-clip-ext-"));
    cpSync(fixture("jina-clip"), dir, { recursive: true });
    rmSync(join(dir, "onnx"), { recursive: true });
    cpSync(join(ROOT, "test", "fixtures", "variants", "jina-clip-external"), join(dir, "onnx"), { recursive: true });
    // a temporary folder of its own, so that other servers' splits do not count
    const temp = mkdtempSync(join(tmpdir(), "jina-clip-tmp-"));
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = temp;
    let ext: RunningServer;
    try {
      ext = await startTestServer({ "model-id": dir, "served-model-name": "ext" });
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
    try {
      expect(readdirSync(temp).filter((f) => f.startsWith("infinity-towers-")).length).toBe(1);
      const post = (body: Record<string, unknown>) => postJson(`${ext.url}/embeddings`, { model: "ext", encoding_format: "float", ...body });
      const txt = await post({ input: ref.text_cases.slice(0, 4).map((c) => c.text) });
      ref.text_cases.slice(0, 4).forEach((c, i) => expect(maxAbsDiff(txt.json.data[i].embedding, l2(c.text_embeddings))).toBeLessThanOrEqual(1e-4));
      const img = await post({ modality: "image", input: uris });
      ref.image_cases.forEach((c, i) => expect(maxAbsDiff(img.json.data[i].embedding, l2(c.image_embeddings))).toBeLessThanOrEqual(1e-4));
    } finally {
      await ext.shutdown();
      rmSync(dir, { recursive: true, force: true });
    }
    expect(readdirSync(temp)).toEqual([]);
    rmSync(temp, { recursive: true, force: true });
  });
});

describe("jina-clip: what cannot be fed is refused at load", () => {
  const variant = (edit: (dir: string) => void) => {
    const dir = mkdtempSync(join(tmpdir(), "jina-clip-"));
    cpSync(fixture("jina-clip"), dir, { recursive: true });
    edit(dir);
    return dir;
  };
  const editJson = (dir: string, file: string, change: (j: Record<string, unknown>) => void) => {
    const j = JSON.parse(readFileSync(join(dir, file), "utf8"));
    change(j);
    writeFileSync(join(dir, file), JSON.stringify(j));
  };

  test("resize_mode longest: an image too thin to keep a pixel across is a 400 naming it; the model keeps serving", async () => {
    const dir = variant((d) => editJson(d, "preprocessor_config.json", (j) => { j.resize_mode = "longest"; }));
    const s = await startTestServer({ "model-id": dir });
    try {
      // size 30: a 1 x 100 image resizes to 0.3 x 30 pixels (open_clip's PIL resize fails there too).
      const thin = await sharp({ create: { width: 1, height: 100, channels: 3, background: { r: 200, g: 10, b: 10 } } }).png().toBuffer();
      const square = await sharp({ create: { width: 40, height: 40, channels: 3, background: { r: 20, g: 100, b: 10 } } }).png().toBuffer();
      const uri = (b: Buffer) => `data:image/png;base64,${b.toString("base64")}`;
      const bad = await postJson(`${s.url}/embeddings`, { model: "m", modality: "image", input: [uri(square), uri(thin)], encoding_format: "float" });
      expect(bad.status).toBe(400);
      expect(bad.json.error.message).toContain("1x100 image is too thin");
      expect(bad.json.error.param).toContain("input[1]");
      const ok = await postJson(`${s.url}/embeddings`, { model: "m", modality: "image", input: [uri(square)], encoding_format: "float" });
      expect(ok.status).toBe(200);
      expect(ok.json.data[0].embedding.length).toBe(ref.dimension);
    } finally {
      await s.shutdown();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const [what, change, message] of [
    ["an unknown resize_mode", (j: Record<string, unknown>) => { j.resize_mode = "crop"; }, /resize_mode must be one of shortest, longest, squash, got "crop"/],
    ["a non-square size", (j: Record<string, unknown>) => { j.size = [30, 40]; }, /size must be one positive integer/],
    ["an interpolation open_clip does not take", (j: Record<string, unknown>) => { j.interpolation = "lanczos"; }, /interpolation must be bicubic, bilinear or random/],
  ] as const) {
    test(`preprocessor_config.json with ${what}`, async () => {
      const dir = variant((d) => editJson(d, "preprocessor_config.json", change));
      try {
        const err = await startTestServer({ "model-id": dir }).then(async (s) => { await s.shutdown(); return null; }, (e: Error) => e);
        expect(err).not.toBeNull();
        expect(String(err!.message)).toMatch(message);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
