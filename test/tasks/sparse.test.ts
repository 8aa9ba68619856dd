import { describe, expect, test } from "bun:test";
import { nonZeros, pruneSparse, sparseDot, spladeRow, spladeReader, checkPruning } from "../../src/tasks/sparse";
import { InvalidInput } from "../../src/errors";

// One row of 3 tokens over a 4-word vocabulary; the third token is padding (length 2).
const logits = Float32Array.from([
  1, -2, 0, 3,
  2, 0.5, -1, 1,
  9, 9, 9, 9,
]);
const dims = [1, 3, 4];

describe("SPLADE pooling", () => {
  test("max of log(1 + relu(x)) over real tokens only", () => {
    const v = spladeRow(logits, dims, 0, 2, { poolingStrategy: "max", activation: "relu", source: "", query: null, defaultKind: "document" });
    expect(Array.from(v.indices)).toEqual([0, 1, 3]);
    expect(Array.from(v.values)).toEqual([Math.log1p(2), Math.log1p(0.5), Math.log1p(3)].map(Math.fround));
  });

  test("sum pooling and the log1p_relu activation of the SpladePooling config", () => {
    const v = spladeRow(logits, dims, 0, 2, { poolingStrategy: "sum", activation: "log1p_relu", source: "", query: null, defaultKind: "document" });
    const f = (x: number) => Math.log1p(Math.log1p(x));
    expect(Array.from(v.indices)).toEqual([0, 1, 3]);
    expect(Array.from(v.values)).toEqual([f(1) + f(2), f(0.5), f(3) + f(1)].map(Math.fround));
  });

  test("the reader wants 3-d MLM logits", () => {
    const r = spladeReader({ poolingStrategy: "max", activation: "relu", source: "", query: null, defaultKind: "document" });
    expect(r.outputName(["logits"])).toBe("logits");
    expect(() => r.outputName(["last_hidden_state"])).toThrow(/MLM logits/);
    expect(() => r.read({ name: "logits", data: new Float32Array(4), dims: [1, 4] }, [1])).toThrow(/\[batch, tokens, vocab\]/);
  });
});

describe("pruning and scoring", () => {
  const v = nonZeros(Float32Array.from([0, 0.5, 0, 2, 1, 0.25, 2]));
  test("threshold drops weights at or under it; top_k keeps the largest, indices stay ascending", () => {
    expect(Array.from(pruneSparse(v, { threshold: 0.5 }).indices)).toEqual([3, 4, 6]);
    const top = pruneSparse(v, { topK: 2 });
    expect(Array.from(top.indices)).toEqual([3, 6]);
    expect(Array.from(top.values)).toEqual([2, 2]);
    expect(Array.from(pruneSparse(v, { topK: 2, threshold: 1.5 }).indices)).toEqual([3, 6]);
    expect(Array.from(pruneSparse(v, { topK: 1, threshold: 0.3 }).indices)).toEqual([3]);
    expect(pruneSparse(v, {})).toBe(v);
  });

  test("bad pruning options are 400s", () => {
    expect(() => checkPruning({ topK: 0 })).toThrow(InvalidInput);
    expect(() => checkPruning({ threshold: -1 })).toThrow(InvalidInput);
    expect(() => checkPruning({ topK: 3, threshold: 0 })).not.toThrow();
  });

  test("dot product of two sparse vectors", () => {
    const w = nonZeros(Float32Array.from([1, 1, 0, 0, 3, 0, 0]));
    expect(sparseDot(v, w)).toBeCloseTo(0.5 + 3, 6);
    expect(sparseDot(v, nonZeros(new Float32Array(7)))).toBe(0);
  });
});
