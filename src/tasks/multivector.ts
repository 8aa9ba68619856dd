// Multi-vector (late-interaction, ColBERT) embeddings: preparing inputs (prefix token after the first token, query
// expansion with the mask token, per-kind truncation), reading outputs (projection, per-token L2, skiplist), MaxSim.
import type { MultiVectorLayout } from "../model/multivector-layout";
import type { BatchTensors, ModelSession, SessionHead } from "../model/session";
import type { Runner } from "./runner";
import type { DenseLayer } from "../model/dense";
import { l2normalize } from "./embed";
import { denseGraph } from "../model/dense-graph";
import type { Encoded } from "../tokenize/encode";
import type { BatchInput } from "./batch-input";
import { InvalidInput, ModelLoadError } from "../errors";
import type { Codec } from "../cache/cache";

export type InputType = "query" | "document";

/**
 * Query or document encoding from a request's input_type (Cohere's search_query / search_document too); default
 * document.
 */
export function colbertKind(inputType: string | undefined): InputType {
  if (inputType === undefined || inputType === "document" || inputType === "search_document" || inputType === "passage") return "document";
  if (inputType === "query" || inputType === "search_query") return "query";
  throw new InvalidInput(`input_type for a multi-vector model must be query or document (or search_query / search_document), got "${inputType}"`, "input_type");
}

/** One input's token vectors: `rows` L2-normalised vectors of `dim` floats, row-major. */
export interface MultiVector {
  data: Float32Array;
  rows: number;
  dim: number;
}

/** In the result cache: the shape (rows, dim), then the row-major vectors. */
export const MULTIVECTOR_CODEC: Codec<MultiVector> = {
  toArrays: (m) => [Int32Array.of(m.rows, m.dim), m.data],
  fromArrays: ([shape, data, ...rest]) =>
    shape instanceof Int32Array && shape.length === 2 && data instanceof Float32Array && shape[0]! * shape[1]! === data.length && rest.length === 0
      ? { rows: shape[0]!, dim: shape[1]!, data }
      : null,
};

/** A tokenized ColBERT input: ids fed to the model, which positions attend, which positions' vectors are kept. */
export interface MultiVectorInput {
  ids: Int32Array;
  attention: Uint8Array;
  keep: Uint8Array;
  /** Real tokens (expansion padding left out), for usage. */
  tokens: number;
}

/** Token ids a model's ColBERT settings name, resolved once at load. */
export interface ColbertTokens {
  queryPrefix: number | null;
  documentPrefix: number | null;
  /** The query expansion token: [MASK] for encoders, EOS for decoder bases. */
  expansion: number;
  skiplist: ReadonlySet<number>;
  /** Special tokens the tokenizer adds before and after a single sequence. */
  before: number;
  after: number;
}

/** The length the tokenizer truncates to: the longest of query and document, less the inserted prefix token. */
export function multiVectorTokenizeLength(cfg: MultiVectorLayout): number {
  return Math.max(cfg.queryLength - (cfg.queryPrefix ? 1 : 0), cfg.documentLength - (cfg.documentPrefix ? 1 : 0));
}

/**
 * Resolves the settings' tokens with the model's tokenizer. A prefix that is not one token of the vocabulary is
 * refused. Skiplist words map like PyLate's convert_tokens_to_ids: a word missing from the vocabulary maps to [UNK].
 */
export function colbertTokens(cfg: MultiVectorLayout, tokenId: (t: string) => number | undefined, specials: { before: number; after: number }, tokenizerConfig: Record<string, unknown>): ColbertTokens {
  const prefix = (t: string | null, what: string) => {
    if (t === null) return null;
    const id = tokenId(t);
    if (id === undefined) throw new ModelLoadError(`the ${what} prefix ${JSON.stringify(t)} is not a token of this tokenizer`);
    return id;
  };
  const named = (k: string) => (typeof tokenizerConfig[k] === "string" ? tokenId(tokenizerConfig[k] as string) : undefined);
  const expansion = named("mask_token") ?? tokenId("[MASK]") ?? named("eos_token");
  if (expansion === undefined && cfg.queryExpansion) throw new ModelLoadError("query expansion needs a mask (or EOS) token, and the tokenizer has neither");
  const unk = named("unk_token");
  const skiplist = new Set<number>();
  for (const w of cfg.skiplistWords) {
    const id = tokenId(w) ?? unk;
    if (id !== undefined) skiplist.add(id);
  }
  return { queryPrefix: prefix(cfg.queryPrefix, "query"), documentPrefix: prefix(cfg.documentPrefix, "document"), expansion: expansion ?? 0, skiplist, ...specials };
}

/**
 * One encoded text (special tokens included, truncated to multiVectorTokenizeLength) as a ColBERT query or
 * document: cut to the kind's length less the prefix (keeping the trailing special tokens), prefix inserted after
 * the first token, queries expanded to query_length with the expansion token.
 */
export function colbertInput(enc: Encoded, kind: InputType, cfg: MultiVectorLayout, tok: ColbertTokens): MultiVectorInput {
  const query = kind === "query";
  const prefix = query ? tok.queryPrefix : tok.documentPrefix;
  const length = (query ? cfg.queryLength : cfg.documentLength) - (prefix !== null ? 1 : 0);
  const src = enc.ids;
  let ids: Int32Array;
  if (src.length <= length) ids = src;
  else {
    ids = new Int32Array(length);
    const body = length - tok.after;
    ids.set(src.subarray(0, body), 0);
    ids.set(src.subarray(src.length - tok.after), body);
  }
  const real = ids.length + (prefix !== null ? 1 : 0);
  const expand = query && cfg.queryExpansion;
  const total = expand ? Math.max(cfg.queryLength, real) : real;
  const out = new Int32Array(total);
  out[0] = ids[0]!;
  let o = 1;
  if (prefix !== null) out[o++] = prefix;
  out.set(ids.subarray(1), o);
  out.fill(tok.expansion, real);
  const attention = new Uint8Array(total);
  attention.fill(1, 0, query && cfg.attendToExpansion ? total : real);
  const keep = new Uint8Array(total);
  if (query) keep.fill(1, 0, expand ? total : real);
  else for (let i = 0; i < real; i++) keep[i] = tok.skiplist.has(out[i]!) ? 0 : 1;
  return { ids: out, attention, keep, tokens: real };
}

/** A padded ColBERT batch and each row's kept positions. */
export interface MultiVectorBatch {
  tensors: BatchTensors;
  keeps: Uint8Array[];
}

export function multiVectorBatches(padId: number): BatchInput<MultiVectorInput, MultiVectorBatch> {
  return {
    lengthOf: (x) => x.ids.length,
    assemble(inputs) {
      const batch = inputs.length;
      let seqLen = 1;
      for (const x of inputs) if (x.ids.length > seqLen) seqLen = x.ids.length;
      const inputIds = new Int32Array(batch * seqLen).fill(padId);
      const attentionMask = new Int32Array(batch * seqLen);
      inputs.forEach((x, b) => {
        inputIds.set(x.ids, b * seqLen);
        for (let i = 0; i < x.ids.length; i++) attentionMask[b * seqLen + i] = x.attention[i]!;
      });
      const tensors: BatchTensors = { batch, seqLen, inputIds, attentionMask, tokenTypeIds: null };
      return { tensors: { tensors, keeps: inputs.map((x) => x.keep) }, padded: batch * seqLen };
    },
  };
}

/** Output names of the token vectors in ColBERT exports. */
export const MULTIVECTOR_OUTPUTS = ["contextual", "last_hidden_state", "token_embeddings", "output"] as const;

export function multiVectorOutput(names: readonly string[]): string {
  const found = MULTIVECTOR_OUTPUTS.find((n) => names.includes(n));
  if (!found) throw new ModelLoadError(`a ColBERT model needs a token-vector output (${MULTIVECTOR_OUTPUTS.join(", ")}); the ONNX model has ${names.join(", ")}`);
  return found;
}

/**
 * PyLate's Dense modules (1_Dense, when the graph stops at the token states) as the session's head on the token-vector
 * output: onnxruntime projects every position in the inference worker right after the model, so the output arrives
 * projected (and 128 instead of 384 floats per token cross to the main thread).
 */
export function colbertHead(outputNames: readonly string[], dense: readonly DenseLayer[]): SessionHead {
  const output = multiVectorOutput(outputNames);
  return { input: output, outputs: { [output]: "y" }, graph: denseGraph(dense) };
}

/** Row b's kept token vectors of a [batch, seq, dim] output (already projected), L2-normalised. */
export function readMultiVector(hidden: Float32Array, dims: readonly number[], b: number, keep: Uint8Array): MultiVector {
  const seq = dims[1]!;
  const dim = dims[2]!;
  let rows = 0;
  for (let i = 0; i < keep.length; i++) rows += keep[i]!;
  const data = new Float32Array(rows * dim);
  let r = 0;
  for (let i = 0; i < keep.length; i++) {
    if (!keep[i]) continue;
    const o = (b * seq + i) * dim;
    data.set(hidden.subarray(o, o + dim), r * dim);
    l2normalize(data.subarray(r * dim, ++r * dim));
  }
  return { data, rows, dim };
}

/** Runs a ColBERT batch and reads each row's kept vectors. */
export function multiVectorRunner(session: ModelSession): Runner<MultiVector, MultiVectorBatch> {
  const output = multiVectorOutput(session.outputNames);
  return {
    async run(t) {
      const out = await session.run(t.tensors, output);
      if (out.dims.length !== 3) throw new Error(`ColBERT expects token vectors [batch, tokens, dim], got [${out.dims.join(", ")}]`);
      return t.keeps.map((keep, b) => readMultiVector(out.data, out.dims, b, keep));
    },
  };
}

/** MaxSim: for each query vector, the best dot product with any document vector, summed. */
export function maxSim(q: MultiVector, d: MultiVector): number {
  if (q.dim !== d.dim) throw new Error(`MaxSim of ${q.dim}- and ${d.dim}-dimensional vectors`);
  const dim = q.dim;
  let total = 0;
  for (let i = 0; i < q.rows; i++) {
    let best = -Infinity;
    const qo = i * dim;
    for (let j = 0; j < d.rows; j++) {
      const dO = j * dim;
      let s = 0;
      for (let k = 0; k < dim; k++) s += q.data[qo + k]! * d.data[dO + k]!;
      if (s > best) best = s;
    }
    if (d.rows > 0) total += best;
  }
  return total;
}

/**
 * How a rerank's documents are cut so that no chunk holds more than maxVectors vectors: [start, end) ranges of at
 * most floor(maxVectors / perDocument) documents (perDocument: the most vectors one document can have), at least one.
 */
export function documentChunks(count: number, perDocument: number, maxVectors: number): Array<[number, number]> {
  const size = Math.max(1, Math.floor(maxVectors / Math.max(1, perDocument)));
  const chunks: Array<[number, number]> = [];
  for (let a = 0; a < count; a += size) chunks.push([a, Math.min(count, a + size)]);
  return chunks;
}
