import { describe, expect, test } from "bun:test";
import { colbertHead, colbertInput, colbertTokens, documentChunks, maxSim, readMultiVector, multiVectorTokenizeLength } from "../../src/tasks/multivector";
import type { MultiVectorLayout } from "../../src/model/multivector-layout";
import { createOrtSession, runOnce } from "../../src/model/onnx";

const cfg: MultiVectorLayout = {
  format: "pylate", queryPrefix: "[Q] ", documentPrefix: "[D] ", queryLength: 8, documentLength: 6,
  queryExpansion: true, attendToExpansion: false, skiplistWords: [".", "~"], densePath: "1_Dense",
};
const vocab: Record<string, number> = { "[Q] ": 50, "[D] ": 51, "[MASK]": 4, ".": 9, "[UNK]": 1 };
const tok = colbertTokens(cfg, (t) => vocab[t], { before: 1, after: 1 }, { mask_token: "[MASK]", unk_token: "[UNK]" });
const enc = (ids: number[]) => ({ ids: Int32Array.from(ids), typeIds: null });

describe("ColBERT inputs (PyLate's algorithm)", () => {
  test("tokens: prefixes by string, skiplist words missing from the vocabulary map to [UNK] as PyLate does", () => {
    expect(tok.queryPrefix).toBe(50);
    expect(tok.documentPrefix).toBe(51);
    expect(tok.expansion).toBe(4);
    expect([...tok.skiplist].sort()).toEqual([1, 9]);
    expect(() => colbertTokens({ ...cfg, queryPrefix: "[X]" }, (t) => vocab[t], { before: 1, after: 1 }, {})).toThrow(/not a token/);
    expect(multiVectorTokenizeLength(cfg)).toBe(7);
  });

  test("a query: prefix after the first token, expanded with [MASK] to query_length, expansion not attended, all kept", () => {
    const q = colbertInput(enc([2, 20, 21, 3]), "query", cfg, tok);
    expect(Array.from(q.ids)).toEqual([2, 50, 20, 21, 3, 4, 4, 4]);
    expect(Array.from(q.attention)).toEqual([1, 1, 1, 1, 1, 0, 0, 0]);
    expect(Array.from(q.keep)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
    expect(q.tokens).toBe(5);
    const attended = colbertInput(enc([2, 20, 3]), "query", { ...cfg, attendToExpansion: true }, tok);
    expect(Array.from(attended.attention)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
    const plain = colbertInput(enc([2, 20, 3]), "query", { ...cfg, queryExpansion: false }, tok);
    expect(Array.from(plain.ids)).toEqual([2, 50, 20, 3]);
  });

  test("a long query is cut to query_length keeping [SEP]; a document drops skiplist tokens and is cut to document_length", () => {
    const q = colbertInput(enc([2, 20, 21, 22, 23, 24, 25, 26, 3]), "query", cfg, tok);
    expect(Array.from(q.ids)).toEqual([2, 50, 20, 21, 22, 23, 24, 3]);
    const d = colbertInput(enc([2, 20, 9, 21, 1, 22, 3]), "document", cfg, tok);
    expect(Array.from(d.ids)).toEqual([2, 51, 20, 9, 21, 3]);
    expect(Array.from(d.keep)).toEqual([1, 1, 1, 0, 1, 1]);
    expect(Array.from(d.attention)).toEqual([1, 1, 1, 1, 1, 1]);
  });
});

describe("reading and scoring", () => {
  test("kept rows are projected by the Dense head (onnxruntime) and L2-normalised; MaxSim sums each query vector's best match", async () => {
    // batch 1, 3 tokens, hidden 2; projection to 2 dims swapping the features and doubling the first.
    const hidden = Float32Array.from([3, 4, 9, 9, 0, 2]);
    const dense = [{ inFeatures: 2, outFeatures: 2, weight: Float32Array.from([0, 2, 1, 0]), bias: null, activation: "identity" as const, residual: null }];
    const head = colbertHead(["last_hidden_state"], dense);
    expect(head.input).toBe("last_hidden_state");
    expect(head.outputs).toEqual({ last_hidden_state: "y" });
    const session = await createOrtSession(head.graph, { device: "cpu", numThreads: 1 });
    const [projected] = await runOnce(session, { x: { data: hidden, dims: [1, 3, 2] } }, ["y"]);
    await session.session.release();
    expect(projected!.dims).toEqual([1, 3, 2]);
    expect(Array.from(projected!.data)).toEqual([8, 3, 18, 9, 4, 0]);
    const m = readMultiVector(projected!.data, projected!.dims, 0, Uint8Array.from([1, 0, 1]));
    expect(m.rows).toBe(2);
    expect(Array.from(m.data)).toEqual([8 / Math.hypot(8, 3), 3 / Math.hypot(8, 3), 1, 0].map(Math.fround));
    const q = { data: Float32Array.from([1, 0, 0, 1]), rows: 2, dim: 2 };
    expect(maxSim(q, m)).toBeCloseTo(1 + 3 / Math.hypot(8, 3), 6);
  });
});

describe("documentChunks (/rerank's bound on document vectors held at once)", () => {
  test("chunks of floor(maxVectors / perDocument) documents cover every document once, in order", () => {
    expect(documentChunks(10, 40, 300)).toEqual([[0, 7], [7, 10]]);
    expect(documentChunks(7, 40, 280)).toEqual([[0, 7]]);
    expect(documentChunks(0, 40, 300)).toEqual([]);
  });
  test("a document larger than the bound is a chunk of its own", () => {
    expect(documentChunks(3, 1024, 300)).toEqual([[0, 1], [1, 2], [2, 3]]);
  });
});
