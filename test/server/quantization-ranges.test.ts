// --quantization-ranges on a live server: int8/uint8 on /v2/embed, /v1/embed and /embeddings follow
// sentence-transformers' quantize_embeddings with the model's calibration ranges (test/fixtures/reference/
// quantize-calibration.json), per model (a second model without ranges keeps the per-vector scale); Matryoshka cuts
// refused with ranges; files that do not fit the model refused at load.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildConfig } from "../../src/config";
import { startServer, type RunningServer } from "../../src/server/serve";
import { readQuantizationRanges } from "../../src/model/quantization-ranges";
import { toInt8, toInt8Calibrated, toUint8Calibrated } from "../../src/tasks/quantize";
import { fixture, maxAbsDiff, offlineHub, postJson, reference, REFERENCE, startTestServer } from "../helpers";

const RANGES = join(REFERENCE, "calibration", "bert-mean-norm.ranges.json");
let server: RunningServer;
let url: string;
let ref: { texts: string[]; float: number[][]; int8_f32: number[][]; uint8_f32: number[][] };

beforeAll(async () => {
  ref = await reference("quantize-calibration");
  server = await startTestServer({
    "model-id": [fixture("bert-mean-norm"), fixture("bert-mean-norm")],
    "served-model-name": ["calibrated", "plain"],
    "quantization-ranges": [RANGES, ""],
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

describe("calibrated int8/uint8 through the API", () => {
  test("/v2/embed and /v1/embed: within one bucket of quantize_embeddings on the reference floats, exactly the formula on the served floats", async () => {
    const ranges = readQuantizationRanges(RANGES);
    const texts = ref.texts;
    for (const path of ["/v2/embed", "/v1/embed"]) {
      const r = await postJson(`${url}${path}`, { model: "calibrated", texts, embedding_types: ["float", "int8", "uint8"] });
      expect(r.status).toBe(200);
      const e = r.json.embeddings;
      let exact = 0;
      texts.forEach((_, i) => {
        expect(maxAbsDiff(e.float[i], ref.float[i]!)).toBeLessThanOrEqual(1e-4);
        expect(maxAbsDiff(e.int8[i], ref.int8_f32[i]!)).toBeLessThanOrEqual(1);
        expect(maxAbsDiff(e.uint8[i], ref.uint8_f32[i]!)).toBeLessThanOrEqual(1);
        if (maxAbsDiff(e.int8[i], ref.int8_f32[i]!) === 0) exact++;
        expect(e.int8[i]).toEqual(Array.from(toInt8Calibrated(Float32Array.from(e.float[i]), ranges)));
        expect(e.uint8[i]).toEqual(Array.from(toUint8Calibrated(Float32Array.from(e.float[i]), ranges)));
      });
      // Served floats are within 1e-4 of torch's; a bucket (step ~ range / 255) is rarely crossed.
      expect(exact).toBeGreaterThanOrEqual(texts.length - 2);
    }
  });

  test("/embeddings encoding_format int8 / base64_uint8 use the ranges; the model without ranges keeps the per-vector scale", async () => {
    const r = await postJson(`${url}/embeddings`, { model: "calibrated", input: ref.texts.slice(0, 3), encoding_format: "int8" });
    expect(r.status).toBe(200);
    r.json.data.forEach((d: { embedding: number[] }, i: number) => expect(maxAbsDiff(d.embedding, ref.int8_f32[i]!)).toBeLessThanOrEqual(1));
    const b = await postJson(`${url}/embeddings`, { model: "calibrated", input: ref.texts[0], encoding_format: "base64_uint8" });
    expect(maxAbsDiff(Array.from(Buffer.from(b.json.data[0].embedding, "base64")), ref.uint8_f32[0]!)).toBeLessThanOrEqual(1);
    const plain = await postJson(`${url}/embeddings`, { model: "plain", input: ref.texts.slice(0, 3), encoding_format: "int8" });
    plain.json.data.forEach((d: { embedding: number[] }, i: number) => {
      expect(maxAbsDiff(d.embedding, Array.from(toInt8(Float32Array.from(ref.float[i]!))))).toBeLessThanOrEqual(1);
      expect(maxAbsDiff(d.embedding, ref.int8_f32[i]!)).toBeGreaterThan(1);
    });
  });

  test("a Matryoshka cut with ranges is a 400; floats and binary still cut", async () => {
    const cut = await postJson(`${url}/embeddings`, { model: "calibrated", input: "x", encoding_format: "int8", dimensions: 8 });
    expect(cut.status).toBe(400);
    expect(cut.json.error.param).toBe("dimensions");
    expect(cut.json.error.message).toContain("calibration ranges of its full 32 dimensions");
    const v2 = await postJson(`${url}/v2/embed`, { model: "calibrated", texts: ["x"], embedding_types: ["uint8"], output_dimension: 16 });
    expect(v2.status).toBe(400);
    expect(v2.json.error.param).toBe("output_dimension");
    expect((await postJson(`${url}/embeddings`, { model: "calibrated", input: "x", encoding_format: "ubinary", dimensions: 8 })).status).toBe(200);
    expect((await postJson(`${url}/embeddings`, { model: "calibrated", input: "x", encoding_format: "int8", dimensions: 32 })).status).toBe(200);
  });
});

describe("ranges checked at load", () => {
  const loadFails = async (model: string, ranges: string, message: string) => {
    const config = buildConfig({
      flags: new Map([["model-id", [model]], ["quantization-ranges", [ranges]], ["host", ["127.0.0.1"]], ["port", ["0"]], ["tokenizer-workers", ["1"]], ["num-threads", ["1"]]]),
      env: {},
      file: null,
      cpuCount: 2,
    });
    const s = startServer(config, offlineHub);
    try {
      await expect(s.loaded).rejects.toThrow(message);
    } finally {
      await s.shutdown();
    }
  };

  test("a file of another dimension: the load fails naming both sizes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ranges-"));
    const wrong = join(dir, "ranges-16.json");
    writeFileSync(wrong, JSON.stringify({ min: Array(16).fill(-1), max: Array(16).fill(1) }));
    try {
      await loadFails(fixture("bert-mean-norm"), wrong, "16 dimensions, but the model's vectors have 32");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a missing file, and ranges on a reranker", async () => {
    await loadFails(fixture("bert-mean-norm"), "/nonexistent/ranges.json", "--quantization-ranges /nonexistent/ranges.json: cannot read it (ENOENT)");
    await loadFails(fixture("bert-rerank"), RANGES, "--quantization-ranges applies to dense embedding models; this is a rerank model");
  });
});
