// bge-m3-style hybrid encoders: dense, lexical (sparse) and multi-vector outputs from one run (FlagEmbedding's
// BGEM3FlagModel), from aapot's export (heads in the graph) or BAAI's layout (heads pickled beside the encoder, run as
// the session's head graph). Dense: the CLS state, L2-normalised. Lexical weights: relu(sparse_linear(h)) per token, the largest
// per token id, the tokenizer's cls/eos/pad/unk ids and zero weights dropped. Multi-vector: colbert_linear(h) of the
// real tokens after CLS, each L2-normalised. Which outputs a batch reads is the union of what its rows asked for.
import type { HybridLayout } from "../model/hybrid-layout";
import type { Pooling } from "../model/st-modules";
import type { BatchTensors, ModelSession, SessionHead } from "../model/session";
import type { DenseLayer } from "../model/dense";
import { headGraph } from "../model/dense-graph";
import { buildTensors, rowExtents, type PaddingSide } from "../model/tensors";
import type { BatchInput } from "./batch-input";
import type { Runner } from "./runner";
import type { Encoded } from "../tokenize/encode";
import { InvalidInput, ModelLoadError } from "../errors";
import { l2normalize, pool } from "./embed";
import { MULTIVECTOR_CODEC, type MultiVector } from "./multivector";
import { SPARSE_CODEC, type SparseVector } from "./sparse";
import type { Codec, StoredArray } from "../cache/cache";

/** The outputs a hybrid model gives, by their API names. */
export const HYBRID_OUTPUTS = ["dense", "sparse", "multi_vector"] as const;
export type HybridOutput = (typeof HYBRID_OUTPUTS)[number];

/** A tokenized input and which of the costly outputs it needs (dense is always read: it is one row). */
export type HybridInput = Encoded & { sparse: boolean; multiVector: boolean };

export interface HybridResult {
  dense: Float32Array;
  sparse: SparseVector | null;
  multiVector: MultiVector | null;
}

export interface HybridBatch {
  tensors: BatchTensors;
  /** What each row asked for. */
  rows: Array<{ sparse: boolean; multiVector: boolean }>;
}

/**
 * The outputs a request asks for: a name or a list of names (no repeats), checked against what the model serves.
 * Absent: dense.
 */
export function parseOutputs(output: unknown, param = "output"): HybridOutput[] {
  if (output === undefined || output === null) return ["dense"];
  const list = typeof output === "string" ? [output] : output;
  const known = HYBRID_OUTPUTS as readonly string[];
  if (!Array.isArray(list) || list.length === 0 || list.some((x) => typeof x !== "string" || !known.includes(x))) {
    throw new InvalidInput(`\`${param}\` must be one of ${HYBRID_OUTPUTS.join(", ")} or a non-empty list of them`, param);
  }
  if (new Set(list).size !== list.length) throw new InvalidInput(`\`${param}\` names an output twice`, param);
  return list as HybridOutput[];
}

/** Refuses outputs the model cannot give (heads this server does not load), with the reason. */
export function checkHybridOutputs(outputs: readonly HybridOutput[], layout: HybridLayout, model: string, param = "output"): void {
  const missing = outputs.filter((o) => (o === "sparse" && !layout.sparseOutput) || (o === "multi_vector" && !layout.colbertOutput));
  if (missing.length) {
    throw new InvalidInput(`model "${model}" does not serve ${missing.join(" or ")} vectors: ${layout.unavailable ?? "its export lacks those outputs"}`, param);
  }
}

/**
 * The asked outputs in one result-cache entry, in the order dense, sparse, multi_vector: the raw dense vector, the
 * sparse codec's arrays, the multi-vector codec's arrays. One output alone is stored exactly as the sparse /
 * multi-vector codec stores it, so those entries are shared with /embed_sparse (same key); outputs not asked are
 * left empty (dense: a zero-length vector).
 */
export function hybridCodec(outputs: readonly HybridOutput[]): Codec<HybridResult> {
  const dense = outputs.includes("dense");
  const sparse = outputs.includes("sparse");
  const multi = outputs.includes("multi_vector");
  return {
    toArrays: (r) => {
      const arrays: StoredArray[] = [];
      if (dense) arrays.push(r.dense);
      if (sparse) arrays.push(...SPARSE_CODEC.toArrays(r.sparse!));
      if (multi) arrays.push(...MULTIVECTOR_CODEC.toArrays(r.multiVector!));
      return arrays;
    },
    fromArrays: (arrays) => {
      let at = 0;
      const d = dense ? arrays[at++] : new Float32Array(0);
      if (!(d instanceof Float32Array)) return null;
      const s = sparse ? SPARSE_CODEC.fromArrays(arrays.slice(at, (at += 2))) : null;
      const m = multi ? MULTIVECTOR_CODEC.fromArrays(arrays.slice(at, (at += 2))) : null;
      if ((sparse && !s) || (multi && !m) || at !== arrays.length) return null;
      return { dense: d, sparse: s, multiVector: m };
    },
  };
}

/**
 * What in a result-cache key tells a hybrid answer apart: the asked outputs in a fixed order. One output alone uses
 * the same mark as the sparse / multi-vector routes of that output (their entries hold the same arrays).
 */
export function hybridKeyMark(outputs: readonly HybridOutput[]): string {
  const ordered = HYBRID_OUTPUTS.filter((o) => outputs.includes(o));
  if (ordered.length === 1 && ordered[0] === "sparse") return ":sparse";
  if (ordered.length === 1 && ordered[0] === "multi_vector") return ":multivector";
  return `:hybrid-${ordered.join("+")}`;
}

export function hybridBatches(padId: number, side: PaddingSide): BatchInput<HybridInput, HybridBatch> {
  return {
    lengthOf: (x) => x.ids.length,
    assemble(inputs) {
      const tensors = buildTensors(inputs, padId, side);
      return {
        tensors: { tensors, rows: inputs.map((x) => ({ sparse: x.sparse, multiVector: x.multiVector })) },
        padded: tensors.batch * tensors.seqLen,
      };
    },
  };
}

/** Token ids that never get a lexical weight: the tokenizer's cls, eos, pad and unk tokens. */
export function unusedTokenIds(tokenizerConfig: Record<string, unknown>, tokenId: (t: string) => number | undefined): Set<number> {
  const out = new Set<number>();
  for (const key of ["cls_token", "eos_token", "pad_token", "unk_token"]) {
    const t = tokenizerConfig[key];
    const id = typeof t === "string" ? tokenId(t) : undefined;
    if (id !== undefined) out.add(id);
  }
  return out;
}

/** Row b's lexical weights from per-token weights [B, T] or [B, T, 1]: max per token id, ascending ids. */
export function lexicalWeights(weights: Float32Array, seq: number, b: number, ids: Int32Array, start: number, length: number, unused: ReadonlySet<number>): SparseVector {
  const best = new Map<number, number>();
  for (let t = 0; t < length; t++) {
    const p = start + t;
    const id = ids[b * seq + p]!;
    if (unused.has(id)) continue;
    const w = weights[b * seq + p]!;
    if (!(w > 0)) continue;
    const had = best.get(id);
    if (had === undefined || w > had) best.set(id, w);
  }
  const indices = Int32Array.from([...best.keys()].sort((x, y) => x - y));
  const values = Float32Array.from(indices, (i) => best.get(i)!);
  return { indices, values };
}

/**
 * Row b's multi-vectors from a [B, S, H] output: the real tokens after the first (CLS), each L2-normalised. S is
 * the padded length (position p at index p) or one less (the export already dropped CLS: position p at p - 1).
 */
export function colbertRows(vecs: Float32Array, dims: readonly number[], seqLen: number, b: number, start: number, length: number): MultiVector {
  const s = dims[1]!;
  const h = dims[2]!;
  const shift = s === seqLen ? 0 : s === seqLen - 1 ? 1 : -1;
  if (shift < 0) throw new Error(`multi-vector output has ${s} positions for ${seqLen} tokens`);
  const rows = Math.max(0, length - 1);
  const data = new Float32Array(rows * h);
  for (let r = 0; r < rows; r++) {
    const o = (b * s + start + 1 + r - shift) * h;
    data.set(l2normalize(vecs.slice(o, o + h)), r * h);
  }
  return { data, rows, dim: h };
}

/**
 * BAAI's layout: the pickled heads as the session's head graph over the token states, so the inference worker
 * gives relu(sparse_linear(h)) [B, T, 1] and colbert_linear(h) [B, T, C] (CLS included: colbertRows skips it) under
 * the layout's sparse / colbert output names, each only in runs that ask for it. In JavaScript the ColBERT head
 * alone cost ~1 GFLOP/s on the main thread (bench/m3-heads.ts).
 */
export function pickledHeadsHead(layout: HybridLayout, heads: { sparse: DenseLayer | null; colbert: DenseLayer | null }): SessionHead | undefined {
  const outputs: Array<{ name: string; layers: DenseLayer[] }> = [];
  const names: Record<string, string> = {};
  if (heads.sparse && layout.sparseOutput) {
    outputs.push({ name: "sparse", layers: [heads.sparse] });
    names[layout.sparseOutput] = "sparse";
  }
  if (heads.colbert && layout.colbertOutput) {
    outputs.push({ name: "colbert", layers: [heads.colbert] });
    names[layout.colbertOutput] = "colbert";
  }
  return outputs.length ? { input: layout.denseOutput, outputs: names, graph: headGraph(outputs) } : undefined;
}

/** Runs a hybrid batch, fetching only the outputs some row needs, and reads each row. */
export function hybridRunner(session: ModelSession, layout: HybridLayout, pooling: Pooling, unused: ReadonlySet<number>): Runner<HybridResult, HybridBatch> {
  for (const name of [layout.denseOutput, layout.sparseOutput, layout.colbertOutput]) {
    if (name && !session.outputNames.includes(name)) throw new ModelLoadError(`the bge-m3 export has no ${name} output (it has ${session.outputNames.join(", ")})`);
  }
  return {
    async run(batch) {
      const t = batch.tensors;
      const wantSparse = batch.rows.some((r) => r.sparse) && layout.sparseOutput !== null;
      const wantMulti = batch.rows.some((r) => r.multiVector) && layout.colbertOutput !== null;
      const names = [layout.denseOutput];
      if (wantSparse) names.push(layout.sparseOutput!);
      if (wantMulti) names.push(layout.colbertOutput!);
      const outs = await session.runMany(t, names);
      const dense = outs[0]!;
      const sparse = wantSparse ? outs[1]! : null;
      const colbert = wantMulti ? outs[names.length - 1]! : null;
      if (sparse && (sparse.dims[1] !== t.seqLen || sparse.data.length !== t.batch * t.seqLen)) {
        throw new Error(`lexical weights output has shape [${sparse.dims.join(", ")}], expected [${t.batch}, ${t.seqLen}, 1]`);
      }
      const { lengths, starts } = rowExtents(t);
      const results: HybridResult[] = new Array(t.batch);
      for (let b = 0; b < t.batch; b++) {
        let d: Float32Array;
        if (dense.dims.length === 2) {
          const h = dense.dims[1]!;
          d = dense.data.slice(b * h, (b + 1) * h);
        } else d = pool(dense.data, dense.dims, b, lengths[b]!, pooling, 0, starts[b]!);
        results[b] = {
          dense: d,
          sparse: sparse && batch.rows[b]!.sparse ? lexicalWeights(sparse.data, t.seqLen, b, t.inputIds, starts[b]!, lengths[b]!, unused) : null,
          multiVector: colbert && batch.rows[b]!.multiVector ? colbertRows(colbert.data, colbert.dims, t.seqLen, b, starts[b]!, lengths[b]!) : null,
        };
      }
      return results;
    },
  };
}
