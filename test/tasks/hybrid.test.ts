import { describe, expect, test } from "bun:test";
import { colbertRows, lexicalWeights, parseOutputs, unusedTokenIds, checkHybridOutputs } from "../../src/tasks/hybrid";
import { hybridLayout } from "../../src/model/hybrid-layout";
import { InvalidInput } from "../../src/errors";

describe("bge-m3 lexical weights", () => {
  test("largest weight per token id, zero weights and unused ids dropped, ascending, only the row's real tokens", () => {
    // two rows of 5 positions; row 1 has 3 real tokens starting at 0
    const ids = Int32Array.from([0, 7, 5, 7, 2, /* row 1 */ 0, 9, 2, 1, 1]);
    const w = Float32Array.from([0.9, 0.2, 0.0, 0.5, 0.8, /* row 1 */ 0.3, 0.4, 0.6, 0.7, 0.7]);
    const unused = new Set([0, 1, 2, 3]);
    const a = lexicalWeights(w, 5, 0, ids, 0, 5, unused);
    expect(Array.from(a.indices)).toEqual([7]);
    expect(Array.from(a.values)).toEqual([0.5]);
    const b = lexicalWeights(w, 5, 1, ids, 0, 3, unused);
    expect(Array.from(b.indices)).toEqual([9]);
    expect(b.values[0]).toBeCloseTo(0.4, 6);
  });

  test("unused ids come from the tokenizer's cls, eos, pad and unk tokens", () => {
    const vocab: Record<string, number> = { "<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 9 };
    const ids = unusedTokenIds({ cls_token: "<s>", eos_token: "</s>", pad_token: "<pad>", unk_token: "<unk>", mask_token: "<mask>" }, (t) => vocab[t]);
    expect([...ids].sort()).toEqual([0, 1, 2, 3]);
  });
});

describe("bge-m3 multi-vectors", () => {
  test("tokens after CLS, normalised, from an output that dropped CLS or kept it", () => {
    const h = 2;
    // seqLen 3, one row of 3 real tokens: with CLS dropped the output has 2 positions
    const dropped = Float32Array.from([3, 4, 0, 2]);
    const a = colbertRows(dropped, [1, 2, h], 3, 0, 0, 3);
    expect(a.rows).toBe(2);
    const round = (x: Float32Array) => Array.from(x, (v) => Math.round(v * 1e6) / 1e6);
    expect(round(a.data)).toEqual([0.6, 0.8, 0, 1]);
    const kept = Float32Array.from([9, 9, 3, 4, 0, 2]);
    expect(round(colbertRows(kept, [1, 3, h], 3, 0, 0, 3).data)).toEqual([0.6, 0.8, 0, 1]);
    expect(() => colbertRows(kept, [1, 5, h], 3, 0, 0, 3)).toThrow(/positions/);
  });
});

describe("outputs a request asks for", () => {
  test("dense by default; a name or a list; unknown names and repeats refused", () => {
    expect(parseOutputs(undefined)).toEqual(["dense"]);
    expect(parseOutputs("sparse")).toEqual(["sparse"]);
    expect(parseOutputs(["multi_vector", "dense"])).toEqual(["multi_vector", "dense"]);
    expect(() => parseOutputs("colbert")).toThrow(InvalidInput);
    expect(() => parseOutputs([])).toThrow(InvalidInput);
    expect(() => parseOutputs(["sparse", "sparse"])).toThrow(/twice/);
  });
});

describe("bge-m3 layouts", () => {
  test("aapot's outputs; a partial export serves what it has", () => {
    expect(hybridLayout(["dense_vecs", "sparse_vecs", "colbert_vecs"], [])).toMatchObject({ format: "heads", sparseOutput: "sparse_vecs", colbertOutput: "colbert_vecs", unavailable: null });
    const partial = hybridLayout(["dense_vecs", "colbert_vecs"], [])!;
    expect(partial.sparseOutput).toBeNull();
    expect(() => checkHybridOutputs(["sparse"], partial, "m")).toThrow(/no sparse_vecs output/);
    expect(() => checkHybridOutputs(["dense", "multi_vector"], partial, "m")).not.toThrow();
  });

  test("BAAI's pickled heads beside an encoder export (token_embeddings or last_hidden_state); one head alone serves its output", () => {
    const l = hybridLayout(["token_embeddings", "sentence_embedding"], ["config.json", "sparse_linear.pt", "colbert_linear.pt"])!;
    expect(l).toEqual({
      format: "hidden", denseOutput: "token_embeddings", sparseOutput: "sparse_linear", colbertOutput: "colbert_linear",
      pickledHeads: { sparse: "sparse_linear.pt", colbert: "colbert_linear.pt" }, unavailable: null,
    });
    const one = hybridLayout(["last_hidden_state"], ["config.json", "sparse_linear.pt"])!;
    expect(one).toMatchObject({ denseOutput: "last_hidden_state", sparseOutput: "sparse_linear", colbertOutput: null, pickledHeads: { sparse: "sparse_linear.pt", colbert: null } });
    expect(() => checkHybridOutputs(["multi_vector"], one, "m")).toThrow(/does not serve multi_vector vectors: its folder has no colbert_linear.pt/);
    expect(() => checkHybridOutputs(["dense", "sparse"], one, "m")).not.toThrow();
    expect(hybridLayout(["last_hidden_state"], ["config.json"])).toBeNull();
    expect(() => hybridLayout(["logits"], ["sparse_linear.pt"])).toThrow(/needs an ONNX export with a last_hidden_state, token_embeddings or dense_vecs output; this one has logits/);
  });
});
