// The load-time rewrite of dynamically quantized graphs (model/rowwise-quant.ts): each DynamicQuantizeLinear ->
// MatMulInteger gets its scale and zero point per batch row, over the row's real tokens. Checked with onnxruntime
// alone: every row of a padded batch of mixed lengths run through the rewritten graph equals the ORIGINAL graph run on
// that row alone (no padding), with the server's session options and with graph optimizations off (onnxruntime fuses
// DynamicQuantizeLinear + MatMulInteger into DynamicQuantizeMatMul when on), on the int8 fixtures (BERT right-padded,
// Qwen3 reranker left-padded), the tiny int8-layouts graphs ([B*T, H] and [B, T, H] inputs, per-column and uint8
// weights) and the benchmark's int8 model (external data). Graphs it does not handle are kept, with the reason.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import * as ort from "onnxruntime-node";
import { DEFAULT_SEED, SKELETONS, readManifest, skeletonPresent, writeData } from "../../bench/model";
import type { GraphNode, GraphSummary } from "../../src/model/logits-graph";
import { sessionOptions } from "../../src/model/onnx";
import { planRowwise, rowwiseQuantGraph, weightColumnSums } from "../../src/model/rowwise-quant";
import { ROOT, fixture } from "../helpers";

type Level = "all" | "disabled";

async function open(path: string, level: Level, externalDataDir?: string): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(path, { ...sessionOptions("cpu", { device: "cpu", numThreads: 1, externalDataDir }), graphOptimizationLevel: level });
}

/** Random rows of the given lengths, padded on `side` with the feeds the server builds (positions, empty past). */
function feeds(s: ort.InferenceSession, lengths: readonly number[], vocab: number, side: "left" | "right", seed: number): Record<string, ort.Tensor> {
  const batch = lengths.length;
  const seq = Math.max(...lengths);
  const ids = new BigInt64Array(batch * seq);
  const mask = new BigInt64Array(batch * seq);
  const positions = new BigInt64Array(batch * seq).fill(1n);
  let x = seed;
  lengths.forEach((n, b) => {
    for (let t = 0; t < n; t++) {
      x = (x * 1103515245 + 12345) % 2147483648;
      const i = b * seq + (side === "left" ? seq - n : 0) + t;
      ids[i] = BigInt(x % vocab);
      mask[i] = 1n;
      positions[i] = BigInt(t);
    }
  });
  const out: Record<string, ort.Tensor> = {};
  s.inputNames.forEach((name, k) => {
    const meta = s.inputMetadata[k]!;
    if (name === "input_ids") out[name] = new ort.Tensor("int64", ids, [batch, seq]);
    else if (name === "attention_mask") out[name] = new ort.Tensor("int64", mask, [batch, seq]);
    else if (name === "position_ids") out[name] = new ort.Tensor("int64", positions, [batch, seq]);
    else if (name === "token_type_ids") out[name] = new ort.Tensor("int64", new BigInt64Array(batch * seq), [batch, seq]);
    else if (name.startsWith("past_key_values.") && meta.isTensor) {
      out[name] = new ort.Tensor("float32", new Float32Array(0), meta.shape.map((d, i) => (i === 0 ? batch : typeof d === "number" ? d : 0)));
    } else throw new Error(`no feed for ${name}`);
  });
  return out;
}

/** Row b's real positions of the first output ([batch, seq, ...]), as a flat array. */
function row(out: ort.Tensor, b: number, n: number, side: "left" | "right"): Float32Array {
  const [batch, seq] = out.dims as [number, number];
  const width = out.data.length / (batch * seq);
  const start = b * seq + (side === "left" ? seq - n : 0);
  return (out.data as Float32Array).slice(start * width, (start + n) * width);
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i]! - b[i]!));
  return d;
}

interface Case {
  label: string;
  path: () => string;
  vocab: number;
  side: "left" | "right";
  quantizers: number;
}

const variant = (name: string) => join(ROOT, "test", "fixtures", "variants", `int8-layouts-${name}.onnx`);
let benchDir = "";
const CASES: Case[] = [
  { label: "bert-mean-norm model_quantized.onnx (right padding)", path: () => join(fixture("bert-mean-norm"), "onnx", "model_quantized.onnx"), vocab: 100, side: "right", quantizers: 8 },
  { label: "qwen3-rerank model_quantized.onnx (left padding, empty past)", path: () => join(fixture("qwen3-rerank"), "onnx", "model_quantized.onnx"), vocab: 1400, side: "left", quantizers: 9 },
  { label: "int8-layouts: [B*T, H] and [B, T, H] inputs, QInt8 per tensor", path: () => variant("s8"), vocab: 50, side: "right", quantizers: 2 },
  { label: "int8-layouts: QInt8 per column (1-D weight scales and zero points)", path: () => variant("s8-per-channel"), vocab: 50, side: "right", quantizers: 2 },
  { label: "int8-layouts: QUInt8 weights (non-zero weight zero points)", path: () => variant("u8"), vocab: 50, side: "right", quantizers: 2 },
];
const BENCH: Case = { label: "benchmark int8 model (bge-small shape, external data)", path: () => join(benchDir, "model.onnx"), vocab: 30000, side: "right", quantizers: 48 };

beforeAll(() => {
  if (!skeletonPresent("int8")) return;
  benchDir = mkdtempSync(join(tmpdir(), "rowwise-bench-"));
  copyFileSync(join(SKELETONS.int8, "model.onnx"), join(benchDir, "model.onnx"));
  writeData(readManifest(SKELETONS.int8), DEFAULT_SEED, join(benchDir, "model.onnx_data"));
});
afterAll(() => {
  if (benchDir) rmSync(benchDir, { recursive: true, force: true });
});

const BATCHES = [[9, 3, 17, 1], [2, 31, 31, 5, 12], [1]];

describe("each row of a padded batch equals the original graph on that row alone", () => {
  for (const c of [...CASES, BENCH]) {
    for (const level of ["all", "disabled"] as const) {
      test.skipIf(c === BENCH && !skeletonPresent("int8"))(`${c.label}, graph optimizations ${level}`, async () => {
        const rewritten = rowwiseQuantGraph(c.path());
        if (!rewritten || !("path" in rewritten)) throw new Error(`not rewritten: ${JSON.stringify(rewritten)}`);
        expect(rewritten.quantizers).toBe(c.quantizers);
        expect(rewritten.externalDataDir).toBe(dirname(c.path()));
        try {
          const original = await open(c.path(), level);
          const perRow = await open(rewritten.path, level, rewritten.externalDataDir);
          let worst = 0;
          let moved = 0;
          for (const [k, lengths] of BATCHES.entries()) {
            const f = feeds(perRow, lengths, c.vocab, c.side, k + 1);
            const batched = (await perRow.run(f))[perRow.outputNames[0]!]!;
            const originalBatched = (await original.run(f))[original.outputNames[0]!]!;
            for (const [b, n] of lengths.entries()) {
              // the same row alone: its own tokens, no padding
              const one = feeds(original, [n], c.vocab, c.side, k + 1);
              const ids = f.input_ids!.data as BigInt64Array;
              const seq = Math.max(...lengths);
              (one.input_ids!.data as BigInt64Array).set(ids.subarray(b * seq + (c.side === "left" ? seq - n : 0), b * seq + (c.side === "left" ? seq : n)));
              const alone = (await original.run(one))[original.outputNames[0]!]!;
              const reference = row(alone, 0, n, c.side);
              worst = Math.max(worst, maxDiff(row(batched, b, n, c.side), reference));
              moved = Math.max(moved, maxDiff(row(originalBatched, b, n, c.side), reference));
            }
          }
          // measured bit-exact (0) here; the bound is the one asked of the rewrite
          expect(worst).toBeLessThanOrEqual(1e-5);
          // the original graph's one scale over the batch moves the same rows well past that
          expect(moved).toBeGreaterThan(1e-3);
          await original.release();
          await perRow.release();
        } finally {
          rewritten.remove();
        }
        expect(existsSync(dirname(rewritten.path))).toBe(false);
      });
    }
  }
});

describe("what is rewritten and what is kept", () => {
  test("graphs without DynamicQuantizeLinear are not rewritten (null): float32 and float16 files", () => {
    expect(rowwiseQuantGraph(join(fixture("bert-mean-norm"), "onnx", "model.onnx"))).toBeNull();
    expect(rowwiseQuantGraph(join(fixture("bert-mean-norm"), "onnx", "model_fp16.onnx"))).toBeNull();
    expect((rowwiseQuantGraph(join(fixture("bert-mean-norm"), "onnx", "absent.onnx")) as { reason: string }).reason).toContain("cannot open");
  });

  test("only model types whose quantized MatMuls act on token-major activations are rewritten (DeBERTa's relative embeddings are not)", () => {
    const file = join(fixture("bert-mean-norm"), "onnx", "model_quantized.onnx");
    const kept = rowwiseQuantGraph(file, undefined, "deberta-v2") as { reason: string };
    expect(kept.reason).toContain('model_type "deberta-v2" is not one');
    const made = rowwiseQuantGraph(file, undefined, "bert");
    expect(made !== null && "path" in made).toBe(true);
    if (made && "path" in made) made.remove();
  });

  const node = (opType: string, inputs: string[], outputs: string[], name = outputs[0]!): GraphNode => ({ index: 0, opType, domain: "", name, inputs, outputs, start: 0, end: 0 });
  const dql = node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], "dql");
  const mm = node("MatMulInteger", ["xq", "W", "xz", "Wz"], ["p"], "mm");
  const cast = node("Cast", ["p"], ["pf"]);
  const scales = node("Mul", ["xs", "Ws"], ["s"]);
  const out = node("Mul", ["pf", "s"], ["y"]);
  const graph = (nodes: GraphNode[], over: Partial<GraphSummary> = {}): GraphSummary => ({
    opset: 17,
    nodes,
    initializers: new Set(["W", "Wz", "Ws", "W2"]),
    inputs: ["input_ids", "attention_mask"],
    outputs: ["y"],
    outputRecords: new Map(),
    graph: { tagStart: 0, from: 0, to: 0 },
    size: 0,
    ...over,
  });

  test("planRowwise: the quantize_dynamic pattern is planned; anything else is kept with the reason", () => {
    const plan = planRowwise(graph([dql, mm, cast, scales, out]));
    expect(Array.isArray(plan) && plan.map((p) => [p.dql.name, p.matmuls.map((m) => m.name)])).toEqual([["dql", ["mm"]]]);
    expect(planRowwise(graph([cast]))).toEqual([]);
    expect(planRowwise(graph([dql, mm, cast, scales, out], { inputs: ["input_ids"] }))).toBe("the graph has no attention_mask input to tell the real tokens of each row");
    expect(planRowwise(graph([dql, mm, cast, scales, out], { opset: 12 }))).toContain("opset 12");
    expect(planRowwise(graph([dql, node("MatMulInteger", ["xq", "act", "xz"], ["p"], "mm"), cast, scales, out]))).toBe('MatMulInteger "mm" does not multiply by a constant weight');
    expect(planRowwise(graph([dql, mm, node("DequantizeLinear", ["xq", "xs", "xz"], ["d"]), cast, scales, out]))).toContain("feeds a DequantizeLinear, not a MatMulInteger");
    expect(planRowwise(graph([dql, mm, node("Add", ["xz", "xz"], ["z2"]), cast, scales, out]))).toContain("the zero point of DynamicQuantizeLinear \"dql\" feeds a Add");
    expect(planRowwise(graph([dql, mm, cast, node("Div", ["xs", "Ws"], ["s"]), out]))).toContain("feeds a Div other than a product with a constant weight scale");
    expect(planRowwise(graph([dql, mm, cast, scales, node("Reshape", ["s", "shape"], ["y"])]))).toContain("the scale product of DynamicQuantizeLinear \"dql\" feeds a Reshape, not a Mul");
    expect(planRowwise(graph([dql, mm, cast, scales, out], { outputs: ["y", "xs"] }))).toContain("feeds a graph output");
  });

  test("weight column sums: sum over k of W[k, n] - zero point (int8, uint8, per column)", () => {
    const sums = (w: Parameters<typeof weightColumnSums>[0], zp: Parameters<typeof weightColumnSums>[1]) => Array.from(new Int32Array(weightColumnSums(w, zp).buffer));
    // int8 [[-1, 2], [-128, 127]]
    const s8 = { dims: [2, 2], dataType: 3, data: Uint8Array.of(255, 2, 128, 127) };
    expect(sums(s8, null)).toEqual([-129, 129]);
    expect(sums(s8, { dims: [], dataType: 3, data: Uint8Array.of(255) })).toEqual([-127, 131]);
    expect(sums(s8, { dims: [2], dataType: 3, data: Uint8Array.of(1, 2) })).toEqual([-131, 125]);
    const u8 = { dims: [2, 2], dataType: 2, data: Uint8Array.of(255, 2, 128, 127) };
    expect(sums(u8, { dims: [], dataType: 2, data: Uint8Array.of(128) })).toEqual([127, -127]);
    expect(() => weightColumnSums({ dims: [8], dataType: 3, data: new Uint8Array(8) }, null)).toThrow("1-D weight");
  });
});
