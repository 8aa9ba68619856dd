import { describe, expect, test } from "bun:test";
import { applyDense, finishEmbedding, l2normalize, pool, promptFor, toBase64 } from "../../src/tasks/embed";
import { labelScores, softmax } from "../../src/tasks/classify";
import { rankResults, sigmoid, yesNoReader } from "../../src/tasks/rerank";
import { InvalidInput } from "../../src/errors";

// hidden: batch 1, seq 3 (2 real tokens + 1 pad), dim 2
const hidden = new Float32Array([1, 2, 3, -4, 100, 100]);
const dims = [1, 3, 2];

describe("pooling (sentence-transformers semantics over real tokens only)", () => {
  test("each method", () => {
    expect(Array.from(pool(hidden, dims, 0, 2, "cls"))).toEqual([1, 2]);
    expect(Array.from(pool(hidden, dims, 0, 2, "mean"))).toEqual([2, -1]);
    expect(Array.from(pool(hidden, dims, 0, 2, "max"))).toEqual([3, 2]);
    expect(Array.from(pool(hidden, dims, 0, 2, "last"))).toEqual([3, -4]);
    const sq = Array.from(pool(hidden, dims, 0, 2, "mean_sqrt_len"));
    expect(sq[0]).toBeCloseTo(4 / Math.SQRT2, 6);
    // weights 1 and 2: (1*1 + 2*3) / 3, (1*2 + 2*-4) / 3
    const w = Array.from(pool(hidden, dims, 0, 2, "weighted_mean"));
    expect(w[0]).toBeCloseTo(7 / 3, 6);
    expect(w[1]).toBeCloseTo(-2, 6);
  });

  test("left-padded rows pool from their first real token; last is the last real token", () => {
    // seq 3: one pad (100, 100) then two real tokens
    const left = new Float32Array([100, 100, 1, 2, 3, -4]);
    expect(Array.from(pool(left, dims, 0, 2, "last", 0, 1))).toEqual([3, -4]);
    expect(Array.from(pool(left, dims, 0, 2, "mean", 0, 1))).toEqual([2, -1]);
    expect(Array.from(pool(left, dims, 0, 2, "cls", 0, 1))).toEqual([1, 2]);
  });

  test("second row of a batch", () => {
    const h = new Float32Array([0, 0, 0, 0, 5, 6, 7, 8]);
    expect(Array.from(pool(h, [2, 2, 2], 1, 2, "mean"))).toEqual([6, 7]);
  });
});

describe("post-processing", () => {
  test("normalise, Matryoshka, base64", () => {
    expect(Array.from(l2normalize(new Float32Array([3, 4])))).toEqual([0.6000000238418579, 0.800000011920929]);
    expect(Array.from(l2normalize(new Float32Array([0, 0])))).toEqual([0, 0]);
    expect(Array.from(finishEmbedding(new Float32Array([3, 4, 12]), 2))).toEqual([0.6000000238418579, 0.800000011920929]);
    expect(() => finishEmbedding(new Float32Array([1, 2]), 3)).toThrow(InvalidInput);
    const b = Buffer.from(toBase64(new Float32Array([1.5, -2])), "base64");
    expect(b.readFloatLE(0)).toBe(1.5);
    expect(b.readFloatLE(4)).toBe(-2);
  });

  test("softmax, sigmoid, label order, ranking", () => {
    const p = softmax([1, 2, 3]);
    expect(p.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
    expect(p[2]! / p[1]!).toBeCloseTo(Math.E, 9);
    expect(sigmoid(0)).toBe(0.5);
    expect(labelScores([0.1, 2, -1], ["a", "b", "c"], false).map((x) => x.label)).toEqual(["b", "a", "c"]);
    expect(labelScores([0.1, 2, -1], ["a", "b", "c"], true).map((x) => x.score)).toEqual([2, 0.1, -1]);
    expect(labelScores([0], ["only"], false)).toEqual([{ label: "only", score: 0.5 }]);
    expect(rankResults([0, 3, 1, 3], 3, true)).toEqual([{ index: 1, score: 3 }, { index: 3, score: 3 }, { index: 2, score: 1 }]);
  });
});

describe("promptFor: prompt_name and input_type, one mapping for every API shape", () => {
  const prompts = { query: "Q: ", document: "D: ", Classification: "C: " };
  test("input_type and its Cohere names select the model's prompt; unknown kinds embed as is", () => {
    expect(promptFor(prompts, null, { inputType: "query" })).toBe("Q: ");
    expect(promptFor(prompts, null, { inputType: "search_query" })).toBe("Q: ");
    expect(promptFor(prompts, null, { inputType: "search_document" })).toBe("D: ");
    expect(promptFor(prompts, null, { inputType: "classification" })).toBe("C: ");
    expect(promptFor(prompts, null, { inputType: "clustering" })).toBe("");
    expect(promptFor({ search_query: "search_query: ", search_document: "search_document: " }, null, { inputType: "query" })).toBe("search_query: ");
    expect(promptFor({ passage: "passage: " }, "passage", { inputType: "document" })).toBe("passage: ");
    expect(promptFor({}, null, { inputType: "query" })).toBe("");
  });

  test("prompt_name, the default prompt, and conflicts", () => {
    expect(promptFor(prompts, null, { promptName: "document" })).toBe("D: ");
    expect(promptFor(prompts, "query", {})).toBe("Q: ");
    expect(promptFor(prompts, "query", { inputType: "document" })).toBe("D: ");
    expect(() => promptFor(prompts, null, { promptName: "nope" })).toThrow(/defines query, document, Classification/);
    expect(() => promptFor(prompts, null, { promptName: "query", inputType: "query" })).toThrow(InvalidInput);
    expect(() => promptFor(prompts, null, { inputType: "bogus" })).toThrow(/search_query/);
  });

  test("normalize false keeps the raw (truncated) vector", () => {
    expect(Array.from(finishEmbedding(new Float32Array([3, 4, 12]), 2, false))).toEqual([3, 4]);
  });
});

describe("LLM reranker scores", () => {
  test("yes minus no at each row's last real token; [batch, 1, vocab] with num_logits_to_keep", () => {
    // batch 2, seq 2, vocab 3 (yes = 2, no = 0); row 0 left-padded (real token at 1), row 1 right-padded (real at 0)
    const data = new Float32Array([9, 9, 9, 1, 0, 5, 2, 0, 3, 7, 7, 7]);
    const r = yesNoReader(2, 0).read({ name: "logits", data, dims: [2, 2, 3] }, [1, 1], [1, 0]);
    expect(r).toEqual([4, 1]);
    const kept = yesNoReader(2, 0).read({ name: "logits", data: new Float32Array([1, 0, 5, 2, 0, 3]), dims: [2, 1, 3] }, [7, 3], [0, 4]);
    expect(kept).toEqual([4, 1]);
    expect(sigmoid(4)).toBeCloseTo(Math.exp(5) / (Math.exp(1) + Math.exp(5)), 12);
  });
});

describe("model families: decoders, Dense modules, unknown modules", () => {
  test("applyDense: activation(W x + b), residual", () => {
    const layer = { inFeatures: 2, outFeatures: 2, weight: Float32Array.from([1, 2, 3, 4]), bias: Float32Array.from([0.5, -0.5]), activation: "identity" as const, residual: null };
    expect(Array.from(applyDense(Float32Array.from([1, 1]), [layer]))).toEqual([3.5, 6.5]);
    expect(Array.from(applyDense(Float32Array.from([1, 1]), [{ ...layer, activation: "relu", bias: Float32Array.from([-4, 0]) }]))).toEqual([0, 7]);
    expect(Array.from(applyDense(Float32Array.from([1, 1]), [{ ...layer, residual: "identity" }]))).toEqual([4.5, 7.5]);
    expect(applyDense(Float32Array.from([0, 0]), [{ ...layer, activation: "tanh", bias: Float32Array.from([1, 0]) }])[0]).toBeCloseTo(Math.tanh(1), 6);
  });
});
