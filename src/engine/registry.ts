// Which model serves a name and a capability. Loads every configured model (resolve -> layout -> session ->
// tokenizer -> engine -> warm-up) and answers lookups from the HTTP layer.
import { dirname, join, resolve } from "node:path";
import { availableParallelism } from "node:os";
import type { ModelConfig } from "../config";
import { CapabilityMismatch, ModelLoadError, ModelNotFound, Unavailable } from "../errors";
import { OtherLoad } from "./cpu-load";
import { log } from "../log";
import { budgetShape, budgetTokens, calibrationTrusted, chooseBudget, DEFAULT_RUN_OVERHEAD_TOKENS, fitRunOverhead, keepClimbing, TOKEN_BUDGET_FIRST, TOKEN_BUDGET_START, type BudgetTiming, type RunTiming } from "./batcher";
import type { Metrics } from "../metrics";
import { readLayout, type ModelLayout } from "../model/layout";
import type { ColPaliLayout } from "../model/colpali-layout";
import type { HybridLayout } from "../model/hybrid-layout";
import type { Modality } from "../model/media-layout";
import type { MultiVectorLayout } from "../model/multivector-layout";
import type { RerankTemplate } from "../model/rerank-template";
import type { Task } from "../model/model-task";
import type { MediaPool } from "../media/pool";
import { AUDIO_INPUT, audioInputShape, audioReader } from "../tasks/audio";
import { IMAGE_INPUT, imageInputShape, imageReader } from "../tasks/image";
import { resolveModel, type HubSettings } from "../model/resolve";
import { isTextInput, ModelSession, TASK_ID_INPUT, type WorkerOptions, type WorkerStatus } from "../model/session";
import { modelCacheScope } from "../cache/scope";
import { primeRuntime } from "../model/prime";
import { returnFreedMemory } from "../model/trim";
import { readDenseLayers, readPickledHeads, type DenseLayer } from "../model/dense";
import { onnxOutputNames } from "../model/onnx-graph";
import { KEEP_LOGITS_INPUTS, lastPositionGraph, type LastPositionGraph } from "../model/logits-graph";
import { rowwiseQuantGraph } from "../model/rowwise-quant";
import { splitCombinedExport, type SplitTowers } from "../model/split";
import type { Removable } from "../model/scratch";
import { classifyReader } from "../tasks/classify";
import { DEFAULT_ADAPTER_TASK, embedReader, projectionReader, textTowerReader } from "../tasks/embed";
import { llmRerankText, rerankReader, yesNoReader } from "../tasks/rerank";
import { idfTable, specialTokenIds, spladeReader, staticSparse, type SparseVector } from "../tasks/sparse";
import { readSafetensors } from "../model/safetensors";
import {
  colbertHead, colbertInput, colbertTokens, multiVectorBatches, multiVectorRunner, multiVectorTokenizeLength,
  type ColbertTokens, type MultiVector, type MultiVectorBatch, type MultiVectorInput,
} from "../tasks/multivector";
import {
  colpaliImageBatches, colpaliImageRunner, colpaliOutput, colpaliQueryInput, colpaliQueryRunner, colpaliQueryText, colpaliTokens,
  tiledImageBatches, tiledImageRunner, tiledImageText, type ColPaliTokens, type TiledImageBatch, type TiledImageInput,
} from "../tasks/colpali";
import { idefics3ConfigFrom } from "../media/idefics3";
import { imageConfigFrom, pixelShape } from "../media/image";
import type { TaskReader } from "../tasks/task";
import { hybridBatches, hybridRunner, pickledHeadsHead, unusedTokenIds, type HybridBatch, type HybridInput, type HybridResult } from "../tasks/hybrid";
import { readQuantizationRanges } from "../model/quantization-ranges";
import type { QuantizationRanges } from "../model/quantization-ranges";
import { tokenStatesReader } from "../tasks/token-states";
import { TOKEN_STATE_OUTPUTS, tokenStatesOutput } from "../model/onnx-graph";
import { Encoder, padTokenId, type EncodeOptions, type Encoded } from "../tokenize/encode";
import type { TokenizerPool } from "../tokenize/pool";
import { Lease, Lifecycle, ModelSlot, type LifecycleSettings, type ModelState } from "./lifecycle";
import { Engine, sessionRunner, tokenBatches, type EngineState, type Runner } from "./engine";
import { featureBatches, type FeatureBatch } from "./inputs";
import { combinedTextRunner, mediaDummy, mediaRunner, textDummy } from "./towers";

/**
 * Requests with at most this many characters are tokenized in-process rather than in a tokenizer worker, which
 * covers one full-length input of a 512-token model. The Rust tokenizers binding encodes on its own thread pool, so
 * the event loop only waits for the answer either way; the worker adds a message round trip and a copy. Measured
 * one ~560-character text at a time (bert-base-uncased, 2 loaded cores, scratch A/B): 0.77-0.88 ms in-process,
 * 1.03-1.64 ms through a worker. Larger requests go to the worker pool, spread over its threads.
 */
export const INLINE_TOKENIZE_CHARS = 4096;

/**
 * Default token budgets per batch when --max-batch-tokens is 0 (auto). CPU: measured with onnxruntime alone on
 * bge-small- and bge-base-shaped BERTs (2 cores), tokens/s peaks at 400-800 padded tokens per batch at every input
 * length and falls 10-25% by 2048; in the benchmark 512 ran ~11% more tokens/s than 2048 (bench/README.md).
 */
export const CPU_BATCH_TOKENS = 512;
export const GPU_BATCH_TOKENS = 16384;

/** Route families a model can serve. */
export type Capability = "embed" | "rerank" | "classify" | "embed_sparse";

/** Model names clients send to mean "whichever is served" (infinity_client sends "default/not-specified"). */
export const UNNAMED_MODELS: readonly string[] = ["", "default/not-specified"];

interface Base {
  name: string;
  config: ModelConfig;
  layout: ModelLayout;
  provider: string;
  padId: number;
  /** Resident memory measured at load: weights plus session arenas after warm-up. */
  memoryBytes: number;
  /** Tokens per second measured during warm-up (0 when warm-up is off). */
  warmupTokensPerSecond: number;
  /** Where the text engine's run overhead came from: --run-overhead-tokens, warm-up timing, or the constant. */
  runOverheadSource: "flag" | "calibrated" | "default";
  /**
   * Where the batch token budget came from: --max-batch-tokens, timed at warm-up, the provider's constant (no
   * warm-up, or a model the calibration does not time), or lowered to fit --memory-budget-mb.
   */
  maxBatchTokensSource: "flag" | "calibrated" | "default" | "memory-budget";
  /**
   * Cores other processes used while warm-up timed the token budget and the run overhead (the busier of the two
   * spans); null when nothing was timed or /proc cannot tell. Above calibrationTrusted's bound the timings are
   * dropped and the constants stay (source "default").
   */
  calibrationOtherLoad: number | null;
  /** Where the session's instance count (and, when calibrated, its threads) came from. */
  instancesSource: "flag" | "calibrated" | "default";
  /** Why the model runs the instances it runs (the calibration's timings and memory, or what ruled it out). */
  instancesReason: string;
  /** A new session of this model's file with another thread and instance setting (warm-up's calibration). */
  newSession(numThreads: number, instances: number): Promise<ModelSession>;
  /** Resident memory the session took when created (weights, graph). */
  sessionBytes: number;
  /** Activation memory per padded token: measured by warm-up, at least the architecture's estimate. */
  activationBytesPerToken: number;
  /**
   * LLM rerankers whose export returns every position's full-vocabulary logits (no num_logits_to_keep input): the
   * bytes one padded token adds to a batch's logits output (fullLogitsBytesPerToken); 0 for every other model.
   */
  fullLogitsBytesPerToken: number;
  /**
   * LLM rerankers (causal LM): which positions' logits the session computes: "last position (...)" when the graph was
   * rewritten at load, "num_logits_to_keep" when the export takes it, "every position (reason)" otherwise; null for
   * every other model.
   */
  llmLogits: string | null;
  /** The rewritten graph the session reads (LLM rerankers), removed when the model is released. */
  logitsGraph: LastPositionGraph | null;
  /** Tokenizes texts (or query/document pairs) in the worker pool. */
  encode(texts: string[], firsts?: string[], options?: EncodeOptions & { instruction?: string; taskId?: number }): Promise<Encoded[]>;
  /** Counts content tokens of a text in-process (prompt lengths). */
  encoder: Encoder;
  session: ModelSession;
  /** The model's share of result-cache keys (src/cache/scope.ts). */
  cacheScope: string;
  /** int8/uint8 calibration ranges (--quantization-ranges), or null: the calibration-free per-vector scale. */
  quantizationRanges: QuantizationRanges | null;
}
/** The image or audio tower of a multimodal model: its own engine over preprocessed tensors. */
export interface MediaTower {
  modality: "image" | "audio";
  engine: Engine<Float32Array, Float32Array, FeatureBatch>;
  /** Its own session, or null when it shares the combined export's session with the text tower (not split). */
  session: ModelSession | null;
  /** The per-tower graphs a combined export was split into (removed at unload), or null. */
  split: SplitTowers | null;
  /** Decodes and preprocesses files in the media workers: one tensor per input. */
  prepare(files: Uint8Array[]): Promise<Float32Array[]>;
}

export type ServedModel =
  | (Base & { task: "embed"; engine: Engine<Float32Array>; media: MediaTower | null; tokens: TokenStates })
  | (Base & { task: "rerank"; engine: Engine<number> })
  | (Base & { task: "classify"; engine: Engine<Float32Array> })
  | (Base & { task: "sparse"; engine: Engine<SparseVector>; sparseQuery: SparseQuery | null })
  | (Base & { task: "multivector"; engine: Engine<MultiVector, MultiVectorInput, MultiVectorBatch>; colbert: ColbertModel; colpali: null })
  // ColPali: the engine runs text queries; images go through colpali.images on the same session.
  | (Base & { task: "multivector"; engine: Engine<MultiVector, MultiVectorInput, MultiVectorBatch>; colbert: null; colpali: ColPaliModel })
  | (Base & { task: "hybrid"; engine: Engine<HybridResult, HybridInput, HybridBatch>; hybrid: HybridModel });

/** The query side of an inference-free sparse model: no model run, a static weight per token id. */
export interface SparseQuery {
  /** Each text's vector and its token count (content tokens, no special tokens). */
  encode(texts: string[]): Promise<{ vectors: SparseVector[]; tokens: number[] }>;
}

/**
 * SparseStaticEmbedding (or the older layout's idf.json): the query tokenizer (no special tokens, cut to its max
 * length) and the weight table.
 */
async function sparseQueryOf(layout: ModelLayout, idfMissingWeight: number): Promise<SparseQuery | null> {
  const q = layout.sparse?.query;
  if (!q) return null;
  const encoder = await Encoder.create(q.tokenizerJson, q.tokenizerConfig, q.maxLength);
  const table = q.idf ? idfTable(q.idf, (t) => encoder.tokenId(t), encoder.vocabSize, idfMissingWeight) : staticWeights(layout.dir, q.path);
  return {
    async encode(texts) {
      const ids = await Promise.all(texts.map(async (t) => (await encoder.tokens(t, false)).slice(0, q.maxLength).map((x) => x.id)));
      return { vectors: ids.map((x) => staticSparse(x, table)), tokens: ids.map((x) => x.length) };
    },
  };
}

/** A SparseStaticEmbedding module's per-token weights: its model.safetensors `weight`. */
function staticWeights(dir: string, path: string): Float32Array {
  const file = join(dir, path, "model.safetensors");
  let weight;
  try {
    weight = readSafetensors(file).get("weight");
  } catch (e) {
    throw new ModelLoadError(`the query module ${path} of this inference-free sparse model needs its weights in ${path}/model.safetensors: ${(e as Error).message}`);
  }
  if (!weight || weight.shape.length !== 1) throw new ModelLoadError(`${path}/model.safetensors has no 1-dimensional \`weight\` (the per-token query weights)`);
  return weight.data;
}

/** A bge-m3-style model's outputs and the token ids that never get a lexical weight. */
export interface HybridModel {
  layout: HybridLayout;
  unused: ReadonlySet<number>;
}

/** A ColPali model's prompts and its image engine (pixel_values + the image prompt's ids, on the model's session). */
export interface ColPaliModel {
  layout: ColPaliLayout;
  tokens: ColPaliTokens;
  /** ColPali's engine takes one pixel_values tensor per image; ColModernVBERT's an image's tiles and prompt ids. */
  images: Engine<MultiVector, Float32Array, FeatureBatch> | Engine<MultiVector, TiledImageInput, TiledImageBatch>;
  /** The most vectors one image gives (ColPali: every image's count; ColModernVBERT: the largest grid's). */
  maxImageVectors: number;
  /**
   * Decodes and preprocesses image files in the media workers (`param`: the request field, `firstIndex`: where these
   * files start in it, for errors).
   */
  prepare(files: Uint8Array[], param: string, firstIndex?: number): Promise<PreparedImages>;
  /** One run of a blank image, at warm-up. */
  warmUpImages(): Promise<void>;
}

/** Preprocessed image documents: each one's vector count (its prompt's tokens), and the run that embeds them. */
export interface PreparedImages {
  vectors: number[];
  run(signal?: AbortSignal): Promise<{ results: MultiVector[]; queueMs: number; inferenceMs: number }>;
}

/**
 * A dense embedder's per-token states (/embed_all): an engine reading the export's last_hidden_state on the model's
 * session, or (a string) why the model has none.
 */
export type TokenStates = Engine<MultiVector> | string;

/** A ColBERT model's settings and resolved tokens; dim is the projection's size when known before a run. */
export interface ColbertModel {
  layout: MultiVectorLayout;
  tokens: ColbertTokens;
  dim: number | null;
}

/**
 * A combined multimodal export (one graph, both towers) as one graph per tower (model/split.ts): onnxruntime runs a
 * whole graph for any output, so through the combined graph each text batch would also run the media tower on a
 * dummy input. Null when the graph lacks a tower's output (the load then reports it) or cannot be split (a warning;
 * the towers then share the combined graph with one-row dummies).
 */
function splitTowers(layout: ModelLayout, model: string): SplitTowers | null {
  const media = layout.media!;
  const path = join(layout.dir, layout.onnxFile);
  const names = onnxOutputNames(path);
  let outputs: [string, string];
  try {
    outputs = [textTowerReader.outputName(names), (media.modality === "image" ? imageReader : audioReader).outputName(names)];
  } catch {
    return null;
  }
  try {
    const split = splitCombinedExport(path, ...outputs);
    log.info(`${layout.onnxFile}: both towers in one graph, split into one graph per tower`, { model, text: outputs[0], [media.modality]: outputs[1], folder: dirname(split.text) });
    return split;
  } catch (e) {
    log.warn(`${layout.onnxFile}: both towers in one graph, which could not be split (${(e as Error).message}): each tower's batches feed the other tower a one-row dummy input, which onnxruntime runs too`, { model });
    return null;
  }
}
/** The sessions a model runs on: its own, and its media tower's when that has one. */
export function sessionsOf(m: ServedModel): ModelSession[] {
  return m.task === "embed" && m.media?.session ? [m.session, m.media.session] : [m.session];
}

/**
 * A model's state for /health and /models: its engines' states, and `broken` while one of its inference workers
 * is being replaced (or its replacement failed).
 */
export function modelState(m: ServedModel): EngineState {
  for (const e of enginesOf(m)) if (e.state !== "ready") return e.state;
  for (const s of sessionsOf(m)) if (s.status.state !== "ready") return "broken";
  return "ready";
}

/** The last error of a model's engines, or of its inference workers. */
export function modelError(m: ServedModel): string | null {
  for (const e of enginesOf(m)) if (e.lastError) return e.lastError;
  for (const s of sessionsOf(m)) if (s.status.state !== "ready" && s.status.lastFault) return s.status.lastFault;
  return null;
}

/** The most single-threaded instances warm-up tries (each holds its own copy of the weights). */
export const MAX_CALIBRATED_INSTANCES = 4;
/** Timing noise: instances must time at least this much faster to be kept, whatever their memory. */
export const MIN_INSTANCES_GAIN = 1.1;

/** What warm-up measured of the two settings it compares, for chooseInstances. */
export interface InstanceTimings {
  /** The candidate: n instances of `threads` intra-op threads each, against one session of `allThreads`. */
  n: number;
  threads: number;
  allThreads: number;
  oneTokensPerSecond: number;
  manyTokensPerSecond: number;
  /** The model's resident bytes with the one session, and with the n instances in its place (both measured). */
  oneBytes: number;
  manyBytes: number;
  /** What --max-models-memory-mb leaves this model beside the other loaded models; Infinity without a budget. */
  roomBytes: number;
}

/**
 * Keeps the n instances only when they pay for their memory: each holds its own weights and arena (bench model: a
 * model of ~150 MiB took ~280 with two, and the server 289 -> 427 MiB RSS), so they must time at least as many times
 * faster as they take memory (tokens/s per resident byte does not fall; at least MIN_INSTANCES_GAIN, the noise), and
 * fit the --max-models-memory-mb room. On a quiet 2-core machine two single-threaded instances served 17-23% more
 * tokens/s than one session with both cores at saturation (bench/README "Saturated cells, repeated") for ~1.5x the
 * server's memory, so one session is kept; where another process keeps taking a core, the two-thread session stalls
 * at every operator barrier and two instances can time more than twice as fast.
 */
export function chooseInstances(t: InstanceTimings): { keep: boolean; reason: string } {
  const mb = (b: number) => `${Math.round(b / 1048576)} MB`;
  const gain = t.manyTokensPerSecond / Math.max(1e-9, t.oneTokensPerSecond);
  const memory = t.manyBytes / Math.max(1, t.oneBytes);
  const need = Math.max(MIN_INSTANCES_GAIN, memory);
  const timed = `${t.n} x ${t.threads} thread${t.threads === 1 ? "" : "s"} timed ${gain.toFixed(2)}x as fast as 1 x ${t.allThreads} threads ` +
    `(${t.manyTokensPerSecond.toFixed(0)} against ${t.oneTokensPerSecond.toFixed(0)} tokens/s) for ${memory.toFixed(2)}x the memory (${mb(t.manyBytes)} against ${mb(t.oneBytes)})`;
  if (t.manyBytes > t.roomBytes) return { keep: false, reason: `${timed}, over the ${mb(t.roomBytes)} --max-models-memory-mb leaves it: one session` };
  if (gain < need) return { keep: false, reason: `${timed}; instances are kept from ${need.toFixed(2)}x: one session` };
  return { keep: true, reason: `${timed}; at least ${need.toFixed(2)}x: ${t.n} instances` };
}

/** The inference worker of each session instance, for /health and /models. */
export function workersOf(m: ServedModel): Array<WorkerStatus & { threads: number }> {
  return sessionsOf(m).flatMap((s) => s.instanceStatus.map((w) => ({ ...w, threads: s.settings.numThreads })));
}

/** The routes a task serves: a sparse encoder answers /embeddings (indices + values) and /embed_sparse. */
export function capabilitiesOf(task: Task): Capability[] {
  // Embedding models also rerank, by similarity: cosine (dense), dot product (sparse), MaxSim (multi-vector).
  if (task === "sparse" || task === "hybrid") return ["embed", "embed_sparse", "rerank"];
  if (task === "embed" || task === "multivector") return ["embed", "rerank"];
  return [task];
}

/** What a model embeds, for /models and error messages. */
export function modalitiesOf(m: ServedModel): Modality[] {
  return m.layout.modalities;
}

/** The route that serves a task, for error messages. */
export const ROUTE_OF: Record<Capability, string> = { embed: "/embeddings", rerank: "/rerank", classify: "/classify", embed_sparse: "/embed_sparse" };

/**
 * A floor for activation memory per token from the architecture: float32 hidden states, attention projections
 * and the feed-forward expansion of one layer alive at once, with onnxruntime's arena rounding (x2).
 */
export function estimateActivationBytesPerToken(config: Record<string, unknown>): number {
  const hidden = Number(config.hidden_size ?? config.d_model ?? config.n_embd ?? 768) || 768;
  const intermediate = Number(config.intermediate_size ?? config.n_inner ?? 4 * hidden) || 4 * hidden;
  return 4 * (6 * hidden + 2 * intermediate) * 2;
}

/**
 * What one padded token adds to a batch through an LLM reranker's `logits` output when the export returns every
 * position's full-vocabulary logits ([batch, seq, vocab], read as float32): vocab_size x 4 bytes (606,676 for
 * Qwen3-Reranker's 151,669 tokens). 0 when the export takes num_logits_to_keep / logits_to_keep (fed 1, the output is
 * [batch, 1, vocab] whatever the length) or when the model is not scored from a causal LM's logits.
 */
export function fullLogitsBytesPerToken(config: Record<string, unknown>, inputNames: readonly string[], causalLm: boolean): number {
  if (!causalLm || inputNames.some((n) => KEEP_LOGITS_INPUTS.includes(n))) return 0;
  const vocab = Number(config.vocab_size ?? (config.text_config as Record<string, unknown> | undefined)?.vocab_size);
  return Number.isFinite(vocab) && vocab > 0 ? vocab * 4 : 0;
}

/**
 * Without --memory-budget-mb, one batch's full-vocabulary logits are kept within this: 1 GiB, 1,769 padded tokens of
 * Qwen3-Reranker (where the GPU default budget of 16,384 tokens would make a 9.9 GB logits tensor, and one
 * 40,960-token input 24.8 GB).
 */
export const FULL_LOGITS_MAX_BYTES = 1024 * 1048576;

/**
 * The batch token budget of an export that returns full-vocabulary logits: the configured budget, cut so one batch's
 * logits fit `maxBytes` (at least one token). An input longer than the result still runs alone (the batcher never
 * splits an input), so its logits can pass `maxBytes`: `longestInputBytes` says by how much.
 */
export function fullLogitsTokenBudget(bytesPerToken: number, maxBatchTokens: number, maxLength: number, maxBytes: number = FULL_LOGITS_MAX_BYTES): { tokens: number; cut: boolean; longestInputBytes: number } {
  const fit = Math.max(1, Math.floor(maxBytes / bytesPerToken));
  return { tokens: Math.min(maxBatchTokens, fit), cut: fit < maxBatchTokens, longestInputBytes: maxLength * bytesPerToken };
}

/** The most padded tokens per batch that keep a model within its memory budget; throws when not even one fits. */
export function tokenBudgetWithin(budgetMb: number, sessionBytes: number, bytesPerToken: number, maxLength: number, model: string): number {
  const tokens = Math.floor((budgetMb * 1048576 - sessionBytes) / bytesPerToken);
  if (tokens < maxLength) {
    const needMb = Math.ceil((sessionBytes + maxLength * bytesPerToken) / 1048576);
    throw new ModelLoadError(`--memory-budget-mb ${budgetMb} is too small for ${model}: one full-length input needs about ${needMb} MB`);
  }
  return tokens;
}

/**
 * How an embedder's vectors are pooled, as /models and the load log say it: inside the graph when the export has a
 * `sentence_embedding` output (the server reads that output and pools nothing), else the layout's pooling and where
 * it came from.
 */
export function poolingOf(layout: ModelLayout, session: { outputNames: readonly string[] } | null): { method: string; source: string } {
  if (session?.outputNames.includes("sentence_embedding")) return { method: "sentence_embedding", source: "inside the ONNX graph" };
  return { method: layout.pooling, source: layout.poolingSource };
}

/**
 * The Dense modules the server applies after pooling: none when the export has a sentence_embedding output (the
 * sentence-transformers pipeline is inside the graph), else every Dense module's weights, read from its folder.
 */
export function denseHead(layout: ModelLayout, session: { outputNames: readonly string[] }): DenseLayer[] {
  if (!layout.dense.length || session.outputNames.includes("sentence_embedding")) return [];
  return readDenseLayers(layout.dir, layout.dense);
}

/**
 * A decoder reranker's prompt as token ids: prefix and suffix (tokenized alone, as the model card does), the
 * length left for the pair text, and the yes/no ids of a causal LM.
 */
async function templateTokens(encoder: Encoder, t: RerankTemplate, maxLength: number) {
  if ((await encoder.encode("")).ids.length !== 0) {
    throw new ModelLoadError("this decoder reranker's tokenizer adds special tokens of its own; only tokenizers that add none (Qwen) are supported");
  }
  const prefix = (await encoder.encode(t.prefix)).ids;
  const suffix = (await encoder.encode(t.suffix)).ids;
  const bodyLength = maxLength - prefix.length - suffix.length;
  if (bodyLength < 8) throw new ModelLoadError(`max length ${maxLength} leaves ${bodyLength} tokens for a pair after the reranker's prompt`);
  const id = (token: string | null) => {
    if (token === null) return undefined;
    const v = encoder.tokenId(token);
    if (v === undefined) throw new ModelLoadError(`the reranker's tokenizer has no "${token}" token`);
    return v;
  };
  return {
    bodyLength,
    yes: id(t.yesToken),
    no: id(t.noToken),
    wrap(e: Encoded): Encoded {
      const ids = new Int32Array(prefix.length + e.ids.length + suffix.length);
      ids.set(prefix, 0);
      ids.set(e.ids, prefix.length);
      ids.set(suffix, prefix.length + e.ids.length);
      // a body cut to fit keeps its count (x-truncated-inputs, truncate false's 413)
      if (e.fullLength === undefined) return { ids, typeIds: null };
      const fullLength = prefix.length + e.fullLength + suffix.length;
      return e.fullLengthAtLeast ? { ids, typeIds: null, fullLength, fullLengthAtLeast: true } : { ids, typeIds: null, fullLength };
    },
  };
}

/** What a vision retriever's image engine is built from (the model's session, its media preprocessor). */
interface ImageModelDeps {
  key: string;
  layout: ColPaliLayout;
  tokens: ColPaliTokens;
  session: ModelSession;
  output: string;
  /** One image's (ColPali) or one tile's (ColModernVBERT) pixel_values shape: [3, H, W]. */
  shape: number[];
  limits: ConstructorParameters<typeof Engine>[3];
  metrics: ConstructorParameters<typeof Engine>[4];
  pool: MediaPool;
  mediaKey: string;
  instances: number;
}

const sizeOf = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/** ColPali: one fixed-size image and the one image prompt per document; every image costs its prompt's tokens. */
function fixedImageModel(d: ImageModelDeps): ColPaliModel {
  const perImage = d.tokens.imageIds.length;
  const runners = Array.from({ length: d.instances }, () => colpaliImageRunner(d.session, d.output, d.tokens.imageIds));
  const images = new Engine<MultiVector, Float32Array, FeatureBatch>(`${d.key}/image`, runners, colpaliImageBatches(d.shape, perImage), d.limits, d.metrics);
  return {
    layout: d.layout,
    tokens: d.tokens,
    images,
    maxImageVectors: perImage,
    async prepare(files, param, firstIndex = 0) {
      const pixels = await d.pool.process(d.mediaKey, files, param, firstIndex);
      return { vectors: files.map(() => perImage), run: (signal) => images.submit(pixels, signal) };
    },
    warmUpImages: async () => void (await images.submit([new Float32Array(sizeOf(d.shape))])),
  };
}

/**
 * ColModernVBERT: each image split into tiles in the media workers (Idefics3), its prompt built for its grid and
 * tokenized (once per grid); an image costs its prompt's tokens. The largest grid (size.longest_edge / tile per
 * side) bounds an image's vectors; a prompt past the text model's positions is refused at load.
 */
async function tiledImageModel(d: ImageModelDeps, padId: number, maxLength: number, tokenize: (text: string) => Promise<number[]>): Promise<ColPaliModel> {
  const cfg = idefics3ConfigFrom(d.layout.preprocessor, d.layout.imageSize);
  const prompts = new Map<string, Promise<Int32Array>>();
  const promptIds = (rows: number, cols: number) => {
    const k = `${rows}x${cols}`;
    let p = prompts.get(k);
    if (!p) {
      p = tokenize(tiledImageText(d.layout, d.tokens.imageToken, rows, cols)).then((ids) => Int32Array.from(ids));
      prompts.set(k, p);
    }
    return p;
  };
  const side = cfg.split && cfg.longestEdge !== null ? Math.max(1, Math.ceil(cfg.longestEdge / cfg.tile)) : 0;
  const largest = (await promptIds(side > 1 ? side : 0, side > 1 ? side : 0)).length;
  if (largest > maxLength) {
    throw new ModelLoadError(`an image split into ${side} x ${side} tiles has a ${largest}-token prompt; the text model takes at most ${maxLength} positions`);
  }
  const runners = Array.from({ length: d.instances }, () => tiledImageRunner(d.session, d.output));
  const images = new Engine<MultiVector, TiledImageInput, TiledImageBatch>(`${d.key}/image`, runners, tiledImageBatches(padId, d.shape), d.limits, d.metrics);
  const plane = sizeOf(d.shape);
  return {
    layout: d.layout,
    tokens: d.tokens,
    images,
    maxImageVectors: largest,
    async prepare(files, param, firstIndex = 0) {
      const tiled = await d.pool.processTiled(d.mediaKey, files, param, firstIndex);
      const inputs = await Promise.all(tiled.map(async (t) => ({ pixels: t.data, tiles: t.data.length / plane, ids: await promptIds(t.rows, t.cols) })));
      return { vectors: inputs.map((x) => x.ids.length), run: (signal) => images.submit(inputs, signal) };
    },
    async warmUpImages() {
      await images.submit([{ pixels: new Float32Array(plane), tiles: 1, ids: await promptIds(0, 0) }]);
    },
  };
}

/** The engines of a model: its text engine, and its media tower's (or ColPali's image engine) when it has one. */
function enginesOf(m: ServedModel): Array<Engine<any, any, any>> {
  if (m.task === "embed") return [m.engine, ...(m.media ? [m.media.engine] : []), ...(typeof m.tokens === "string" ? [] : [m.tokens])];
  if (m.task === "multivector" && m.colpali) return [m.engine, m.colpali.images];
  return [m.engine];
}

/** What /models and /health show of one configured model, loaded or not. */
export interface ModelEntry {
  name: string;
  config: ModelConfig;
  layout: ModelLayout;
  /** unloaded / loading / ready / broken (a failed load, a failing engine, an inference worker being replaced). */
  state: ModelState;
  /** The loaded model, or null. */
  model: ServedModel | null;
  /** Memory measured at the last load (null before the first). */
  memoryBytes: number | null;
  /** Epoch ms of the last request, or null. */
  lastUsed: number | null;
  loadSeconds: number | null;
  error: string | null;
}

export class Registry {
  private readonly slots = new Map<string, ModelSlot<ServedModel>>();
  private readonly lifecycle: Lifecycle<ServedModel>;
  private loading = true;
  /** The models each request in progress was given (by its AbortSignal), held until endRequest. */
  private readonly leases = new WeakMap<AbortSignal, Lease>();

  constructor(
    private readonly pool: TokenizerPool,
    private readonly metrics: Metrics | null,
    /** Media workers, for multimodal models; settings of their decoders. */
    private readonly mediaPool: MediaPool | null = null,
    private readonly mediaLimits: { maxImagePixels: number } = { maxImagePixels: 25_000_000 },
    lifecycle: LifecycleSettings = { maxModelsMemoryBytes: 0, loadTimeoutMs: 60_000, loadRetryMs: 10_000 },
  ) {
    this.lifecycle = new Lifecycle(
      this.slots,
      {
        build: (slot) => this.build(slot),
        isIdle: (m) => enginesOf(m).every((e) => !e.busy),
        drained: async (m) => {
          await Promise.all(enginesOf(m).map((e) => e.idle()));
        },
        release: (m) => this.release(m),
      },
      lifecycle,
      metrics,
    );
  }

  /** The loaded models. */
  list(): ServedModel[] {
    const out: ServedModel[] = [];
    for (const s of this.slots.values()) if (s.model) out.push(s.model);
    return out;
  }

  /** Every configured model with its lifecycle state, loaded or not. */
  entries(): ModelEntry[] {
    return [...this.slots.values()].map((s) => {
      const m = s.model;
      const engineState = m ? modelState(m) : null;
      const state: ModelState = s.pending ? "loading" : engineState === null ? s.state : engineState === "ready" ? "ready" : "broken";
      return {
        name: s.name,
        config: s.config,
        layout: s.layout,
        state,
        model: m,
        memoryBytes: s.measuredBytes,
        lastUsed: s.lastUsed || null,
        loadSeconds: s.loadSeconds,
        error: m ? modelError(m) : s.loadError,
      };
    });
  }

  /** Ready to serve: every loaded model is ready; on-demand models that are not loaded do not count against it. */
  get ready(): boolean {
    return !this.loading && this.slots.size > 0 && this.list().every((m) => modelState(m) === "ready");
  }

  get isLoading(): boolean {
    return this.loading;
  }

  /**
   * By served name; with one model configured, any name (or none); with several and no name (or
   * "default/not-specified"), the one model that can serve the capability, when there is exactly one.
   */
  private slotFor(name: string | undefined, capability: Capability, route: string): ModelSlot<ServedModel> {
    let slot: ModelSlot<ServedModel> | undefined;
    if (name !== undefined && UNNAMED_MODELS.includes(name)) name = undefined;
    const able = [...this.slots.values()].filter((s) => capabilitiesOf(s.layout.task).includes(capability));
    // The models made for the route come first (a reranker for /rerank, which embedders also serve by similarity).
    const made = able.filter((s) => capabilitiesOf(s.layout.task)[0] === capability);
    if (this.slots.size === 1) slot = this.slots.values().next().value;
    else if (name !== undefined) slot = this.slots.get(name);
    else if (made.length === 1) slot = made[0];
    else if (able.length === 1) slot = able[0];
    if (!slot) {
      const names = [...this.slots.keys()];
      const routes = (s: ModelSlot<ServedModel>) => capabilitiesOf(s.layout.task).map((c) => ROUTE_OF[c]).join(", ");
      throw new ModelNotFound(
        name !== undefined
          ? `model "${name}" is not served; served models: ${names.join(", ")}`
          : able.length === 0
            ? `no served model serves ${route}; served models: ${[...this.slots.values()].map((s) => `${s.name} (${routes(s)})`).join(", ")}`
            : `several models serve ${route}; name one in \`model\`: ${able.map((s) => s.name).join(", ")}`,
        "model",
      );
    }
    return slot;
  }

  /**
   * The model for a request: by served name; with one model configured, any name (or none) selects it. A model
   * that is not loaded is loaded first (concurrent requests share the load), waiting at most --model-load-timeout.
   * `request` (the request's AbortSignal) holds the model for that request until endRequest: no eviction or idle
   * unload takes it meanwhile, an admin unload waits for it, and the request's later lookups get the same model.
   */
  async lookup(name: string | undefined, capability: Capability, route: string = ROUTE_OF[capability], request?: AbortSignal): Promise<ServedModel> {
    const slot = this.slotFor(name, capability, route);
    const served = capabilitiesOf(slot.layout.task);
    if (!served.includes(capability)) {
      throw new CapabilityMismatch(
        `model "${slot.name}" is a ${slot.layout.task} model and serves ${served.map((c) => ROUTE_OF[c]).join(" and ")}, not ${route}`,
        "model",
      );
    }
    if (this.loading && !slot.model) throw new Unavailable(`model "${slot.name}" is not loaded yet: the server is starting`);
    let lease: Lease | undefined;
    if (request) {
      lease = this.leases.get(request);
      if (!lease) this.leases.set(request, (lease = new Lease()));
    }
    return this.lifecycle.acquire(slot, lease);
  }

  /** A request was answered: the models it was given may be unloaded again. */
  endRequest(request: AbortSignal): void {
    this.leases.get(request)?.release();
    this.leases.delete(request);
  }

  /** POST /models/{name}/load: loads a model (or waits for its load), bounded like a request; tried even in a backoff. */
  async loadModel(name: string): Promise<ModelEntry> {
    const slot = this.slotByName(name);
    this.lifecycle.retryNow(slot);
    await this.lifecycle.acquire(slot);
    return this.entries().find((e) => e.name === slot.name)!;
  }

  /** POST /models/{name}/unload: unloads a model after its queued work. */
  async unloadModel(name: string): Promise<ModelEntry> {
    const slot = this.slotByName(name);
    if (slot.pending) await slot.pending.catch(() => {});
    await this.lifecycle.unload(slot, "admin");
    return this.entries().find((e) => e.name === slot.name)!;
  }

  private slotByName(name: string): ModelSlot<ServedModel> {
    const slot = this.slots.get(name);
    if (!slot) throw new ModelNotFound(`model "${name}" is not served; served models: ${[...this.slots.keys()].join(", ")}`, "name");
    return slot;
  }

  /**
   * Reads every model's folder (downloads run in parallel), then loads the models marked --load startup one at a
   * time, so each model's resident memory is measured apart from the others'. On-demand models load on first use.
   */
  async loadAll(configs: readonly ModelConfig[], hub: HubSettings): Promise<void> {
    const fail = (c: ModelConfig) => (e: unknown) => {
      throw new ModelLoadError(`model ${c.servedModelName} (${c.modelId}) failed to load: ${(e as Error).message}`);
    };
    const read = await Promise.all(
      configs.map((c) =>
        resolveModel(c.modelId, c.revision, c.dtype, hub)
          .then((r) => {
            const layout = readLayout(r.dir, r.files, c.dtype, c.poolingMethod, c.maxLength);
            return { layout, scope: modelCacheScope(c.modelId, r, layout) };
          })
          .catch(fail(c)),
      ),
    );
    configs.forEach((c, i) => this.slots.set(c.servedModelName, new ModelSlot<ServedModel>(c, read[i]!.layout, read[i]!.scope)));
    // Before any model is measured: the runtime's one-time state is the process's, not the first model's.
    if (configs.length) {
      await primeRuntime(this.pool, configs[0]!.device).catch((e) => log.warn("runtime priming failed; the first model's measured memory includes the runtime's", { error: (e as Error).message }));
    }
    for (const slot of this.slots.values()) {
      if (slot.config.load === "startup") await this.lifecycle.load(slot);
      else log.info("model on demand", { model: slot.name, task: slot.layout.task, file: slot.layout.onnxFile });
    }
    this.loading = false;
    this.lifecycle.startSweeper();
  }

  /** Builds a model: sessions, tokenizer, engines, warm-up, memory budget; then starts its engines. */
  private async build(slot: ModelSlot<ServedModel>): Promise<ServedModel> {
    const c = slot.config;
    let m: ServedModel | null = null;
    try {
      m = await this.loadOne(c, slot.layout, slot.cacheScope);
      await this.warmUp(m);
      this.applyMemoryBudget(m);
      await this.checkQuantizationRanges(m);
    } catch (e) {
      if (m) await this.release(m);
      throw new ModelLoadError(`model ${c.servedModelName} (${c.modelId}) failed to load: ${(e as Error).message}`);
    }
    if (m.task === "embed" && m.layout.poolingSource === "--pooling-method" && poolingOf(m.layout, m.session).method === "sentence_embedding") {
      log.warn("--pooling-method ignored: the export pools inside its graph (sentence_embedding output)", { model: m.name, pooling_method: m.layout.pooling });
    }
    m.engine.start();
    if (m.task === "embed") {
      m.media?.engine.start();
      if (typeof m.tokens !== "string") m.tokens.start();
    }
    if (m.task === "multivector") m.colpali?.images.start();
    log.info("model ready", {
      model: m.name,
      task: m.task,
      file: m.layout.onnxFile,
      provider: m.provider,
      dtype: m.layout.dtype,
      pooling: m.task === "embed" ? `${poolingOf(m.layout, m.session).method} (${poolingOf(m.layout, m.session).source})` : undefined,
      max_length: m.layout.maxLength,
      batch_size: m.config.batchSize,
      max_batch_tokens: `${m.engine.batchLimits.maxBatchTokens} (${m.maxBatchTokensSource})`,
      memory_mb: Math.round(m.memoryBytes / 1048576),
      warmup_tokens_per_s: m.warmupTokensPerSecond ? Math.round(m.warmupTokensPerSecond) : undefined,
      run_overhead_tokens: `${m.engine.batchLimits.runOverheadTokens} (${m.runOverheadSource})`,
      instances: `${m.session.instances} x ${m.session.settings.numThreads} threads (${m.instancesSource})`,
      instances_mb: m.session.instanceStatus.map((w) => Math.round(w.memoryBytes / 1048576)).join(", "),
    });
    return m;
  }

  /** Stops a model's engines and frees its sessions (their inference workers end), then returns the memory. */
  private async release(m: ServedModel): Promise<void> {
    for (const e of enginesOf(m)) e.stop();
    if (m.task === "embed" && m.media) await m.media.session?.release().catch(() => {});
    await m.session.release().catch(() => {});
    m.logitsGraph?.remove();
    if (m.task === "embed") m.media?.split?.remove();
    await this.pool.unload(m.name).catch(() => {});
    returnFreedMemory();
  }

  private async loadOne(c: ModelConfig, layout: ModelLayout, cacheScope: string): Promise<ServedModel> {
    const sessions: ModelSession[] = [];
    const graphs: Removable[] = [];
    try {
      return await this.assemble(c, layout, cacheScope, sessions, graphs);
    } catch (e) {
      // A model that fails after its sessions were created (tokenizer, media preprocessor) must not leave their
      // inference workers running: with on-demand loading a failed load can be tried again and again.
      for (const s of sessions) await s.release().catch(() => {});
      for (const g of graphs) g.remove();
      throw e;
    }
  }

  /** Sessions, tokenizer and engines of one model; every session created is pushed to `sessions`. */
  private async assemble(c: ModelConfig, layout: ModelLayout, cacheScope: string, sessions: ModelSession[], graphs: Removable[]): Promise<ServedModel> {
    for (const w of layout.warnings) log.warn(w, { model: c.servedModelName });
    if (c.idfMissingWeight !== 0 && !layout.sparse?.query?.idf) {
      throw new ModelLoadError(`--idf-missing-weight ${c.idfMissingWeight} applies to inference-free sparse models with an idf.json (the older OpenSearch layout); this model has none`);
    }
    // Read before any session exists: a bad file fails the load at once.
    if (c.quantizationRanges && layout.task !== "embed" && layout.task !== "hybrid") {
      throw new ModelLoadError(`--quantization-ranges applies to dense embedding models; this is a ${layout.task} model`);
    }
    const quantizationRanges = c.quantizationRanges ? readQuantizationRanges(c.quantizationRanges) : null;
    const rssBefore = process.memoryUsage().rss;
    const worker = (label: string): WorkerOptions => ({
      label,
      timeoutMs: c.inferenceTimeoutSeconds * 1000,
      onFault: () => this.metrics?.workerRestarts.inc({ model: label }),
    });
    // PyLate's 1_Dense: onnxruntime projects every token vector in the worker, right after the model.
    const colbertDense = layout.task === "multivector" && layout.multivector?.densePath != null ? readDenseLayers(layout.dir, layout.dense) : [];
    // BAAI's bge-m3 layout: the pickled sparse / ColBERT heads run in the worker too, on the token states.
    const pickled = layout.hybrid?.format === "hidden" ? readPickledHeads(layout.dir, layout.hybrid.pickledHeads, layout.hiddenSize) : null;
    const head = colbertDense.length
      ? colbertHead(onnxOutputNames(join(layout.dir, layout.onnxFile)), colbertDense)
      : pickled ? pickledHeadsHead(layout.hybrid!, pickled) : undefined;
    // ColBERT inserts a prefix token after tokenizing: the tokenizer truncates one token shorter.
    const tokenizeLength = layout.multivector ? multiVectorTokenizeLength(layout.multivector) : layout.maxLength;
    let encoder = await Encoder.create(layout.tokenizerJson, layout.tokenizerConfig, tokenizeLength);
    const padId = padTokenId(layout.tokenizerJson, layout.tokenizerConfig, layout.configJson, encoder);
    const key = c.servedModelName;
    const template = layout.rerankTemplate ? await templateTokens(encoder, layout.rerankTemplate, layout.maxLength) : null;
    // A decoder reranker's pair text is truncated to what its prompt leaves of the max length.
    const textLength = template ? template.bodyLength : tokenizeLength;
    if (template) encoder = await Encoder.create(layout.tokenizerJson, layout.tokenizerConfig, textLength);
    // LLM rerankers read the no/yes logits at the last position: a graph that computes every position's full
    // vocabulary is rewritten so its lm_head reads only the last position, and only those two columns where it can
    // (model/logits-graph.ts), or kept with the reason logged.
    const causalReranker = template?.yes !== undefined;
    const sourceGraph = join(layout.dir, layout.onnxFile);
    // A combined multimodal export runs as one graph per tower when it can be split (the text session gets the text one).
    const split = layout.media?.combined ? splitTowers(layout, key) : null;
    if (split) graphs.push(split);
    // Dynamically quantized exports quantize each activation over the whole batch: rewritten so each input gets the
    // numbers it gets alone (model/rowwise-quant.ts), or kept with the reason logged.
    const rowwise = rowwiseQuantGraph(split?.text ?? sourceGraph, split?.externalDataDir, layout.modelType);
    const rowwiseGraph = rowwise && "path" in rowwise ? rowwise : null;
    if (rowwiseGraph) {
      graphs.push(rowwiseGraph);
      log.info(`${layout.onnxFile}: dynamic int8 quantization made per input (graph rewritten at load): each input's numbers do not depend on its batch`, { model: key, quantizers: rowwiseGraph.quantizers });
    } else if (rowwise && "reason" in rowwise) {
      log.warn(`${layout.onnxFile} quantizes activations over the whole batch and could not be rewritten per input: an input's numbers move slightly with the other inputs of its batch`, { model: key, reason: rowwise.reason });
    }
    const logits = causalReranker ? lastPositionGraph(rowwiseGraph?.path ?? sourceGraph, "logits", [template.no!, template.yes!]) : null;
    const logitsGraph = logits && "path" in logits ? logits : null;
    if (logitsGraph) graphs.push(logitsGraph);
    const graphPath = logitsGraph?.path ?? rowwiseGraph?.path ?? split?.text ?? sourceGraph;
    // Rewritten graphs read their external data from the export's folder.
    const externalDataDir = logitsGraph || rowwiseGraph || split ? dirname(resolve(sourceGraph)) : undefined;
    const newSession = (numThreads: number, instances: number) =>
      ModelSession.create(graphPath, { device: c.device, numThreads, externalDataDir }, worker(c.servedModelName), head, instances);
    const session = await newSession(c.numThreads, c.instances || 1);
    sessions.push(session);
    // Every engine over this session dispatches to one runner per instance (the session picks a free instance).
    const each = <X>(runner: X): X[] => Array.from({ length: session.instances }, () => runner);
    const mediaInput = layout.media ? (layout.media.modality === "image" ? IMAGE_INPUT : AUDIO_INPUT) : layout.colpali ? IMAGE_INPUT : null;
    const adapters = layout.taskAdapters;
    const unfed = session.inputNames.filter((n) => !isTextInput(n) && n !== mediaInput && !(n === TASK_ID_INPUT && adapters));
    if (unfed.length) {
      throw new ModelLoadError(
        `${layout.onnxFile} takes input${unfed.length > 1 ? "s" : ""} this server cannot feed: ${unfed.join(", ")} ` +
          `(it feeds input_ids, attention_mask, token_type_ids, position_ids, empty past_key_values, num_logits_to_keep${mediaInput ? `, ${mediaInput}` : ""}). ` +
          `A plain export of the model (optimum-cli export onnx --model <id> <dir>) may take only those`,
      );
    }
    if (adapters && (!session.hasInput(TASK_ID_INPUT) || layout.task !== "embed" || layout.media)) {
      throw new ModelLoadError(
        `config.json declares task adapters (lora_adaptations: ${adapters.names.join(", ")}) but ${layout.onnxFile} ` +
          (session.hasInput(TASK_ID_INPUT) ? `is not a text embedder` : `has no ${TASK_ID_INPUT} input: which adapter it runs is unknown`),
      );
    }
    // Inputs with no task asked for (warm-up) run the default adapter.
    const defaultTaskId = adapters ? Math.max(0, adapters.names.indexOf(DEFAULT_ADAPTER_TASK)) : undefined;
    await this.pool.load(key, layout.tokenizerJson, layout.tokenizerConfig, textLength);
    // On CPU a batch runs fastest per token at a few hundred tokens (cache); past ~1000 it slows down, while GPUs
    // want large batches. An input longer than the budget runs alone (selectBatch), so the budget is not raised to
    // the model's max length: a long-context model keeps small batches for its short inputs.
    let maxBatchTokens = c.maxBatchTokens || (session.provider === "cpu" ? CPU_BATCH_TOKENS : GPU_BATCH_TOKENS);
    // The RSS growth can hide behind memory the process already had; the weights are resident at least.
    const sessionBytes = () => Math.max(process.memoryUsage().rss - rssBefore, layout.weightBytes);
    const activationBytesPerToken = estimateActivationBytesPerToken(layout.configJson);
    // An LLM reranker export without num_logits_to_keep returns [batch, seq, vocab] logits: the batch is cut (before
    // warm-up, which runs a full batch) so they fit --memory-budget-mb with the activations, or FULL_LOGITS_MAX_BYTES.
    let llmLogits: string | null = null;
    if (logitsGraph) {
      const columns = logitsGraph.columns ? `, vocabulary columns ${logitsGraph.columns.join(", ")} (no, yes)` : "";
      llmLogits = `last position${columns} (graph rewritten at load: a Slice before ${logitsGraph.head})`;
      log.info(`${layout.onnxFile}: the lm_head reads the last position only (graph rewritten at load)`, { model: key, lm_head: logitsGraph.head, columns: logitsGraph.columns?.join(",") });
    } else if (logits && "kept" in logits) llmLogits = logits.kept;
    else if (logits && "reason" in logits) {
      llmLogits = `every position (${logits.reason})`;
      log.warn(`${layout.onnxFile} computes every position's logits: the graph could not be cut to the last position`, { model: key, reason: logits.reason });
    }
    const logitsBytes = fullLogitsBytesPerToken(layout.configJson, session.inputNames, causalReranker && !logitsGraph);
    if (logitsBytes) {
      const planned = c.memoryBudgetMb
        ? Math.min(maxBatchTokens, tokenBudgetWithin(c.memoryBudgetMb, sessionBytes(), activationBytesPerToken + logitsBytes, layout.maxLength, key))
        : fullLogitsTokenBudget(logitsBytes, maxBatchTokens, layout.maxLength).tokens;
      const mb = (bytes: number) => Math.round(bytes / 1048576);
      log.info(`${layout.onnxFile} returns full-vocabulary logits for every position (no ${KEEP_LOGITS_INPUTS.join(" / ")} input)`, {
        model: key,
        logits_bytes_per_token: logitsBytes,
        max_batch_tokens: planned,
        was: planned < maxBatchTokens ? maxBatchTokens : undefined,
        batch_logits_mb: mb(planned * logitsBytes),
        plan: c.memoryBudgetMb ? `--memory-budget-mb ${c.memoryBudgetMb}` : `${mb(FULL_LOGITS_MAX_BYTES)} MB of logits per batch`,
      });
      if (layout.maxLength > planned) {
        log.warn("an input longer than the batch token budget runs alone: its logits pass the plan", {
          model: key, max_length: layout.maxLength, longest_input_logits_mb: mb(layout.maxLength * logitsBytes),
          fix: "an export with a num_logits_to_keep input returns one position's logits",
        });
      }
      maxBatchTokens = planned;
    }
    const limits = { maxBatchSize: c.batchSize, maxBatchTokens, maxQueueSize: c.maxQueueSize, runOverheadTokens: c.runOverheadTokens || DEFAULT_RUN_OVERHEAD_TOKENS };
    const tokenize = (texts: string[], firsts?: string[], options?: EncodeOptions): Promise<Encoded[]> => {
      // A worker round trip costs more than tokenizing a few short texts, so small requests stay here.
      let chars = 0;
      for (let i = 0; i < texts.length; i++) chars += texts[i]!.length + (firsts ? firsts[i]!.length : 0);
      const opts = options?.direction ? { direction: options.direction } : undefined;
      if (chars > INLINE_TOKENIZE_CHARS) return this.pool.encode(key, texts, firsts, opts);
      return encoder.encodeBatch(texts, firsts, opts);
    };
    const base = {
      name: key,
      config: c,
      layout,
      provider: session.provider,
      padId,
      memoryBytes: 0,
      sessionBytes: 0,
      activationBytesPerToken: activationBytesPerToken + logitsBytes,
      fullLogitsBytesPerToken: logitsBytes,
      llmLogits,
      logitsGraph,
      warmupTokensPerSecond: 0,
      runOverheadSource: (c.runOverheadTokens > 0 ? "flag" : "default") as ServedModel["runOverheadSource"],
      calibrationOtherLoad: null,
      maxBatchTokensSource: (c.maxBatchTokens > 0 ? "flag" : "default") as ServedModel["maxBatchTokensSource"],
      instancesSource: (c.instances > 0 ? "flag" : "default") as ServedModel["instancesSource"],
      instancesReason: c.instances > 0 ? `--instances ${c.instances}` : c.modelWarmup ? "one session" : "one session: --no-model-warmup (nothing timed)",
      newSession,
      encode: async (texts: string[], firsts?: string[], options?: EncodeOptions & { instruction?: string; taskId?: number }) => {
        if (template && firsts) {
          // Decoder rerankers: each pair as one text inside the template's prompt.
          const instruction = options?.instruction ?? layout.rerankTemplate!.instruction;
          const bodies = await tokenize(texts.map((d, i) => llmRerankText(firsts[i]!, d, instruction)));
          return bodies.map((e) => template.wrap(e));
        }
        const encoded = await tokenize(texts, firsts, options);
        if (defaultTaskId !== undefined) for (const e of encoded) e.taskId = options?.taskId ?? defaultTaskId;
        return encoded;
      },
      encoder,
      session,
      cacheScope,
      quantizationRanges,
    };
    const batches = tokenBatches(padId, layout.paddingSide);
    const engine = <R>(reader: TaskReader<R>) => new Engine<R>(key, each(sessionRunner(session, reader)), batches, limits, this.metrics);
    if (layout.media) {
      if (layout.task !== "embed") throw new ModelLoadError(`${layout.architecture} with ${layout.media.modality} inputs can only serve embeddings`);
      const media = layout.media;
      const image = media.modality === "image";
      const inputName = image ? IMAGE_INPUT : AUDIO_INPUT;
      const shape = image ? imageInputShape(media) : audioInputShape(media);
      const mediaReader = image ? imageReader : audioReader;
      const textReader = textTowerReader;
      let mediaSession: ModelSession | null = null;
      let textRunner: Runner<Float32Array>;
      let towerRunner;
      if (media.combined && !split) {
        textRunner = combinedTextRunner(session, textReader, mediaDummy(inputName, shape));
        towerRunner = mediaRunner(session, mediaReader, inputName, textDummy(padId));
      } else {
        mediaSession = await ModelSession.create(split?.media ?? join(layout.dir, media.mediaFile), { device: c.device, numThreads: c.numThreads, externalDataDir: split?.externalDataDir }, worker(`${c.servedModelName}/${media.modality}`));
        sessions.push(mediaSession);
        textRunner = sessionRunner(session, textReader);
        towerRunner = mediaRunner(mediaSession, mediaReader, inputName);
      }
      if (!this.mediaPool) throw new ModelLoadError("media models need the media worker pool");
      const pool = this.mediaPool;
      const mediaKey = `${key}#${media.modality}`;
      await pool.load({ key: mediaKey, modality: media.modality, preprocessor: media.preprocessor, imageSize: media.imageSize, maxPixels: this.mediaLimits.maxImagePixels });
      // Each media input costs 1 in the batch budget: a batch holds up to --batch-size of them.
      const towerLimits = { ...limits, maxBatchTokens: c.batchSize };
      const tower: MediaTower = {
        modality: media.modality,
        engine: new Engine(`${key}/${media.modality}`, mediaSession ? towerRunner : each(towerRunner), featureBatches(shape), towerLimits, this.metrics),
        session: mediaSession,
        split,
        prepare: (files) => pool.process(mediaKey, files),
      };
      const bytes = sessionBytes();
      const tokens = `its text tower gives pooled ${media.modality === "image" ? "image-text" : "audio-text"} projections, not per-token states`;
      return { ...base, memoryBytes: bytes, sessionBytes: bytes, task: "embed", engine: new Engine(key, each(textRunner), tokenBatches(padId, layout.paddingSide, media.textLength), limits, this.metrics), media: tower, tokens };
    }
    if (layout.colpali) {
      if (!this.mediaPool) throw new ModelLoadError("ColPali models need the media worker pool");
      const cp = layout.colpali;
      if (!session.inputNames.includes(IMAGE_INPUT)) throw new ModelLoadError(`${layout.onnxFile}: a ColPali graph takes ${IMAGE_INPUT}; this one takes ${session.inputNames.join(", ")}`);
      // ColPaliProcessor tokenizes without the tokenizer's special tokens, ColModernVBertProcessor with them.
      const tokenize = async (text: string) => (await encoder.tokens(text, cp.kind === "idefics3")).map((t) => t.id);
      const tokens = await colpaliTokens(cp, layout.tokenizerConfig, tokenize, (t) => encoder.tokenId(t), encoder.singleSpecials, (id) => encoder.tokenOf(id));
      const output = colpaliOutput(session.outputNames);
      const tile = cp.kind === "idefics3" ? idefics3ConfigFrom(cp.preprocessor, cp.imageSize).tile : null;
      const shape = tile !== null ? [3, tile, tile] : pixelShape(imageConfigFrom(cp.preprocessor, cp.imageSize));
      const pool = this.mediaPool;
      const mediaKey = `${key}#image`;
      await pool.load({ key: mediaKey, modality: "image", preprocessor: cp.preprocessor, imageSize: cp.imageSize, maxPixels: this.mediaLimits.maxImagePixels });
      const probe = await encoder.encodeBatch([colpaliQueryText(cp, tokens, "a"), colpaliQueryText(cp, tokens, "a b")]);
      const batches = multiVectorBatches(padId);
      const probeBatch = batches.assemble(probe.map((e, i) => colpaliQueryInput(e, tokens, layout.maxLength, `probe[${i}]`))).tensors;
      // ColModernVBERT's pixel_values are [batch, tiles, 3, tile, tile]: a query batch gets one zero tile.
      const queryPixels = cp.kind === "idefics3" ? [1, ...shape] : shape;
      const { runner: queries, oneImage } = await colpaliQueryRunner(session, output, queryPixels, probeBatch);
      if (!oneImage) log.info("ColPali graph takes one pixel_values row per text row: queries are fed one zero image each", { model: key });
      const deps: ImageModelDeps = { key, layout: cp, tokens, session, output, shape, limits, metrics: this.metrics, pool, mediaKey, instances: session.instances };
      const colpali = cp.kind === "idefics3" ? await tiledImageModel(deps, padId, layout.maxLength, tokenize) : fixedImageModel(deps);
      const bytes = sessionBytes();
      return {
        ...base, memoryBytes: bytes, sessionBytes: bytes, task: "multivector", colbert: null,
        engine: new Engine<MultiVector, MultiVectorInput, MultiVectorBatch>(key, each(queries), batches, limits, this.metrics),
        colpali,
      };
    }
    const bytes = sessionBytes();
    const measured = { ...base, memoryBytes: bytes, sessionBytes: bytes };
    switch (layout.task) {
      case "embed": {
        // Per-token states come from the same session, on their own engine (their results are matrices).
        const tokens: TokenStates = tokenStatesOutput(session.outputNames)
          ? engine(tokenStatesReader)
          : `its ONNX export gives only pooled outputs (${session.outputNames.join(", ")}), no per-token ${TOKEN_STATE_OUTPUTS.join(" / ")}`;
        return { ...measured, task: "embed", engine: engine(embedReader(layout.pooling, undefined, denseHead(layout, session))), media: null, tokens };
      }
      case "rerank":
        return { ...measured, task: "rerank", engine: engine(template?.yes === undefined ? rerankReader : logitsGraph?.columns ? yesNoReader(logitsGraph.columns.indexOf(template.yes), logitsGraph.columns.indexOf(template.no!)) : yesNoReader(template.yes, template.no!)) };
      case "classify":
        return { ...measured, task: "classify", engine: engine(classifyReader) };
      case "sparse":
      {
        // The older OpenSearch layout's documents leave out the special tokens, as its model card does.
        const drop = layout.sparse!.dropSpecialTokens ? specialTokenIds(layout.tokenizerConfig, (t) => encoder.tokenId(t)) : new Set<number>();
        return { ...measured, task: "sparse", engine: engine(spladeReader(layout.sparse!, drop)), sparseQuery: await sparseQueryOf(layout, c.idfMissingWeight) };
      }
      case "multivector": {
        const cfg = layout.multivector!;
        // PyLate's 1_Dense projects each token vector (the session's head); a Stanford-style graph projects inside.
        const dense = colbertDense;
        const tokens = colbertTokens(cfg, (t) => encoder.tokenId(t), encoder.singleSpecials, layout.tokenizerConfig);
        const runner = multiVectorRunner(session);
        const mv = new Engine<MultiVector, MultiVectorInput, MultiVectorBatch>(key, each(runner), multiVectorBatches(padId), limits, this.metrics);
        return { ...measured, task: "multivector", engine: mv, colbert: { layout: cfg, tokens, dim: dense.length ? dense[dense.length - 1]!.outFeatures : null }, colpali: null };
      }
      case "hybrid": {
        const hybrid = { layout: layout.hybrid!, unused: unusedTokenIds(layout.tokenizerConfig, (t) => encoder.tokenId(t)) };
        const runner = hybridRunner(session, hybrid.layout, layout.pooling, hybrid.unused);
        const engine = new Engine<HybridResult, HybridInput, HybridBatch>(key, each(runner), hybridBatches(padId, layout.paddingSide), limits, this.metrics);
        return { ...measured, task: "hybrid", engine, hybrid };
      }
    }
  }

  /** Calibration ranges must have the size of the model's vectors: measured on one short text. */
  private async checkQuantizationRanges(m: ServedModel): Promise<void> {
    const ranges = m.quantizationRanges;
    if (!ranges) return;
    let dim: number | null = null;
    if (m.task === "embed") {
      m.engine.start();
      const out = await m.engine.submit(await m.encode(["dimension probe"]));
      dim = out.results[0]!.length;
    } else if (m.task === "hybrid") dim = m.layout.hiddenSize;
    if (dim !== ranges.min.length) {
      throw new ModelLoadError(`--quantization-ranges ${m.config.quantizationRanges}: ${ranges.min.length} dimensions, but the model's vectors have ${dim ?? "an unknown number of"}`);
    }
  }

  /** Runs full-size batches before serving, measures speed and the memory the session's arenas take. */
  private async warmUp(m: ServedModel): Promise<void> {
    if (!m.config.modelWarmup) return;
    const rssBefore = process.memoryUsage().rss;
    // The model's memory beside its session instances (tokenizer, engines), as the load measured it.
    const besideSessions = Math.max(0, m.memoryBytes - m.session.createBytes);
    const sentence = "The quick brown fox jumps over the lazy dog. ";
    const colpali = m.task === "multivector" ? m.colpali : null;
    // ColPali's text is queries (a long one is refused, not cut): warm up with short ones.
    const text = sentence.repeat(colpali ? 2 : Math.ceil(m.layout.maxLength / 8));
    const count = Math.max(1, Math.min(m.config.batchSize, Math.floor(m.engine.batchLimits.maxBatchTokens / m.layout.maxLength)));
    const texts = Array.from({ length: count }, () => text);
    const encodeFor = async (texts: string[]) => {
      if (colpali) {
        const encoded = await m.encode(texts.map((t) => colpaliQueryText(colpali.layout, colpali.tokens, t)));
        return encoded.map((e, i) => colpaliQueryInput(e, colpali.tokens, m.layout.maxLength, `warm-up[${i}]`));
      }
      const encoded: { ids: ArrayLike<number> }[] = m.task === "rerank" ? await m.encode(texts, texts) : await m.encode(texts);
      if (m.task === "hybrid") return (encoded as Encoded[]).map((e) => ({ ...e, sparse: true, multiVector: true }));
      return m.task === "multivector" && m.colbert ? (encoded as Encoded[]).map((e) => colbertInput(e, "document", m.colbert.layout, m.colbert.tokens)) : encoded;
    };
    let encoded = await encodeFor(texts);
    if (m.fullLogitsBytesPerToken) {
      // A full-logits export warms up within its logits plan: each row cut (from the front, keeping the prompt's
      // suffix) to the batch token budget, as a long input would otherwise run alone past it.
      const cap = m.engine.batchLimits.maxBatchTokens;
      encoded = (encoded as Encoded[]).map((e) => (e.ids.length > cap ? { ...e, ids: e.ids.slice(e.ids.length - cap) } : e));
    }
    // The engine is not started yet: run its runner directly through a temporary start.
    const engine = m.engine as unknown as Engine<unknown, unknown, unknown>;
    engine.start();
    const t0 = performance.now();
    let tokens = 0;
    // Twice on every instance, one run at a time, so each instance's arena is grown and measured (its memory).
    for (let i = 0; i < 2; i++) {
      await m.session.warmEach(() => engine.submit(encoded));
      tokens += m.session.instances * encoded.reduce((s, e) => s + e.ids.length, 0);
    }
    const seconds = (performance.now() - t0) / 1000;
    m.warmupTokensPerSecond = tokens / seconds;
    if (m.config.maxBatchTokens === 0) await this.calibrateTokenBudget(m, engine, sentence, encodeFor);
    if (m.config.instances === 0) await this.calibrateInstances(m, engine, encoded, m.memoryBytes + Math.max(0, process.memoryUsage().rss - rssBefore));
    if (m.config.runOverheadTokens === 0) {
      // Batches of 1, 2, 4 and 8 identical rows of about 32 tokens (within the batch size and the token budget: never
      // a batch past it, so the arena does not grow). What the batcher weighs is a new run against more rows in one
      // run, so the line is fitted over rows at one length: rows add linear work, where longer single rows would add
      // attention's quadratic cost and bend the line (on the bench model, single rows of 12-512 tokens fitted 2
      // tokens where 12-132 fitted 23). Rows also catch what a one-row run wastes beyond its fixed cost (a matrix of
      // one short row uses the cores poorly).
      const row = (await encodeFor([sentence.repeat(3)]))[0]!;
      const maxRows = Math.min(m.config.batchSize, Math.floor(m.engine.batchLimits.maxBatchTokens / Math.max(1, row.ids.length)));
      const sizes = [1, 2, 4, 8].filter((n) => n <= maxRows);
      // Five rounds over the sizes, the fastest run of each kept: a load spike then slows one run of every size
      // instead of all runs of one.
      const timings: RunTiming[] = sizes.map((n) => ({ tokens: n * row.ids.length, ms: Infinity }));
      const others = new OtherLoad();
      others.start();
      for (let round = 0; round < 5; round++) {
        for (const [i, n] of sizes.entries()) {
          const batch = Array.from({ length: n }, () => row);
          const t = performance.now();
          await engine.submit(batch);
          timings[i]!.ms = Math.min(timings[i]!.ms, performance.now() - t);
        }
      }
      const busy = this.noteCalibrationLoad(m, others.stop());
      const fit = busy ? null : fitRunOverhead(timings);
      if (fit) {
        m.engine.setRunOverheadTokens(fit.tokens);
        m.runOverheadSource = "calibrated";
      }
      log.info("run overhead", {
        model: m.name,
        runs: timings.map((x, i) => `${sizes[i]}x${row.ids.length} ${x.ms.toFixed(2)} ms`).join(", "),
        fixed_ms: fit ? +fit.fixedMs.toFixed(2) : undefined,
        ms_per_token: fit ? +fit.msPerToken.toFixed(4) : undefined,
        tokens: m.engine.batchLimits.runOverheadTokens,
        source: m.runOverheadSource,
        ...(busy ? { not_used: busy } : {}),
      });
    }
    if (m.task === "embed" && m.media) {
      // One zero input through the media tower, so its first request does not pay for session initialisation.
      const tower = m.media;
      tower.engine.start();
      const size = tower.modality === "image" ? imageInputShape(m.layout.media!) : audioInputShape(m.layout.media!);
      await tower.engine.submit([new Float32Array(size.reduce((a, b) => a * b, 1))]);
    }
    if (colpali) {
      colpali.images.start();
      await colpali.warmUpImages();
    }
    // Every instance counts: the growth over warm-up (arenas, and instances calibration kept), and at least what
    // the instances were measured to take.
    m.memoryBytes = Math.max(m.memoryBytes + Math.max(0, process.memoryUsage().rss - rssBefore), besideSessions + m.session.memoryBytes);
    const padded = count * Math.max(...encoded.map((e) => e.ids.length));
    // One batch's activations: the largest arena one instance's warm-up runs grew.
    m.activationBytesPerToken = Math.max(m.activationBytesPerToken, m.session.maxRunBytes / padded);
  }

  /**
   * Records the other processes' load over one calibration span; returns why its timings are not used (the machine
   * was busier than calibrationTrusted allows: they would set the budget or overhead for good from a passing
   * spell), or null when they are.
   */
  private noteCalibrationLoad(m: ServedModel, others: number | null): string | null {
    if (others === null) return null;
    m.calibrationOtherLoad = Math.max(m.calibrationOtherLoad ?? 0, +others.toFixed(2));
    if (calibrationTrusted(others, availableParallelism())) return null;
    const why = `other processes used ${others.toFixed(2)} of ${availableParallelism()} cores while it was timed: the timings are not used`;
    log.warn("warm-up calibration on a busy machine", { model: m.name, other_load_cores: +others.toFixed(2), note: why });
    return why;
  }

  /**
   * --max-batch-tokens 0 (auto): times batches of identical rows at doubling sizes on the model's own session and
   * keeps the size batcher.ts's chooseBudget picks (policy there). Each size runs once first (its arena grown, not
   * counted), then is timed as the fastest of five runs; the first TOKEN_BUDGET_FIRST sizes are timed in interleaved
   * rounds and each later size alternately with the one before, so a slow spell of the machine slows both sides of a
   * comparison, not one. Not timed (the provider's constant stays): several instances (a batch could land on
   * either), a full-logits LLM reranker (its budget is planned from the logits' memory) and ColPali (fixed-size
   * queries). The climb never passes what --memory-budget-mb leaves for one batch per instance.
   */
  private async calibrateTokenBudget(m: ServedModel, engine: Engine<unknown, unknown, unknown>, sentence: string, encodeFor: (texts: string[]) => Promise<{ ids: ArrayLike<number> }[]>): Promise<void> {
    const skip = m.session.instances > 1 ? `${m.session.instances} instances` : m.fullLogitsBytesPerToken ? "full-vocabulary logits (budget planned from their memory)" : m.task === "multivector" && m.colpali ? "ColPali" : null;
    if (skip) return void log.info("token budget not timed", { model: m.name, reason: skip, max_batch_tokens: m.engine.batchLimits.maxBatchTokens });
    const before = m.engine.batchLimits.maxBatchTokens;
    const cap = m.config.memoryBudgetMb ? tokenBudgetWithin(m.config.memoryBudgetMb, m.sessionBytes, m.activationBytesPerToken, m.layout.maxLength, m.name) : Infinity;
    // Rows of about the shape's length: the tokens one sentence adds, measured (a pair template or prefix adds its own).
    const one = (await encodeFor([sentence]))[0]!.ids.length;
    const perSentence = Math.max(1, (await encodeFor([sentence.repeat(2)]))[0]!.ids.length - one);
    const batches = new Map<BudgetTiming, readonly { ids: ArrayLike<number> }[]>();
    const timeOnce = async (t: BudgetTiming, counted: boolean) => {
      m.engine.setMaxBatchTokens(budgetTokens(t));
      const start = performance.now();
      await engine.submit(batches.get(t)!);
      if (counted) t.ms = Math.min(t.ms, performance.now() - start);
    };
    const timings: BudgetTiming[] = [];
    const others = new OtherLoad();
    others.start();
    for (let target = TOKEN_BUDGET_START; keepClimbing(timings); target *= 2) {
      const previous = timings.at(-1);
      const shape = budgetShape(target, m.layout.maxLength, m.config.batchSize, previous ? budgetTokens(previous) : 0);
      if (!shape) break;
      const row = (await encodeFor([sentence.repeat(Math.max(1, 1 + Math.round((shape.length - one) / perSentence)))]))[0]!;
      const timing: BudgetTiming = { rows: shape.rows, length: row.ids.length, ms: Infinity };
      if (budgetTokens(timing) > cap || (previous && budgetTokens(timing) <= budgetTokens(previous))) break;
      batches.set(timing, Array.from({ length: shape.rows }, () => row));
      await timeOnce(timing, false);
      timings.push(timing);
      if (timings.length < TOKEN_BUDGET_FIRST) continue;
      const round = timings.length === TOKEN_BUDGET_FIRST ? timings : [previous!, timing];
      for (let r = 0; r < 5; r++) for (const t of round) await timeOnce(t, true);
    }
    // Fewer sizes than the interleaved rounds need (a short max length or a small memory budget): time them now.
    if (timings.length < TOKEN_BUDGET_FIRST) for (let r = 0; r < 5; r++) for (const t of timings) await timeOnce(t, true);
    const busy = this.noteCalibrationLoad(m, others.stop());
    const chosen = busy ? null : chooseBudget(timings, m.provider === "cpu" ? CPU_BATCH_TOKENS : GPU_BATCH_TOKENS);
    const tokens = chosen ? budgetTokens(chosen) : before;
    m.engine.setMaxBatchTokens(tokens);
    if (m.task === "embed" && typeof m.tokens !== "string") m.tokens.setMaxBatchTokens(tokens);
    if (chosen) m.maxBatchTokensSource = "calibrated";
    log.info("token budget", {
      model: m.name,
      batches: timings.map((t) => `${t.rows}x${t.length} ${Math.round((budgetTokens(t) / t.ms) * 1000)} tokens/s`).join(", "),
      max_batch_tokens: tokens,
      source: m.maxBatchTokensSource,
      ...(busy ? { not_used: busy } : {}),
    });
  }

  /**
   * --instances 0 (the default): one session with all cores against single-threaded sessions, one per core (up to
   * MAX_CALIBRATED_INSTANCES, the cores split evenly), each warmed once per instance and then timed on the warm-up
   * batch submitted 2 x instances times at once, alternating, the better of two rounds each; the instances stay when
   * chooseInstances finds they pay for their memory (and fit the budgets), else the one session. Only on CPU, with
   * --num-threads not given and 2 cores or more, and for models whose engines all run on the one session (no separate
   * media tower, not ColPali); otherwise one instance. `oneBytes`: the model's memory so far, with the one session.
   */
  private async calibrateInstances(m: ServedModel, engine: Engine<unknown, unknown, unknown>, encoded: readonly { ids: ArrayLike<number> }[], oneBytes: number): Promise<void> {
    const c = m.config;
    if (c.numThreadsSet) return void (m.instancesReason = `one session: --num-threads ${c.numThreads} given`);
    if (m.provider !== "cpu") return void (m.instancesReason = `one session: not calibrated on ${m.provider}`);
    if (c.numThreads < 2) return void (m.instancesReason = "one session: one core");
    if ((m.task === "embed" && m.media) || (m.task === "multivector" && m.colpali)) return void (m.instancesReason = "one session: a model with a media tower");
    const n = Math.min(MAX_CALIBRATED_INSTANCES, c.numThreads);
    const threads = Math.floor(c.numThreads / n);
    // Instances trade memory for speed, so the server makes that trade itself only within a memory budget the operator
    // set: without one the timing is not even run (it holds the one session and n candidates at once: the bench
    // model's server peaked at ~500 MiB during it, and kept 30-50 MiB of it with the one session kept).
    const room = this.lifecycle.roomFor(m.name);
    if (!Number.isFinite(room)) {
      m.instancesReason = `one session: instances are calibrated only within --max-models-memory-mb (each holds its own weights); --instances ${n} --num-threads ${threads} sets them`;
      return;
    }
    const mb = (b: number) => Math.round(b / 1048576);
    // The calibration holds the one session and the candidates together: both must fit the room.
    if (oneBytes + n * m.session.memoryBytes > room) {
      m.instancesReason = `one session: timing ${n} instances beside the one needs about ${mb(oneBytes + n * m.session.memoryBytes)} MB, over the ${mb(room)} MB --max-models-memory-mb leaves it`;
      return;
    }
    // --memory-budget-mb: n instances each running a batch at the token budget must fit it without cutting batches.
    if (c.memoryBudgetMb && n * (m.sessionBytes + m.engine.batchLimits.maxBatchTokens * m.activationBytesPerToken) > c.memoryBudgetMb * 1048576) {
      m.instancesReason = `one session: ${n} instances running a batch of ${m.engine.batchLimits.maxBatchTokens} tokens each would pass --memory-budget-mb ${c.memoryBudgetMb}`;
      return;
    }
    const engines = enginesOf(m);
    const tokens = encoded.reduce((s, e) => s + e.ids.length, 0);
    let candidate: ModelSession;
    try {
      candidate = await m.newSession(threads, n);
    } catch (e) {
      log.warn("instances: the candidate sessions could not be created; keeping one", { model: m.name, error: (e as Error).message });
      m.instancesReason = `one session: the candidate instances could not be created (${(e as Error).message})`;
      return;
    }
    const one = m.session.memoryBytes;
    const use = async (which: "one" | "candidate") => {
      // A run's answer reaches its caller before the engine takes its runner back: wait for that.
      await Promise.all(engines.map((e) => e.idle()));
      const want = which === "candidate" ? n : 1;
      if (m.session.instances !== want) m.session.exchange(candidate);
      for (const e of engines) e.setInstances(want);
    };
    const time = async (): Promise<number> => {
      const k = 2 * m.session.instances;
      const t0 = performance.now();
      await Promise.all(Array.from({ length: k }, () => engine.submit(encoded)));
      return (k * tokens) / ((performance.now() - t0) / 1000);
    };
    let oneSpeed = 0, manySpeed = 0, choice: { keep: boolean; reason: string };
    try {
      // The candidate's instances run their first batch one at a time (their arenas measured, as the one session's
      // were), so neither setting is timed cold.
      await use("candidate");
      await m.session.warmEach(() => engine.submit(encoded));
      const many = m.session.memoryBytes;
      await use("one");
      for (let round = 0; round < 2; round++) {
        oneSpeed = Math.max(oneSpeed, await time());
        await use("candidate");
        manySpeed = Math.max(manySpeed, await time());
        await use("one");
      }
      choice = chooseInstances({
        n, threads, allThreads: c.numThreads, oneTokensPerSecond: oneSpeed, manyTokensPerSecond: manySpeed,
        oneBytes, manyBytes: oneBytes - one + many, roomBytes: this.lifecycle.roomFor(m.name),
      });
      if (choice.keep) {
        await use("candidate");
        m.sessionBytes += candidate.createBytes - m.session.createBytes;
      }
    } finally {
      // The setting not kept: its workers end, and their memory goes back to the system.
      await candidate.release();
      returnFreedMemory();
    }
    m.instancesSource = "calibrated";
    m.instancesReason = choice.reason;
    log.info("instances", { model: m.name, chosen: `${m.session.instances} x ${m.session.settings.numThreads} threads`, reason: choice.reason });
  }

  /** Lowers a model's token budget so one batch's activations stay within its --memory-budget-mb. */
  private applyMemoryBudget(m: ServedModel): void {
    const budgetMb = m.config.memoryBudgetMb;
    if (!budgetMb) return;
    // Each instance runs a batch at once: the budget holds every instance's weights and one batch per instance.
    const tokens = tokenBudgetWithin(budgetMb, m.sessionBytes, m.activationBytesPerToken * m.session.instances, m.layout.maxLength, m.name);
    if (tokens < m.engine.batchLimits.maxBatchTokens) {
      m.engine.setMaxBatchTokens(tokens);
      if (m.task === "embed" && typeof m.tokens !== "string") m.tokens.setMaxBatchTokens(tokens);
      m.maxBatchTokensSource = "memory-budget";
      log.info("memory budget lowers the batch token budget", { model: m.name, max_batch_tokens: tokens, budget_mb: budgetMb, instances: m.session.instances });
    }
  }

  async idle(): Promise<void> {
    await Promise.all(this.list().flatMap((m) => enginesOf(m).map((e) => e.idle())));
  }

  async close(): Promise<void> {
    this.lifecycle.stop();
    for (const m of this.list()) await this.release(m);
  }
}
