// The internal requests every API shape parses into, one per job: embed, rerank, classify. The adapters in
// routes/ (OpenAI, Cohere, TEI, HF Inference, Voyage) turn their JSON into these and format the results back;
// model lookup, the result cache and the engine call happen here, once; the inputs are prepared in tasks/inputs.ts.
import { inputKey, SCORE_CODEC, VECTOR_CODEC, type Codec } from "../cache/cache";
import type { Capability } from "../engine/registry";
import type { ColPaliModel, ServedModel } from "../engine/served";
import { CapabilityMismatch, InvalidInput, TooManyVectors } from "../errors";
import { colpaliQueryInput, colpaliQueryText } from "../tasks/colpali";
import { checkHybridOutputs, hybridCodec, hybridKeyMark, type HybridOutput, type HybridResult } from "../tasks/hybrid";
import { mediaFiles } from "./media-inputs";
import { labelScores, type LabelScore } from "../tasks/classify";
import { finishEmbedding, inputPrompt, type PromptRequest } from "../tasks/embed";
import { colbertInput, documentChunks, maxSim, MULTIVECTOR_CODEC, type InputType, type MultiVector } from "../tasks/multivector";
import { sparseDot, sparseKind, SPARSE_CODEC, type SparseVector } from "../tasks/sparse";
import type { QuantizationRanges } from "../model/quantization-ranges";
import { rankResults, type RerankItem } from "../tasks/rerank";
import { wasTruncated, type EncodeOptions, type Encoded, type TruncationDirection } from "../tokenize/encode";
import { cacheHeader, timingHeaders, usageOfCounts, type ServerContext } from "./context";
import { annotateRequest, traced, traceOf } from "../tracing";
import { checkCount, checkText, checkTexts } from "./validate";
import { checkVectorCount, embedInputs as preparedInputs, paramOf, refuseTooLong, type InputChecks, type InputField } from "../tasks/inputs";

export type { InputField };

export type EmbedModel = Extract<ServedModel, { task: "embed" }>;
export type HybridModel = Extract<ServedModel, { task: "hybrid" }>;
export type RerankModel = Extract<ServedModel, { task: "rerank" }>;
export type ClassifyModel = Extract<ServedModel, { task: "classify" }>;
export type SparseModel = Extract<ServedModel, { task: "sparse" }>;
export type MultiVectorModel = Extract<ServedModel, { task: "multivector" }>;

/** What to do with an input longer than the model takes. */
export interface Truncation {
  /** false: refuse it with a 413 that names the input and its token count. */
  truncate: boolean;
  direction: TruncationDirection;
}
export const TRUNCATE_RIGHT: Truncation = { truncate: true, direction: "right" };

export interface Usage {
  prompt_tokens: number;
  total_tokens: number;
}

/** What every job reports besides its results. */
export interface JobReport {
  usage: Usage;
  /** Time spent tokenizing this job's inputs (those the cache did not answer). */
  tokenizeMs: number;
  queueMs: number;
  inferenceMs: number;
  /** Indices of the inputs cut to the model's length (among those computed: cache hits are not re-tokenized). */
  truncated: number[];
  /** Inputs the result cache answered. */
  hits: number;
}

type Headers = { headers: Record<string, string | number> };

/**
 * The headers every inference response carries: timings, x-cache-hits (with a cache), and x-truncated-inputs:
 * the indices of the inputs cut to the model's length, comma-separated, when any were.
 */
export function reportHeaders(ctx: ServerContext, set: Headers, t0: number, out: JobReport): void {
  timingHeaders(set, out.tokenizeMs, out.queueMs, out.inferenceMs, performance.now() - t0);
  cacheHeader(set, ctx, out.hits);
  if (out.truncated.length) set.headers["x-truncated-inputs"] = out.truncated.join(",");
}

/** The model for a job, held for the request (`signal`: the request's) until it is answered. */
export function lookupModel(ctx: ServerContext, name: string | undefined, capability: Capability, signal: AbortSignal): Promise<ServedModel> {
  return ctx.registry.lookup(name, capability, undefined, signal);
}

type Submit<R> = (inputs: Encoded[], signal: AbortSignal, indices: number[]) => Promise<{ results: R[]; queueMs: number; inferenceMs: number; tokens?: number[] }>;

/**
 * Runs a job's inputs through the result cache and the engine. With truncate false every input is tokenized first,
 * so a too-long one is refused even when an earlier, truncated result is cached; inputs that fit were tokenized
 * whole (nothing is cut from a text that fits) and are run as they are.
 */
async function cachedRun<R>(
  ctx: ServerContext,
  model: ServedModel,
  keys: string[],
  codec: Codec<R>,
  encode: (indices: number[], options: EncodeOptions) => Promise<Encoded[]>,
  t: Truncation,
  field: InputField,
  signal: AbortSignal,
  /**
   * How the computed inputs reach the engine (`indices`: their places in the request); the model's engine by
   * default. `tokens` replaces the token counts of usage (default: the encoded lengths).
   */
  submit?: Submit<R>,
): Promise<{ results: R[]; report: JobReport }> {
  const all = keys.map((_, i) => i);
  const trace = traceOf(signal);
  if (trace) annotateRequest(signal, { "infinity.model": model.name, "infinity.inputs": keys.length });
  let tokenizeMs = 0;
  const tokenize = (indices: number[]) =>
    traced(trace, "tokenize", { "infinity.inputs": indices.length }, async () => {
      const started = performance.now();
      try {
        return await encode(indices, { direction: t.direction });
      } finally {
        tokenizeMs += performance.now() - started;
      }
    });
  let pre: Encoded[] | null = null;
  if (!t.truncate) {
    pre = await tokenize(all);
    refuseTooLong(model, pre, field);
  }
  const truncated: number[] = [];
  const engine = model.engine as unknown as { submit(inputs: Encoded[], signal: AbortSignal): Promise<{ results: R[]; queueMs: number; inferenceMs: number }> };
  const run: Submit<R> = submit ?? ((inputs, s) => engine.submit(inputs, s));
  const out = await ctx.cache.through(model.name, keys, codec, async (missing) => {
    const inputs = pre ? missing.map((i) => pre[i]!) : await tokenize(missing);
    inputs.forEach((e, k) => wasTruncated(e) && truncated.push(missing[k]!));
    const done = await run(inputs, signal, missing);
    return { ...done, tokens: done.tokens ?? inputs.map((e) => e.ids.length) };
  }, trace);
  if (truncated.length) ctx.metrics.truncated.inc({ model: model.name }, truncated.length);
  if (trace) annotateRequest(signal, { "infinity.cache.hits": out.hits, "infinity.truncated_inputs": truncated.length });
  truncated.sort((a, b) => a - b);
  return { results: out.results, report: { usage: usageOfCounts(out.tokens), tokenizeMs, queueMs: out.queueMs, inferenceMs: out.inferenceMs, truncated, hits: out.hits } };
}

/** Checks a Matryoshka size: 0, null or absent means the model's full size. */
export function checkDimensions(model: ServedModel, dimensions: number | null | undefined, param: string): number | undefined {
  if (dimensions === undefined || dimensions === null || dimensions === 0) return undefined;
  const hidden = model.layout.hiddenSize;
  if (!Number.isInteger(dimensions) || dimensions < 1 || (hidden !== null && dimensions > hidden)) {
    throw new InvalidInput(`\`${param}\` must be between 1 and ${hidden ?? "the model's dimension"}, got ${dimensions}`, param);
  }
  return dimensions;
}

/**
 * The calibration ranges int8/uint8 use in this request: the model's (--quantization-ranges), which describe its
 * full-size vectors, so a Matryoshka size other than that is refused with them.
 */
export function quantizationRangesFor(model: ServedModel, types: readonly string[], dimensions: number | null | undefined, param: string): QuantizationRanges | null {
  const ranges = model.quantizationRanges;
  if (!ranges || !types.some((t) => t === "int8" || t === "uint8")) return ranges;
  if (dimensions && dimensions !== ranges.min.length) {
    throw new InvalidInput(
      `model "${model.name}" quantizes int8/uint8 with calibration ranges of its full ${ranges.min.length} dimensions; \`${param}\` cannot cut them`,
      param,
    );
  }
  return ranges;
}

export interface EmbedJob {
  model: string | undefined;
  /** Texts, or token-id sequences of the model's own vocabulary. */
  inputs: { texts: string | string[] } | { ids: number[][] };
  field: InputField;
  promptName?: string;
  /** query / document / search_query / ...: picks the model's prompt for that kind of input (tasks/embed.ts). */
  inputType?: string;
  /** A task adapter by name (Jina v3). */
  task?: string;
  truncation: Truncation;
  /** Matryoshka size; 0/null/absent: full size. */
  dimensions?: number | null;
  dimensionsParam?: string;
  /** L2-normalise (default); false returns the pooled vector as the model computed it. */
  normalize?: boolean;
}

export interface EmbedOutcome extends JobReport {
  model: EmbedModel | HybridModel;
  vectors: Float32Array[];
}

/** The server's limits as input checks. */
function checksOf(ctx: ServerContext): InputChecks {
  return { texts: (value, field) => checkTexts(value, field, ctx.config), count: (n, field) => checkCount(n, field, ctx.config) };
}

/** Texts or token ids of an embedding request, checked against the server's limits (tasks/inputs.ts). */
function embedInputs(ctx: ServerContext, model: TextEmbedModel, inputs: EmbedJob["inputs"], field: InputField, request: PromptRequest, keySuffix = "") {
  return preparedInputs(checksOf(ctx), model, inputs, field, request, keySuffix);
}

/** Models that embed text: dense embedders, sparse and multi-vector encoders. */
export type TextEmbedModel = Extract<ServedModel, { task: "embed" | "sparse" | "multivector" | "hybrid" }>;

/** Dense vectors of a hybrid (bge-m3) model: its engine asked for no lexical or multi-vector output. */
export function hybridDense(model: HybridModel) {
  return async (inputs: Encoded[], signal: AbortSignal) => {
    const out = await model.engine.submit(inputs.map((e) => ({ ...e, sparse: false, multiVector: false })), signal);
    return { ...out, results: out.results.map((r) => r.dense) };
  };
}

/** Texts, or token ids (one list, or a list of lists), as an embedding request sends them. */
function inputsOf(input: unknown): EmbedJob["inputs"] {
  return Array.isArray(input) && input.length > 0 && typeof input[0] !== "string"
    ? { ids: typeof input[0] === "number" ? [input as number[]] : (input as number[][]) }
    : { texts: input as string | string[] };
}

/** The texts or ids of a sparse or multi-vector request, with its prompt, always cut to the model's length. */
export interface TokenOutputJob {
  input: unknown;
  /** The request field holding the inputs (`input`, `inputs`). */
  field: string;
  request: PromptRequest;
}

export interface SparseOutcome extends JobReport {
  /** Unpruned: top_k / threshold are applied after the cache. */
  vectors: SparseVector[];
}

/** A hybrid (bge-m3) model's lexical weights alone. */
function hybridSparse(model: HybridModel): Submit<SparseVector> {
  return async (inputs, signal) => {
    const out = await model.engine.submit(inputs.map((e) => ({ ...e, sparse: true, multiVector: false })), signal);
    return { ...out, results: out.results.map((r) => r.sparse!) };
  };
}

/**
 * Sparse vectors (SPLADE, bge-m3's lexical weights, an inference-free model's documents), per input through the
 * result cache. An inference-free model (a Router SparseEncoder) encodes queries (input_type query, or its default
 * route) from its static per-token weights without a model run: those are not cached (a lookup costs less than a
 * cache round trip), and its documents are keyed as documents, so the two encodings never share an entry.
 */
export async function runSparse(ctx: ServerContext, model: SparseModel | HybridModel, job: TokenOutputJob, signal: AbortSignal): Promise<SparseOutcome> {
  if (model.task === "hybrid") checkHybridOutputs(["sparse"], model.hybrid.layout, model.name);
  const field = { name: job.field, single: typeof job.input === "string" };
  let suffix = ":sparse";
  if (model.task === "sparse" && model.sparseQuery) {
    if (sparseKind(job.request.inputType, model.layout.sparse!.defaultKind) === "query") return inferenceFreeQueries(ctx, model, job);
    suffix = ":sparse-document";
  }
  const { keys, encode } = embedInputs(ctx, model, inputsOf(job.input), field, job.request, suffix);
  const submit = model.task === "hybrid" ? hybridSparse(model) : undefined;
  const { results, report } = await cachedRun(ctx, model, keys, SPARSE_CODEC, encode, TRUNCATE_RIGHT, field, signal, submit);
  return { vectors: results, ...report };
}

/** Queries of an inference-free sparse model: its static weights of the query's tokens (no special tokens). */
async function inferenceFreeQueries(ctx: ServerContext, model: SparseModel, job: TokenOutputJob): Promise<SparseOutcome> {
  const input = job.input;
  if (Array.isArray(input) && input.length > 0 && typeof input[0] !== "string") {
    throw new InvalidInput("token-id input is not supported for the queries of an inference-free sparse model (they are tokenized without special tokens): send text", job.field);
  }
  const texts = checkTexts(input as string | string[], job.field, ctx.config);
  const { prompt } = inputPrompt(model.layout, job.request);
  const started = performance.now();
  const out = await model.sparseQuery!.encode(texts.map((t) => prompt + t));
  // No inference: tokenizing and looking up the static weights is all the work.
  return { vectors: out.vectors, usage: usageOfCounts(out.tokens), tokenizeMs: performance.now() - started, queueMs: 0, inferenceMs: 0, truncated: [], hits: 0 };
}

/**
 * Multi-vector (ColBERT) runs: each input prepared as a query or a document; usage counts real tokens. The
 * vectors of what is computed are known from the tokens, so a request over `maxVectors` is refused before it runs.
 */
function multiVectorSubmit(model: MultiVectorModel, kindOf: (index: number) => InputType, maxVectors: number, param: string): Submit<MultiVector> {
  const colbert = model.colbert!;
  return async (encoded, signal, indices) => {
    const inputs = encoded.map((e, k) => colbertInput(e, kindOf(indices[k]!), colbert.layout, colbert.tokens));
    let vectors = 0;
    for (const x of inputs) for (let i = 0; i < x.keep.length; i++) vectors += x.keep[i]!;
    checkVectorCount(vectors, maxVectors, param);
    return { ...(await model.engine.submit(inputs, signal)), tokens: inputs.map((x) => x.tokens) };
  };
}

export interface MultiVectorOutcome extends JobReport {
  matrices: MultiVector[];
}

/** Multi-vector (ColBERT) embeddings as queries or documents, per input through the result cache. */
export async function runMultiVector(ctx: ServerContext, model: MultiVectorModel, job: TokenOutputJob & { kind: InputType }, signal: AbortSignal): Promise<MultiVectorOutcome> {
  const field = { name: job.field, single: typeof job.input === "string" };
  const max = ctx.config.maxVectorsPerRequest;
  const { keys, encode } = embedInputs(ctx, model, inputsOf(job.input), field, job.request, `:multivector-${job.kind}`);
  const submit = multiVectorSubmit(model, () => job.kind, max, job.field);
  const { results, report } = await cachedRun(ctx, model, keys, MULTIVECTOR_CODEC, encode, TRUNCATE_RIGHT, field, signal, submit);
  // Cached inputs count too: the answer stays within the limit (what ran was already bounded above).
  let rows = 0;
  for (const m of results) rows += m.rows;
  checkVectorCount(rows, max, job.field);
  return { matrices: results, ...report };
}

export interface HybridOutcome extends JobReport {
  /** Per input the asked outputs (dense raw: normalised and cut by the caller); the others empty. */
  results: HybridResult[];
}

/**
 * Outputs of a hybrid (bge-m3) model other than dense alone, from one run per batch, per input through the result
 * cache (keyed by which outputs were asked: see hybridKeyMark). The multi-vector answer is bounded like a ColBERT one
 * (one vector per real token after CLS): what runs is checked before it runs, the whole answer after.
 */
export async function runHybrid(ctx: ServerContext, model: HybridModel, job: TokenOutputJob & { outputs: readonly HybridOutput[] }, signal: AbortSignal): Promise<HybridOutcome> {
  checkHybridOutputs(job.outputs, model.hybrid.layout, model.name);
  const field = { name: job.field, single: typeof job.input === "string" };
  const sparse = job.outputs.includes("sparse");
  const multiVector = job.outputs.includes("multi_vector");
  const max = ctx.config.maxVectorsPerRequest;
  const { keys, encode } = embedInputs(ctx, model, inputsOf(job.input), field, job.request, hybridKeyMark(job.outputs));
  const submit: Submit<HybridResult> = async (inputs, s) => {
    if (multiVector) checkVectorCount(inputs.reduce((n, e) => n + Math.max(0, e.ids.length - 1), 0), max, job.field);
    return model.engine.submit(inputs.map((e) => ({ ...e, sparse, multiVector })), s);
  };
  const { results, report } = await cachedRun(ctx, model, keys, hybridCodec(job.outputs), encode, TRUNCATE_RIGHT, field, signal, submit);
  if (multiVector) checkVectorCount(results.reduce((n, r) => n + r.multiVector!.rows, 0), max, job.field);
  return { results, ...report };
}

export async function runEmbed(ctx: ServerContext, job: EmbedJob, signal: AbortSignal): Promise<EmbedOutcome> {
  const found = await lookupModel(ctx, job.model, "embed", signal);
  if (found.task !== "embed" && found.task !== "hybrid") {
    throw new CapabilityMismatch(`model "${found.name}" is a ${found.task} model: its vectors are served by /embeddings (and /embed_sparse for sparse models), not this route`, "model");
  }
  const model = found;
  const dimensions = checkDimensions(model, job.dimensions, job.dimensionsParam ?? "dimensions");
  const left = job.truncation.direction === "left" ? "-left" : "";
  const { keys, encode } = embedInputs(ctx, model, job.inputs, job.field, { promptName: job.promptName, inputType: job.inputType, task: job.task }, left);
  const submit = model.task === "hybrid" ? hybridDense(model) : undefined;
  const { results, report } = await cachedRun(ctx, model, keys, VECTOR_CODEC, encode, job.truncation, job.field, signal, submit);
  const vectors = results.map((v) => finishEmbedding(v, dimensions, job.normalize ?? true, model.layout.matryoshkaLayerNorm));
  return { model, vectors, ...report };
}

/** TEI's /embed_all: per-token states of each input (texts or model-vocabulary ids), prompts as on /embed. */
export type EmbedAllJob = Pick<EmbedJob, "model" | "inputs" | "field" | "promptName" | "inputType" | "truncation">;

export interface EmbedAllOutcome extends JobReport {
  model: EmbedModel;
  /** Per input: one row of the model's hidden size per real token. */
  tokens: MultiVector[];
}

/**
 * Per-token hidden states. Served by dense embedders whose export gives last_hidden_state; the answer's size is
 * bounded by --max-vectors-per-request before anything runs. Not cached (results are matrices).
 */
export async function runEmbedAll(ctx: ServerContext, job: EmbedAllJob, signal: AbortSignal): Promise<EmbedAllOutcome> {
  const found = await ctx.registry.lookup(job.model, "embed", "/embed_all", signal);
  if (found.task !== "embed" || typeof found.tokens === "string") {
    const why =
      found.task === "embed"
        ? (found.tokens as string)
        : found.task === "sparse"
          ? "it is a sparse model: its token weights are served by /embed_sparse"
          : found.task === "multivector"
            ? "it is a multi-vector (ColBERT) model: its token vectors are served by /embeddings"
            : found.task === "hybrid"
              ? 'it is a bge-m3 (hybrid) model: its token vectors are served by /embeddings with output "multi_vector"'
              : `it is a ${found.task} model`;
    throw new CapabilityMismatch(`model "${found.name}" cannot serve /embed_all: ${why}`, "model");
  }
  const model = found;
  const engine = found.tokens;
  const { encode, keys } = embedInputs(ctx, model, job.inputs, job.field, { promptName: job.promptName, inputType: job.inputType });
  const t = job.truncation;
  const started = performance.now();
  const encoded = await encode(keys.map((_, i) => i), { direction: t.direction });
  const tokenizeMs = performance.now() - started;
  if (!t.truncate) refuseTooLong(model, encoded, job.field);
  let vectors = 0;
  for (const e of encoded) vectors += e.ids.length;
  const max = ctx.config.maxVectorsPerRequest;
  if (vectors > max) {
    throw new TooManyVectors(`this request would return ${vectors} token vectors; at most ${max} are returned per request (--max-vectors-per-request): send fewer or shorter inputs`, job.field.name);
  }
  const truncated: number[] = [];
  encoded.forEach((e, i) => wasTruncated(e) && truncated.push(i));
  if (truncated.length) ctx.metrics.truncated.inc({ model: model.name }, truncated.length);
  const out = await engine.submit(encoded, signal);
  const usage = usageOfCounts(encoded.map((e) => e.ids.length));
  return { model, tokens: out.results, usage, tokenizeMs, queueMs: out.queueMs, inferenceMs: out.inferenceMs, truncated, hits: 0 };
}

export interface RerankJob {
  model: string | undefined;
  query: string;
  documents: string[];
  /** The request field holding the documents (`documents`, `texts`). */
  field: string;
  truncation: Truncation;
  topN?: number;
  topNParam?: string;
  /** Logits instead of sigmoid scores. */
  rawScores: boolean;
  /** LLM rerankers (Qwen3-Reranker): the task instruction in their prompt. */
  instruction?: string;
}

export interface RerankOutcome extends JobReport {
  /** A reranker, or an embedding model ranking by similarity. */
  model: ServedModel;
  ranked: RerankItem[];
}

export async function runRerank(ctx: ServerContext, job: RerankJob, signal: AbortSignal): Promise<RerankOutcome> {
  const served = await lookupModel(ctx, job.model, "rerank", signal);
  checkText(job.query, "query", ctx.config);
  if (job.documents.length === 0) throw new InvalidInput(`\`${job.field}\` must not be an empty list`, job.field);
  checkCount(job.documents.length, job.field, ctx.config);
  // A ColPali model's documents are images (data: URIs or URLs), checked when they are fetched.
  const imageDocs = served.task === "multivector" && served.colpali !== null;
  if (!imageDocs) job.documents.forEach((d, i) => checkText(d, `${job.field}[${i}]`, ctx.config));
  if (job.topN !== undefined && job.topN < 1) {
    const p = job.topNParam ?? "top_n";
    throw new InvalidInput(`\`${p}\` must be at least 1, got ${job.topN}`, p);
  }
  // Cached per (query, document) pair: a repeated query over unchanged documents runs only the new ones. Pairs are
  // cut longest-first, so the direction does not apply.
  if (served.task !== "rerank") {
    // An embedding model ranks by similarity (cosine, sparse dot product, MaxSim): raw scores, no sigmoid.
    if (served.task === "classify") throw new InvalidInput(`model "${served.name}" is a classifier`, "model");
    if (job.instruction !== undefined) throw new InvalidInput("`instruction` applies to LLM rerankers (Qwen3-Reranker) only", "instruction");
    const { scores, report } = await similarityScores(served, job.query, job.documents, ctx, signal, job.field);
    return { model: served, ranked: rankResults(scores, job.topN, true), ...report };
  }
  const model: RerankModel = served;
  if (job.instruction !== undefined && !model.layout.rerankTemplate) {
    throw new InvalidInput("`instruction` applies to LLM rerankers (Qwen3-Reranker) only; this model is a cross-encoder", "instruction");
  }
  const instruction = job.instruction;
  const keys = job.documents.map((d) =>
    instruction !== undefined ? inputKey(model.cacheScope, "pair+instruction", instruction, job.query, d) : inputKey(model.cacheScope, "pair", job.query, d),
  );
  const docs = job.documents;
  const encode = (indices: number[], options: EncodeOptions) =>
    model.encode(indices.map((i) => docs[i]!), indices.map(() => job.query), instruction !== undefined ? { instruction } : {});
  const { results, report } = await cachedRun(ctx, model, keys, SCORE_CODEC, encode, job.truncation, { name: job.field, single: false }, signal);
  return { model, ranked: rankResults(results, job.topN, job.rawScores), ...report };
}

export interface ClassifyJob {
  model: string | undefined;
  /** Texts, or [first, second] pairs (sequence-pair classifiers). */
  inputs: Array<string | [string, string]>;
  field: InputField;
  truncation: Truncation;
  rawScores: boolean;
}

export interface ClassifyOutcome extends JobReport {
  model: ClassifyModel;
  scores: LabelScore[][];
}

export async function runClassify(ctx: ServerContext, job: ClassifyJob, signal: AbortSignal): Promise<ClassifyOutcome> {
  const model = (await lookupModel(ctx, job.model, "classify", signal)) as ClassifyModel;
  if (job.inputs.length === 0) throw new InvalidInput(`\`${job.field.name}\` must not be an empty list`, job.field.name);
  checkCount(job.inputs.length, job.field.name, ctx.config);
  job.inputs.forEach((x, i) => {
    const param = paramOf(job.field, i);
    if (Array.isArray(x)) x.forEach((t, j) => checkText(t, `${param}[${j}]`, ctx.config));
    else checkText(x, param, ctx.config);
  });
  const left = job.truncation.direction === "left" ? "-left" : "";
  const keys = job.inputs.map((x) => (Array.isArray(x) ? inputKey(model.cacheScope, "pair", x[0], x[1]) : inputKey(model.cacheScope, "text" + left, "", x)));
  const encode = async (indices: number[], options: EncodeOptions): Promise<Encoded[]> => {
    // A batch may mix single texts and pairs: encode each kind apart and put them back in order.
    const singles = indices.filter((i) => !Array.isArray(job.inputs[i]));
    const pairs = indices.filter((i) => Array.isArray(job.inputs[i]));
    const [a, b] = await Promise.all([
      singles.length ? model.encode(singles.map((i) => job.inputs[i] as string), undefined, options) : [],
      pairs.length
        ? model.encode(pairs.map((i) => (job.inputs[i] as [string, string])[1]), pairs.map((i) => (job.inputs[i] as [string, string])[0]))
        : [],
    ]);
    const byIndex = new Map<number, Encoded>();
    singles.forEach((i, k) => byIndex.set(i, a[k]!));
    pairs.forEach((i, k) => byIndex.set(i, b[k]!));
    return indices.map((i) => byIndex.get(i)!);
  };
  const { results, report } = await cachedRun(ctx, model, keys, VECTOR_CODEC, encode, job.truncation, job.field, signal);
  return { model, scores: results.map((logits) => labelScores(logits, model.layout.labels, job.rawScores)), ...report };
}

/** Models that rank documents by comparing embeddings rather than with a cross-encoder. */
export type SimilarityModel = TextEmbedModel;

/**
 * Scores of documents against a query by their embeddings, for /rerank with an embedding model: the query encoded
 * as a query (its prompt, ColBERT's query encoding), the documents as documents, in one engine submission of
 * whatever the result cache does not hold (entries shared with /embeddings and /embed_sparse of the same inputs;
 * ColPali's image documents are not cached). Dense: cosine of the L2-normalised vectors; sparse: dot product of the
 * weights; multi-vector: MaxSim; hybrid (bge-m3): cosine of the dense vectors. x-truncated-inputs names documents.
 */
export async function similarityScores(model: SimilarityModel, query: string, docs: string[], ctx: ServerContext, signal: AbortSignal, field = "documents"): Promise<{ scores: number[]; report: JobReport }> {
  const each = <T>(results: T[], score: (a: T, b: T) => number) => results.slice(1).map((r) => score(results[0]!, r));
  if (model.task === "sparse" && model.sparseQuery) {
    // Inference-free: the query from its static weights, the documents through the model (and the cache).
    const q = await runSparse(ctx, model, { input: [query], field: "query", request: { inputType: "query" } }, signal);
    const { vectors, ...d } = await runSparse(ctx, model, { input: docs, field, request: { inputType: "document" } }, signal);
    return { scores: vectors.map((v) => sparseDot(q.vectors[0]!, v)), report: { ...d, usage: usageOfCounts([q.usage.prompt_tokens, d.usage.prompt_tokens]) } };
  }
  if (model.task === "multivector" && model.colpali) {
    // ColPali: the query as a query, the documents as images, fetched at once (their bytes are bounded by
    // --media-max-bytes) and then preprocessed, run and scored a chunk at a time.
    const cp = { ...model, colpali: model.colpali };
    const [q, files] = await Promise.all([
      colpaliEmbed(ctx, cp, "text", [query], { name: "query", single: true }, signal, null),
      mediaFiles(docs, "image", ctx, signal, field),
    ]);
    const scores: number[] = [];
    const tokens = [...q.tokens];
    let queueMs = q.queueMs;
    let inferenceMs = q.inferenceMs;
    for (const [a, b] of documentChunks(files.length, cp.colpali.maxImageVectors, ctx.config.maxVectorsPerRequest)) {
      const d = await colpaliImages(cp, files.slice(a, b), signal, field, null, a);
      for (const m of d.results) scores.push(maxSim(q.results[0]!, m));
      tokens.push(...d.tokens);
      queueMs += d.queueMs;
      inferenceMs += d.inferenceMs;
    }
    // Images are prepared, not tokenized; the query's tokenization is part of ColPali's run (not timed apart).
    return { scores, report: { usage: usageOfCounts(tokens), tokenizeMs: 0, queueMs, inferenceMs, truncated: [], hits: 0 } };
  }
  const suffix = (kind: InputType) => (model.task === "sparse" ? ":sparse" : model.task === "multivector" ? `:multivector-${kind}` : "");
  const q = embedInputs(ctx, model, { texts: [query] }, { name: "query", single: true }, { inputType: "query" }, suffix("query"));
  const d = embedInputs(ctx, model, { texts: docs }, { name: field, single: false }, { inputType: "document" }, suffix("document"));
  const keys = [...q.keys, ...d.keys];
  // Index 0 is the query; `indices` ascend, so it comes first when it is among them.
  const encode = async (indices: number[], options: EncodeOptions) => {
    const rest = indices.filter((i) => i > 0).map((i) => i - 1);
    const [qe, de] = await Promise.all([indices[0] === 0 ? q.encode([0], options) : [], rest.length ? d.encode(rest, options) : []]);
    return [...qe, ...de];
  };
  const inputField = { name: field, single: false };
  const finish = <R>(out: { results: R[]; report: JobReport }, score: (a: R, b: R) => number) => ({
    scores: each(out.results, score),
    report: { ...out.report, truncated: out.report.truncated.filter((i) => i > 0).map((i) => i - 1) },
  });
  if (model.task === "multivector") return multiVectorScores(ctx, model, q, d, inputField, signal);
  if (model.task === "sparse") return finish(await cachedRun(ctx, model, keys, SPARSE_CODEC, encode, TRUNCATE_RIGHT, inputField, signal), sparseDot);
  // bge-m3: dense cosine, as FlagEmbedding's default dense score.
  const submit = model.task === "hybrid" ? hybridDense(model) : undefined;
  const out = await cachedRun(ctx, model, keys, VECTOR_CODEC, encode, TRUNCATE_RIGHT, inputField, signal, submit);
  return finish({ ...out, results: out.results.map((v) => finishEmbedding(v, undefined)) }, dot);
}

type EmbedInputs = ReturnType<typeof embedInputs>;

/**
 * MaxSim of a ColBERT query against each document. The documents are computed (or read from the result cache) and
 * scored a chunk at a time, each chunk at most --max-vectors-per-request vectors (documentChunks), so the vectors held
 * at once stay bounded whatever the request's size; the query runs beside the first chunk.
 */
async function multiVectorScores(ctx: ServerContext, model: MultiVectorModel, q: EmbedInputs, d: EmbedInputs, field: InputField, signal: AbortSignal): Promise<{ scores: number[]; report: JobReport }> {
  const submitAs = (kind: InputType) => multiVectorSubmit(model, () => kind, Number.POSITIVE_INFINITY, field.name);
  const run = (e: EmbedInputs, keys: string[], offset: number, f: InputField, kind: InputType) =>
    cachedRun(ctx, model, keys, MULTIVECTOR_CODEC, (indices, o) => e.encode(indices.map((i) => i + offset), o), TRUNCATE_RIGHT, f, signal, submitAs(kind));
  // A ColBERT document has at most document_length vectors (fewer after the skiplist).
  const perDocument = model.colbert?.layout.documentLength ?? model.layout.maxLength;
  const queryRun = run(q, q.keys, 0, { name: "query", single: true }, "query");
  let query: MultiVector | undefined;
  const scores: number[] = [];
  const report: JobReport = { usage: usageOfCounts([]), tokenizeMs: 0, queueMs: 0, inferenceMs: 0, truncated: [], hits: 0 };
  const add = (r: JobReport, queueMs: number) => {
    report.usage = usageOfCounts([report.usage.prompt_tokens, r.usage.prompt_tokens]);
    report.tokenizeMs += r.tokenizeMs;
    report.queueMs += queueMs;
    report.inferenceMs += r.inferenceMs;
    report.hits += r.hits;
  };
  for (const [a, b] of documentChunks(d.keys.length, perDocument, ctx.config.maxVectorsPerRequest)) {
    const chunk = run(d, d.keys.slice(a, b), a, field, "document");
    let out: Awaited<typeof chunk>;
    if (query === undefined) {
      // The query runs beside the first chunk: its queue time overlaps that chunk's.
      const [qOut, first] = await Promise.all([queryRun, chunk]);
      query = qOut.results[0]!;
      add(qOut.report, 0);
      add(first.report, Math.max(qOut.report.queueMs, first.report.queueMs));
      out = first;
    } else {
      out = await chunk;
      add(out.report, out.report.queueMs);
    }
    for (const i of out.report.truncated) report.truncated.push(i + a);
    for (const m of out.results) scores.push(maxSim(query, m));
  }
  return { scores, report };
}

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

/**
 * ColPali / ColModernVBERT vectors of image files: preprocessed in the media workers, counted against maxVectors
 * (null: no bound) before they run; tokens: each image's prompt tokens (its vectors).
 */
async function colpaliImages(model: ColPaliServed, files: Uint8Array[], signal: AbortSignal, field: string, maxVectors: number | null, firstIndex = 0) {
  const prepared = await model.colpali.prepare(files, field, firstIndex);
  if (maxVectors !== null) checkVectorCount(prepared.vectors.reduce((a, b) => a + b, 0), maxVectors, field);
  return { ...(await prepared.run(signal)), tokens: prepared.vectors };
}

export type ColPaliServed = Extract<ServedModel, { task: "multivector" }> & { colpali: ColPaliModel };

/**
 * ColPali vectors of texts (as queries) or images (data: URIs or URLs, preprocessed in the media workers), bounded
 * by maxVectors (null: not returned, no bound). tokens: per input, the tokens the model read (an image's are its
 * image tokens plus its prompt).
 */
export async function colpaliEmbed(
  ctx: ServerContext,
  model: ColPaliServed,
  modality: "text" | "image",
  input: unknown,
  field: InputField,
  signal: AbortSignal,
  maxVectors: number | null,
): Promise<{ results: MultiVector[]; tokens: number[]; queueMs: number; inferenceMs: number }> {
  const cp = model.colpali;
  if (modality === "image") {
    const files = await mediaFiles(input, "image", ctx, signal, field.name);
    // ColPali's images all give the same count: a request past the bound is refused before preprocessing.
    if (maxVectors !== null && cp.layout.kind === "paligemma") checkVectorCount(files.length * cp.maxImageVectors, maxVectors, field.name);
    return colpaliImages(model, files, signal, field.name, maxVectors);
  }
  if (Array.isArray(input) && input.some((x) => typeof x !== "string")) {
    throw new InvalidInput(`\`${field.name}\` of a ColPali or ColModernVBERT model must be text (queries) or, with modality "image", images`, field.name);
  }
  const texts = checkTexts(input as string | string[], field.name, ctx.config);
  const encoded = await model.encode(texts.map((t) => colpaliQueryText(cp.layout, cp.tokens, t)));
  const inputs = encoded.map((e, i) => colpaliQueryInput(e, cp.tokens, model.layout.maxLength, paramOf(field, i)));
  if (maxVectors !== null) checkVectorCount(inputs.reduce((n, x) => n + x.tokens, 0), maxVectors, field.name);
  const out = await model.engine.submit(inputs, signal);
  return { ...out, tokens: inputs.map((x) => x.tokens) };
}
