// Sparse (SPLADE) embeddings: one weight per vocabulary entry, pooled over the real tokens of MLM logits
// (sentence-transformers SpladePooling), kept as the non-zero (index, weight) pairs in ascending index order.
import type { SparseLayout } from "../model/sparse-layout";
import type { OutputTensor } from "../model/session";
import { InvalidInput } from "../errors";
import type { TaskReader } from "./task";
import type { Codec } from "../cache/cache";

export interface SparseVector {
  /** Vocabulary ids, ascending. */
  indices: Int32Array;
  values: Float32Array;
}

/** In the result cache: the indices and the values, unpruned (top_k / threshold are applied after the cache). */
export const SPARSE_CODEC: Codec<SparseVector> = {
  toArrays: (v) => [v.indices, v.values],
  fromArrays: ([indices, values, ...rest]) =>
    indices instanceof Int32Array && values instanceof Float32Array && indices.length === values.length && rest.length === 0 ? { indices, values } : null,
};

/** The output a SPLADE export names its MLM logits by (optimum fill-mask, Qdrant, sentence-transformers). */
export const SPARSE_OUTPUTS = ["logits", "token_embeddings", "output"] as const;

/** `drop`: token ids whose weight is always 0 (the older OpenSearch layout's special tokens). */
export function spladeReader(cfg: SparseLayout, drop: ReadonlySet<number> = new Set()): TaskReader<SparseVector> {
  return {
    outputName(names) {
      const found = SPARSE_OUTPUTS.find((n) => names.includes(n));
      if (!found) throw new Error(`a SPLADE model needs an MLM logits output (${SPARSE_OUTPUTS.join(", ")}); the ONNX model has ${names.join(", ")}`);
      return found;
    },
    read(out: OutputTensor, lengths) {
      if (out.dims.length !== 3) throw new Error(`SPLADE expects logits [batch, tokens, vocab], got [${out.dims.join(", ")}]`);
      const rows: SparseVector[] = new Array(lengths.length);
      for (let b = 0; b < lengths.length; b++) rows[b] = spladeRow(out.data, out.dims, b, lengths[b]!, cfg, drop);
      return rows;
    },
  };
}

/** Pools row b's first `length` tokens: max or sum of log(1 + relu(logit)) per vocabulary entry. */
export function spladeRow(logits: Float32Array, dims: readonly number[], b: number, length: number, cfg: SparseLayout, drop: ReadonlySet<number> = new Set()): SparseVector {
  const seq = dims[1]!;
  const vocab = dims[2]!;
  const weights = new Float32Array(vocab);
  const twice = cfg.activation === "log1p_relu";
  const sum = cfg.poolingStrategy === "sum";
  for (let t = 0; t < length; t++) {
    const o = (b * seq + t) * vocab;
    for (let v = 0; v < vocab; v++) {
      const x = logits[o + v]!;
      if (x <= 0) continue;
      let w = Math.log1p(x);
      if (twice) w = Math.log1p(w);
      if (sum) weights[v]! += w;
      else if (w > weights[v]!) weights[v] = w;
    }
  }
  for (const id of drop) if (id >= 0 && id < vocab) weights[id] = 0;
  return nonZeros(weights);
}

/** The non-zero entries of a dense weight vector, ascending. */
export function nonZeros(weights: Float32Array): SparseVector {
  let n = 0;
  for (let v = 0; v < weights.length; v++) if (weights[v] !== 0) n++;
  const indices = new Int32Array(n);
  const values = new Float32Array(n);
  let k = 0;
  for (let v = 0; v < weights.length; v++) {
    if (weights[v] !== 0) {
      indices[k] = v;
      values[k++] = weights[v]!;
    }
  }
  return { indices, values };
}

/**
 * An inference-free query (sentence-transformers SparseStaticEmbedding): each distinct token id of the query once,
 * weighted by the static table (e.g. IDF); ids past the table and zero weights are left out. Ascending.
 */
export function staticSparse(ids: ArrayLike<number>, weights: Float32Array): SparseVector {
  const seen = new Set<number>();
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (id >= 0 && id < weights.length && weights[id] !== 0) seen.add(id);
  }
  const indices = Int32Array.from([...seen].sort((a, b) => a - b));
  return { indices, values: Float32Array.from(indices, (i) => weights[i]!) };
}

/**
 * idf.json's weights (token string -> weight) as a table by token id over the whole vocabulary; tokens the tokenizer
 * lacks are left out, and every token idf.json does not name weighs `missing` (0 as the model cards' usage code, 1
 * as OpenSearch's in-cluster query).
 */
export function idfTable(idf: Record<string, number>, tokenId: (token: string) => number | undefined, vocabSize: number, missing: number): Float32Array {
  const table = new Float32Array(vocabSize).fill(missing);
  for (const [token, w] of Object.entries(idf)) {
    const id = tokenId(token);
    if (id !== undefined && id < vocabSize) table[id] = w;
  }
  return table;
}

/** Ids of the tokenizer's special tokens (transformers' special_tokens_map: cls, sep, pad, unk, mask, bos, eos). */
export function specialTokenIds(tokenizerConfig: Record<string, unknown>, tokenId: (token: string) => number | undefined): Set<number> {
  const out = new Set<number>();
  for (const key of ["cls_token", "sep_token", "pad_token", "unk_token", "mask_token", "bos_token", "eos_token"]) {
    const t = tokenizerConfig[key];
    const text = typeof t === "string" ? t : t && typeof t === "object" && typeof (t as { content?: unknown }).content === "string" ? (t as { content: string }).content : undefined;
    const id = text === undefined ? undefined : tokenId(text);
    if (id !== undefined) out.add(id);
  }
  return out;
}

export type SparseKind = "query" | "document";

/**
 * Query or document encoding of an inference-free sparse model from a request's input_type (Cohere's
 * search_query / search_document too); absent: the model's default route.
 */
export function sparseKind(inputType: string | undefined, defaultKind: SparseKind): SparseKind {
  if (inputType === undefined) return defaultKind;
  if (inputType === "query" || inputType === "search_query") return "query";
  if (inputType === "document" || inputType === "search_document" || inputType === "passage") return "document";
  throw new InvalidInput(`input_type for an inference-free sparse model must be query or document (or search_query / search_document), got "${inputType}"`, "input_type");
}

export interface SparsePruning {
  /** Keep only the k largest weights. */
  topK?: number;
  /** Keep only weights above this value. */
  threshold?: number;
}

/** Checks the pruning options of a request. */
export function checkPruning(p: SparsePruning): void {
  if (p.topK !== undefined && (!Number.isInteger(p.topK) || p.topK < 1)) throw new InvalidInput(`\`top_k\` must be a positive integer, got ${p.topK}`, "top_k");
  if (p.threshold !== undefined && !(Number.isFinite(p.threshold) && p.threshold >= 0)) {
    throw new InvalidInput(`\`threshold\` must be a non-negative number, got ${p.threshold}`, "threshold");
  }
}

/** Drops weights at or under the threshold, then keeps the top k by weight (ties: lower index); stays ascending. */
export function pruneSparse(v: SparseVector, p: SparsePruning): SparseVector {
  let keep: number[] | null = null;
  if (p.threshold !== undefined && p.threshold > 0) {
    keep = [];
    for (let i = 0; i < v.values.length; i++) if (v.values[i]! > p.threshold) keep.push(i);
  }
  const count = keep ? keep.length : v.values.length;
  if (p.topK !== undefined && p.topK < count) {
    const order = keep ?? Array.from({ length: count }, (_, i) => i);
    order.sort((a, b) => v.values[b]! - v.values[a]! || a - b);
    keep = order.slice(0, p.topK).sort((a, b) => a - b);
  }
  if (!keep) return v;
  return { indices: Int32Array.from(keep, (i) => v.indices[i]!), values: Float32Array.from(keep, (i) => v.values[i]!) };
}

/** Dot product of two sparse vectors (both ascending). */
export function sparseDot(a: SparseVector, b: SparseVector): number {
  let i = 0;
  let j = 0;
  let s = 0;
  while (i < a.indices.length && j < b.indices.length) {
    const x = a.indices[i]!;
    const y = b.indices[j]!;
    if (x === y) s += a.values[i++]! * b.values[j++]!;
    else if (x < y) i++;
    else j++;
  }
  return s;
}
