// int8/uint8 with a model's calibration ranges: bit-exact against sentence-transformers' quantize_embeddings run in
// the fixture generator (test/fixtures/reference/quantize-calibration.json) on the same float32 embeddings, with the
// ranges read from each file format the option takes; the ranges file checks.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readQuantizationRanges } from "../../src/model/quantization-ranges";
import { quantize, toInt8Calibrated, toUint8Calibrated } from "../../src/tasks/quantize";
import { REFERENCE, reference } from "../helpers";

const CAL = join(REFERENCE, "calibration");

describe("calibrated int8/uint8 = quantize_embeddings(..., ranges=...)", () => {
  for (const [file, tag] of [["bert-mean-norm.ranges.json", "f32"], ["bert-mean-norm.ranges.npy", "f32"], ["bert-mean-norm.ranges-f64.npy", "f64"]] as const) {
    test(`${file}: every reference vector, bit-exact (clipped values included)`, async () => {
      const ref = await reference("quantize-calibration");
      const ranges = readQuantizationRanges(join(CAL, file));
      expect(ranges.float32).toBe(tag === "f32");
      expect(ranges.min.length).toBe(ref.float[0].length);
      ref.float.forEach((f: number[], i: number) => {
        const v = Float32Array.from(f);
        expect(Array.from(toInt8Calibrated(v, ranges)), `int8 case ${i}`).toEqual(ref[`int8_${tag}`][i]);
        expect(Array.from(toUint8Calibrated(v, ranges)), `uint8 case ${i}`).toEqual(ref[`uint8_${tag}`][i]);
        expect(Array.from(quantize(v, "int8", ranges))).toEqual(ref[`int8_${tag}`][i]);
      });
      expect(ref.values_outside_ranges).toBeGreaterThan(0);
    });
  }

  test("bucket edges: float32 ranges compute in float32, float64 ranges in float64, as numpy", async () => {
    const { edge } = await reference("quantize-calibration");
    const x = Float32Array.from(edge.x);
    // The bounds are float32 values written as their shortest decimals (the float64 ranges are the same values).
    const min = Float64Array.from(edge.min, Math.fround);
    const max = Float64Array.from(edge.max, Math.fround);
    expect(Array.from(toUint8Calibrated(x, { min, max, float32: true }))).toEqual(edge.uint8_f32);
    expect(Array.from(toUint8Calibrated(x, { min, max, float32: false }))).toEqual(edge.uint8_f64);
    expect(edge.uint8_f32).not.toEqual(edge.uint8_f64);
  });

  test("JSON and float32 .npy ranges are the same numbers", async () => {
    const a = readQuantizationRanges(join(CAL, "bert-mean-norm.ranges.json"));
    const b = readQuantizationRanges(join(CAL, "bert-mean-norm.ranges.npy"));
    expect(Array.from(a.min)).toEqual(Array.from(b.min));
    expect(Array.from(a.max)).toEqual(Array.from(b.max));
  });

  test("a dimension whose min equals its max gets step 1, as sentence-transformers", () => {
    const r = { min: Float64Array.from([0.5, -1]), max: Float64Array.from([0.5, 1]), float32: true };
    expect(Array.from(toUint8Calibrated(Float32Array.from([2.7, 0]), r))).toEqual([2, 127]);
  });
});

describe("ranges file checks", () => {
  const dir = mkdtempSync(join(tmpdir(), "ranges-"));
  const write = (name: string, data: string | Uint8Array) => {
    const p = join(dir, name);
    writeFileSync(p, data);
    return p;
  };
  const npy = (descr: string, shape: string, values: number[], size = 4) => {
    let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
    while ((10 + header.length + 1) % 64) header += " ";
    header += "\n";
    const data = new Uint8Array(values.length * size);
    const view = new DataView(data.buffer);
    values.forEach((v, i) => (size === 4 ? view.setFloat32(i * 4, v, true) : view.setFloat64(i * 8, v, true)));
    const head = new Uint8Array(10);
    head.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]);
    new DataView(head.buffer).setUint16(8, header.length, true);
    return Buffer.concat([head, Buffer.from(header, "latin1"), data]);
  };

  test("well-formed files in both formats", () => {
    const j = readQuantizationRanges(write("ok.json", JSON.stringify({ min: [-1, 0], max: [1, 0.5] })));
    expect([Array.from(j.min), Array.from(j.max)]).toEqual([[-1, 0], [1, 0.5]]);
    const n = readQuantizationRanges(write("ok.npy", npy("<f8", "(2, 2)", [-1, 0, 1, 0.25], 8)));
    expect([Array.from(n.min), Array.from(n.max), n.float32]).toEqual([[-1, 0], [1, 0.25], false]);
  });

  const bad: Array<[string, string | Uint8Array, string]> = [
    ["missing.json", "", "cannot read it"],
    ["syntax.json", "{min:", "not valid JSON"],
    ["nomax.json", JSON.stringify({ min: [1] }), '"max" must be a non-empty list of numbers'],
    ["lengths.json", JSON.stringify({ min: [0, 0], max: [1] }), '"min" has 2 values and "max" 1'],
    ["order.json", JSON.stringify({ min: [0, 2], max: [1, 1] }), "dimension 1 has max 1 below min 2"],
    ["strings.json", JSON.stringify({ min: ["0"], max: [1] }), '"min" must be a non-empty list of numbers'],
    ["magic.npy", "not numpy at all", "not a .npy file"],
    ["int.npy", npy("<i4", "(2, 2)", [0, 0, 1, 1]), "dtype <i4 is not supported"],
    ["shape.npy", npy("<f4", "(3, 2)", [0, 0, 1, 1, 2, 2]), "shape (3, 2) is not (2, dim)"],
    ["short.npy", npy("<f4", "(2, 3)", [0, 0, 1, 1]), "expected 24 data bytes, found 16"],
    ["nan.npy", npy("<f4", "(2, 1)", [NaN, 1]), "dimension 0 has a non-finite bound"],
  ];
  for (const [name, data, message] of bad) {
    test(`${name}: ${message}`, () => {
      const path = name === "missing.json" ? join(dir, "missing.json") : write(name, data);
      expect(() => readQuantizationRanges(path)).toThrow(message);
      expect(() => readQuantizationRanges(path)).toThrow(`--quantization-ranges ${path}`);
    });
  }

  test("cleanup", () => rmSync(dir, { recursive: true, force: true }));
});
