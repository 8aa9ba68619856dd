// The internal requests every API shape parses into, one per job: embed, rerank, classify. The adapters in
// routes/ (OpenAI, Cohere, TEI, HF Inference, Voyage) turn their JSON into these and format the results back;
// model lookup, input checks, prompts, truncation, the result cache and the engine call happen here, once.
import { inputKey, SCORE_CODEC, VECTOR_CODEC, type Codec } from "../cache/cache";
import type { Capability, ColPaliModel, ServedModel } from "../engine/registry";
import { CapabilityMismatch, InputTooLong, InvalidInput, TooManyVectors } from "../errors";
import { colpaliQueryInput, colpaliQueryText } from "../tasks/colpali";
import { mediaFiles } from "./media-inputs";
import { labelScores, type LabelScore } from "../tasks/classify";
import { finishEmbedding, inputPrompt, type PromptRequest } from "../tasks/embed";
import { colbertInput, maxSim, type MultiVector } from "../tasks/multivector";
import { sparseDot, sparseKind, type SparseVector } from "../tasks/sparse";
import type { QuantizationRanges } from "../tasks/quantize";
import { rankResults, type RerankItem } from "../tasks/rerank";
import { wasTruncated, type EncodeOptions, type Encoded, type TruncationDirection } from "../tokenize/encode";
import { cacheHeader, timingHeaders, usageOfCounts, type ServerContext } from "./context";
import { checkCount, checkText, checkTexts } from "./validate";

export type EmbedModel = Extract<ServedModel, { task: "embed" }>;
export type HybridModel = Extract<ServedModel, { task: "hybrid" }>;
export type RerankModel = Extract<ServedModel, { task: "rerank" }>;
export type ClassifyModel = Extract<ServedModel, { task: "classify" }>;

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
  queueMs: number;
  inferenceMs: number;
  /** Indices of the inputs cut to the model's length (among those computed: cache hits are not re-tokenized). */
  truncated: number[];
  /** Inputs the result cache answered. */
  hits: number;
}

/** Where the inputs came from in the request, for error messages: `input`, `input[3]`. */
export interface InputField {
  name: string;
  /** A single value rather than a list: errors name the field itself. */
  single: boolean;
}

const paramOf = (f: InputField, i: number) => (f.single ? f.name : `${f.name}[${i}]`);

type Headers = { headers: Record<string, string | number> };

/**
 * The headers every inference response carries: timings, x-cache-hits (with a cache), and x-truncated-inputs:
 * the indices of the inputs cut to the model's length, comma-separated, when any were.
 */
export function reportHeaders(ctx: ServerContext, set: Headers, t0: number, out: JobReport): void {
  timingHeaders(set, out.queueMs, out.inferenceMs, performance.now() - t0);
  cacheHeader(set, ctx, out.hits);
  if (out.truncated.length) set.headers["x-truncated-inputs"] = out.truncated.join(",");
}

export function lookupModel(ctx: ServerContext, name: string | undefined, capability: Capability): Promise<ServedModel> {
  return ctx.registry.lookup(name, capability);
}

/** With truncate false, the first input that does not fit is a 413 naming it and its token count. */
function refuseTooLong(model: ServedModel, encoded: readonly Encoded[], field: InputField): void {
  const i = encoded.findIndex(wasTruncated);
  if (i < 0) return;
  const param = paramOf(field, i);
  throw new InputTooLong(
    `\`${param}\` has ${encoded[i]!.fullLength} tokens; model "${model.name}" takes at most ${model.layout.maxLength} (allow truncation to have it cut)`,
    param,
  );
}

/**
 * Runs a job's inputs through the result cache and the engine. With truncate false every input is tokenized first
 * (exactly), so a too-long one is refused even when an earlier, truncated result is cached.
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
  /** How the inputs reach the engine; the model's engine by default. */
  submit?: (inputs: Encoded[], signal: AbortSignal) => Promise<{ results: R[]; queueMs: number; inferenceMs: number }>,
): Promise<{ results: R[]; report: JobReport }> {
  const all = keys.map((_, i) => i);
  let pre: Encoded[] | null = null;
  if (!t.truncate) {
    pre = await encode(all, { direction: t.direction, exactLengths: true });
    refuseTooLong(model, pre, field);
  }
  const truncated: number[] = [];
  const engine = submit ? { submit } : (model.engine as unknown as { submit(inputs: Encoded[], signal: AbortSignal): Promise<{ results: R[]; queueMs: number; inferenceMs: number }> });
  const out = await ctx.cache.through(model.name, keys, codec, async (missing) => {
    const inputs = pre ? missing.map((i) => pre[i]!) : await encode(missing, { direction: t.direction });
    inputs.forEach((e, k) => wasTruncated(e) && truncated.push(missing[k]!));
    return { ...(await engine.submit(inputs, signal)), tokens: inputs.map((e) => e.ids.length) };
  });
  if (truncated.length) ctx.metrics.truncated.inc({ model: model.name }, truncated.length);
  truncated.sort((a, b) => a - b);
  return { results: out.results, report: { usage: usageOfCounts(out.tokens), queueMs: out.queueMs, inferenceMs: out.inferenceMs, truncated, hits: out.hits } };
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

/** Token-id inputs of the model's own vocabulary: checked, fed as given, cut to the model's length. */
function idInputs(ids: number[][], model: ServedModel, field: InputField, ctx: ServerContext): (options: EncodeOptions) => Encoded[] {
  if (ids.length === 0) throw new InvalidInput(`\`${field.name}\` must not be an empty list`, field.name);
  checkCount(ids.length, field.name, ctx.config);
  const vocab = model.encoder.vocabSize;
  ids.forEach((seq, i) => {
    const param = paramOf(field, i);
    if (!Array.isArray(seq) || seq.length === 0) throw new InvalidInput(`\`${param}\` is an empty token list`, field.name);
    for (const id of seq) {
      if (!Number.isInteger(id) || id < 0 || id >= vocab) {
        throw new InvalidInput(`\`${param}\` has token id ${id}, outside the model's vocabulary (0..${vocab - 1})`, field.name);
      }
    }
  });
  const max = model.layout.maxLength;
  return (options) =>
    ids.map((seq) => {
      if (seq.length <= max) return { ids: Int32Array.from(seq), typeIds: null };
      const kept = options.direction === "left" ? seq.slice(seq.length - max) : seq.slice(0, max);
      return { ids: Int32Array.from(kept), typeIds: null, fullLength: seq.length };
    });
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

/**
 * Texts or token ids of an embedding request, checked: their result-cache keys (`keySuffix` marks left
 * truncation) and how to tokenize any of them, texts with the model's prompt.
 */
function embedInputs(ctx: ServerContext, model: TextEmbedModel, inputs: EmbedJob["inputs"], field: InputField, request: PromptRequest, keySuffix = "") {
  let keys: string[];
  let encode: (indices: number[], options: EncodeOptions) => Promise<Encoded[]>;
  if ("ids" in inputs) {
    if (request.promptName !== undefined || request.inputType !== undefined || request.task !== undefined) {
      const param = request.promptName !== undefined ? "prompt_name" : request.inputType !== undefined ? "input_type" : "task";
      throw new InvalidInput(`${param} cannot be used with token-id input`, param);
    }
    const cut = idInputs(inputs.ids, model, field, ctx);
    keys = inputs.ids.map((seq) => inputKey(model.cacheScope, "ids" + keySuffix, new Uint8Array(Int32Array.from(seq).buffer)));
    encode = async (indices, options) => {
      const all = cut(options);
      return indices.map((i) => all[i]!);
    };
  } else {
    const texts = checkTexts(inputs.texts, field.name, ctx.config);
    const { prompt, task, taskId } = inputPrompt(model.layout, request);
    // A task adapter changes the vector even where its instruction is empty: it is part of the key.
    const kind = task === undefined ? "text" : `text@${task}`;
    keys = texts.map((t) => inputKey(model.cacheScope, kind + keySuffix, prompt, t));
    encode = (indices, options) => model.encode(indices.map((i) => prompt + texts[i]!), undefined, taskId === undefined ? options : { ...options, taskId });
  }
  return { keys, encode };
}

/**
 * Texts or token ids (one list, or a list of lists) tokenized with the model's prompt, cut to the model's length:
 * the inputs of sparse and multi-vector answers and of /rerank with an embedding model.
 */
export function encodeInputs(model: TextEmbedModel, input: unknown, request: PromptRequest, field: string, ctx: ServerContext): Promise<Encoded[]> {
  const inputs: EmbedJob["inputs"] =
    Array.isArray(input) && input.length > 0 && typeof input[0] !== "string"
      ? { ids: typeof input[0] === "number" ? [input as number[]] : (input as number[][]) }
      : { texts: input as string | string[] };
  const { keys, encode } = embedInputs(ctx, model, inputs, { name: field, single: false }, request);
  return encode(keys.map((_, i) => i), {});
}

export async function runEmbed(ctx: ServerContext, job: EmbedJob, signal: AbortSignal): Promise<EmbedOutcome> {
  const found = await lookupModel(ctx, job.model, "embed");
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
  const found = await ctx.registry.lookup(job.model, "embed", "/embed_all");
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
  const encoded = await encode(keys.map((_, i) => i), { direction: t.direction, exactLengths: !t.truncate });
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
  return { model, tokens: out.results, usage, queueMs: out.queueMs, inferenceMs: out.inferenceMs, truncated, hits: 0 };
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
  const served = await lookupModel(ctx, job.model, "rerank");
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
    const out = await similarityScores(served, job.query, job.documents, ctx, signal, job.field);
    const report = { usage: usageOfCounts(out.tokens), queueMs: out.queueMs, inferenceMs: out.inferenceMs, truncated: [], hits: 0 };
    return { model: served, ranked: rankResults(out.scores, job.topN, true), ...report };
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
    model.encode(indices.map((i) => docs[i]!), indices.map(() => job.query), { exactLengths: options.exactLengths, ...(instruction !== undefined ? { instruction } : {}) });
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
  const model = (await lookupModel(ctx, job.model, "classify")) as ClassifyModel;
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
        ? model.encode(pairs.map((i) => (job.inputs[i] as [string, string])[1]), pairs.map((i) => (job.inputs[i] as [string, string])[0]), { exactLengths: options.exactLengths })
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

export type SparseModel = Extract<ServedModel, { task: "sparse" }>;

/**
 * Sparse vectors of a request's inputs. An inference-free model (a Router SparseEncoder) encodes queries from its
 * static per-token weights without a model run (input_type query, or its default route); documents, and every
 * input of a plain SPLADE model, go through the engine. tokens: what each input counted for usage.
 */
export async function sparseVectors(ctx: ServerContext, model: SparseModel, input: unknown, request: PromptRequest, field: string, signal: AbortSignal) {
  if (model.sparseQuery && sparseKind(request.inputType, model.layout.sparse!.defaultKind) === "query") {
    if (Array.isArray(input) && input.length > 0 && typeof input[0] !== "string") {
      throw new InvalidInput("token-id input is not supported for the queries of an inference-free sparse model (they are tokenized without special tokens): send text", field);
    }
    const texts = checkTexts(input as string | string[], field, ctx.config);
    const { prompt } = inputPrompt(model.layout, request);
    const out = await model.sparseQuery.encode(texts.map((t) => prompt + t));
    return { results: out.vectors, tokens: out.tokens, queueMs: 0, inferenceMs: 0 };
  }
  const encoded = await encodeInputs(model, input, request, field, ctx);
  const out = await model.engine.submit(encoded, signal);
  return { results: out.results as SparseVector[], tokens: encoded.map((e) => e.ids.length), queueMs: out.queueMs, inferenceMs: out.inferenceMs };
}

/** Models that rank documents by comparing embeddings rather than with a cross-encoder. */
export type SimilarityModel = TextEmbedModel;

/**
 * Scores of documents against a query by their embeddings, for /rerank with an embedding model: the query encoded
 * as a query (its prompt, ColBERT's query encoding), the documents as documents, in one engine submission.
 * Dense: cosine of the L2-normalised vectors; sparse: dot product of the weights; multi-vector: MaxSim; hybrid
 * (bge-m3): cosine of the dense vectors.
 */
export async function similarityScores(model: SimilarityModel, query: string, docs: string[], ctx: ServerContext, signal: AbortSignal, field = "documents") {
  const each = <T>(results: T[], score: (a: T, b: T) => number) => results.slice(1).map((r) => score(results[0]!, r));
  if (model.task === "sparse" && model.sparseQuery) {
    // Inference-free: the query from its static weights, the documents through the model.
    const q = await sparseVectors(ctx, model, [query], { inputType: "query" }, "query", signal);
    const d = await sparseVectors(ctx, model, docs, { inputType: "document" }, field, signal);
    return { results: [], queueMs: d.queueMs, inferenceMs: d.inferenceMs, scores: d.results.map((v) => sparseDot(q.results[0]!, v)), tokens: [...q.tokens, ...d.tokens] };
  }
  if (model.task === "multivector" && model.colpali) {
    // ColPali: the query as a query, the documents as images; both runs at once.
    const cp = { ...model, colpali: model.colpali };
    const [q, d] = await Promise.all([
      colpaliEmbed(ctx, cp, "text", [query], { name: "query", single: true }, signal, null),
      colpaliEmbed(ctx, cp, "image", docs, { name: field, single: false }, signal, null),
    ]);
    const results = [...q.results, ...d.results];
    return { results, queueMs: Math.max(q.queueMs, d.queueMs), inferenceMs: q.inferenceMs + d.inferenceMs, scores: each(results, maxSim), tokens: [...q.tokens, ...d.tokens] };
  }
  const q = await encodeInputs(model, [query], { inputType: "query" }, "query", ctx);
  const d = await encodeInputs(model, docs, { inputType: "document" }, "documents", ctx);
  if (model.task === "multivector" && model.colbert) {
    const inputs = [colbertInput(q[0]!, "query", model.colbert.layout, model.colbert.tokens), ...d.map((e) => colbertInput(e, "document", model.colbert.layout, model.colbert.tokens))];
    const out = await model.engine.submit(inputs, signal);
    return { ...out, scores: each(out.results, maxSim), tokens: inputs.map((x) => x.tokens) };
  }
  const encoded = [...q, ...d];
  const tokens = encoded.map((e) => e.ids.length);
  if (model.task === "sparse") {
    const out = await model.engine.submit(encoded, signal);
    return { ...out, scores: each(out.results, sparseDot), tokens };
  }
  // bge-m3: dense cosine, as FlagEmbedding's default dense score.
  const out = model.task === "hybrid" ? await hybridDense(model)(encoded, signal) : await model.engine.submit(encoded, signal);
  const unit = out.results.map((v) => finishEmbedding(v, undefined));
  return { ...out, scores: each(unit, dot), tokens };
}

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

/** A 413 before anything runs when an answer would hold more token vectors than --max-vectors-per-request. */
export function checkVectorCount(vectors: number, maxVectors: number, param: string): void {
  if (vectors > maxVectors) {
    throw new TooManyVectors(`this request would return ${vectors} token vectors; at most ${maxVectors} are returned per request (--max-vectors-per-request): send fewer or shorter inputs`, param);
  }
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
    const perImage = cp.tokens.imageIds.length;
    if (maxVectors !== null) checkVectorCount(files.length * perImage, maxVectors, field.name);
    const out = await cp.images.submit(await cp.prepare(files), signal);
    return { ...out, tokens: files.map(() => perImage) };
  }
  if (Array.isArray(input) && input.some((x) => typeof x !== "string")) {
    throw new InvalidInput(`\`${field.name}\` of a ColPali model must be text (queries) or, with modality "image", images`, field.name);
  }
  const texts = checkTexts(input as string | string[], field.name, ctx.config);
  const encoded = await model.encode(texts.map((t) => colpaliQueryText(cp.layout, cp.tokens, t)));
  const inputs = encoded.map((e, i) => colpaliQueryInput(e, cp.tokens, model.layout.maxLength, paramOf(field, i)));
  if (maxVectors !== null) checkVectorCount(inputs.reduce((n, x) => n + x.tokens, 0), maxVectors, field.name);
  const out = await model.engine.submit(inputs, signal);
  return { ...out, tokens: inputs.map((x) => x.tokens) };
}
