// The Dense modules as an ONNX graph (the head a PyLate ColBERT export's token vectors go through in the worker):
// run by onnxruntime on [batch, tokens, in] it gives what the per-vector JavaScript Dense (applyDense, the pooled
// embedders' path) gives each token vector, for every kind of layer sentence-transformers writes.
import { describe, expect, test } from "bun:test";
import { denseGraph } from "../../src/model/dense-graph";
import type { DenseLayer } from "../../src/model/dense";
import { createOrtSession, runOnce } from "../../src/model/onnx";
import { applyDense } from "../../src/tasks/embed";

let seed = 3;
const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5) * 2;
const layer = (inF: number, outF: number, activation: DenseLayer["activation"], bias: boolean, residual: "identity" | "matrix" | null): DenseLayer => ({
  inFeatures: inF, outFeatures: outF, activation,
  weight: Float32Array.from({ length: inF * outF }, rand),
  bias: bias ? Float32Array.from({ length: outF }, rand) : null,
  residual: residual === "matrix" ? Float32Array.from({ length: inF * outF }, rand) : residual,
});

async function project(layers: DenseLayer[], x: Float32Array, dims: number[]) {
  const session = await createOrtSession(denseGraph(layers), { device: "cpu", numThreads: 1 });
  try {
    expect(session.inputs.map((i) => i.name)).toEqual(["x"]);
    return (await runOnce(session, { x: { data: x, dims } }, ["y"]))[0]!;
  } finally {
    await session.session.release();
  }
}

describe("denseGraph", () => {
  test("bias, tanh / relu / sigmoid / identity, identity and projected residuals, chained: each token vector as applyDense", async () => {
    const layers = [layer(6, 7, "tanh", true, null), layer(7, 7, "relu", false, "identity"), layer(7, 5, "sigmoid", true, "matrix"), layer(5, 5, "identity", false, null)];
    const x = Float32Array.from({ length: 2 * 3 * 6 }, rand);
    const y = await project(layers, x, [2, 3, 6]);
    expect(y.dims).toEqual([2, 3, 5]);
    for (let r = 0; r < 6; r++) {
      const want = applyDense(x.slice(r * 6, (r + 1) * 6), layers);
      for (let j = 0; j < 5; j++) expect(Math.abs(y.data[r * 5 + j]! - want[j]!)).toBeLessThan(1e-5);
    }
  });

  test("PyLate's bias-free identity projection at ColBERT's size (384 -> 128) on a 2 x 5-token batch", async () => {
    // nn.Linear's initial scale (uniform within 1/sqrt(in)), token states of a transformer's range.
    const dense = [{ ...layer(384, 128, "identity", false, null), weight: Float32Array.from({ length: 384 * 128 }, () => rand() / Math.sqrt(384)) }];
    const x = Float32Array.from({ length: 2 * 5 * 384 }, () => rand() * 3);
    const y = await project(dense, x, [2, 5, 384]);
    expect(y.dims).toEqual([2, 5, 128]);
    let worst = 0;
    for (let r = 0; r < 10; r++) {
      const want = applyDense(x.slice(r * 384, (r + 1) * 384), dense);
      for (let j = 0; j < 128; j++) worst = Math.max(worst, Math.abs(y.data[r * 128 + j]! - want[j]!));
    }
    expect(worst).toBeLessThan(1e-5);
  });

  test("no layers is an error, not an empty graph", () => {
    expect(() => denseGraph([])).toThrow("at least one Dense layer");
  });
});
