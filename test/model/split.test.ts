// A combined multimodal export (jina-clip: one graph, both towers) cut into one graph per tower: each pruned graph
// keeps only its tower's input, output, nodes and weights, and gives the torch references of
// test/fixtures/generate/jina_clip.py; weights stored as external data are read from the export's folder.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ModelSession } from "../../src/model/session";
import { pruneOnnxGraph, splitCombinedExport } from "../../src/model/split";
import { fixture, maxAbsDiff, reference, ROOT } from "../helpers";

type Ref = { text_cases: Array<{ input_ids: number[]; text_embeddings: number[] }>; image_cases: Array<{ pixel_values: string; image_embeddings: number[] }> };
const COMBINED = join(fixture("jina-clip"), "onnx", "model.onnx");
const EXTERNAL = join(ROOT, "test", "fixtures", "variants", "jina-clip-external", "model.onnx");
const scratch = mkdtempSync(join(tmpdir(), "split-test-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const pixels = (b64: string) => {
  const b = Buffer.from(b64, "base64");
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
};

/** Both towers of a pair of graphs against the references: texts padded with the pad id (1), all images at once. */
async function checkTowers(textPath: string, imagePath: string, ref: Ref, externalDataDir?: string) {
  const text = await ModelSession.create(textPath, { device: "cpu", numThreads: 1, externalDataDir });
  const image = await ModelSession.create(imagePath, { device: "cpu", numThreads: 1, externalDataDir });
  try {
    expect([text.inputNames, text.outputNames]).toEqual([["input_ids"], ["text_embeddings"]]);
    expect([image.inputNames, image.outputNames]).toEqual([["pixel_values"], ["image_embeddings"]]);
    const width = Math.max(...ref.text_cases.map((c) => c.input_ids.length));
    const ids = new Int32Array(ref.text_cases.length * width).fill(1);
    ref.text_cases.forEach((c, i) => ids.set(c.input_ids, i * width));
    const t = await text.runFeeds({ input_ids: { data: ids, dims: [ref.text_cases.length, width] } }, "text_embeddings");
    ref.text_cases.forEach((c, i) => expect(maxAbsDiff(t.data.subarray(i * 24, i * 24 + 24), c.text_embeddings)).toBeLessThan(1e-5));
    const pv = new Float32Array(ref.image_cases.length * 2700);
    ref.image_cases.forEach((c, i) => pv.set(pixels(c.pixel_values), i * 2700));
    const v = await image.runFeeds({ pixel_values: { data: pv, dims: [ref.image_cases.length, 3, 30, 30] } }, "image_embeddings");
    ref.image_cases.forEach((c, i) => expect(maxAbsDiff(v.data.subarray(i * 24, i * 24 + 24), c.image_embeddings)).toBeLessThan(1e-5));
  } finally {
    await text.release();
    await image.release();
  }
}

describe("pruneOnnxGraph", () => {
  test("each tower of jina-clip's combined graph alone: its input, its output, the torch references", async () => {
    const ref: Ref = await reference("jina-clip");
    const textPath = join(scratch, "text.onnx");
    const imagePath = join(scratch, "image.onnx");
    expect(pruneOnnxGraph(COMBINED, ["text_embeddings"], textPath)).toEqual(["input_ids"]);
    expect(pruneOnnxGraph(COMBINED, ["image_embeddings"], imagePath)).toEqual(["pixel_values"]);
    // the weights are shared out, not copied twice: the two files hold what the combined one did, give or take records
    const sizes = [textPath, imagePath, COMBINED].map((p) => statSync(p).size);
    expect(Math.abs(sizes[0]! + sizes[1]! - sizes[2]!)).toBeLessThan(4096);
    await checkTowers(textPath, imagePath, ref);
  });

  test("an output the graph does not make is an error, not an empty graph", () => {
    expect(() => pruneOnnxGraph(COMBINED, ["sentence_embedding"], join(scratch, "none.onnx"))).toThrow(/no node or input makes the output sentence_embedding/);
  });
});

describe("splitCombinedExport", () => {
  test("weights as external data (as the hub's fp32 jina-clip-v2): read from the export's folder; the folder goes with remove()", async () => {
    const ref: Ref = await reference("jina-clip");
    const split = splitCombinedExport(EXTERNAL, "text_embeddings", "image_embeddings");
    try {
      expect(dirname(split.text)).toBe(dirname(split.media));
      expect(dirname(dirname(split.text))).toBe(tmpdir());
      expect(split.externalDataDir).toBe(dirname(EXTERNAL));
      expect(statSync(split.text).size + statSync(split.media).size).toBeLessThan(statSync(EXTERNAL).size + 4096);
      await checkTowers(split.text, split.media, ref, split.externalDataDir);
    } finally {
      split.remove();
    }
    expect(existsSync(dirname(split.text))).toBe(false);
  });

  test("a graph that cannot be split leaves no folder behind", () => {
    const before = new Set(readdirSync(tmpdir()));
    expect(() => splitCombinedExport(COMBINED, "text_embeddings", "audio_embeds")).toThrow(/audio_embeds/);
    expect(readdirSync(tmpdir()).filter((f) => f.startsWith("infinity-towers-") && !before.has(f))).toEqual([]);
  });
});
