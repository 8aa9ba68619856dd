// A loaded model as the rest of the server sees it: its layout, tokenizer, session(s) and engines, and what each
// family adds (media tower, ColPali images, ColBERT tokens, sparse queries, bge-m3 outputs); and its state.

import type { ModelConfig } from "../config";
import type { ModelLayout } from "../model/layout";
import type { Modality } from "../model/media-layout";
import type { ColPaliLayout } from "../model/colpali-layout";
import type { HybridLayout } from "../model/hybrid-layout";
import type { MultiVectorLayout } from "../model/multivector-layout";
import type { QuantizationRanges } from "../model/quantization-ranges";
import type { LastPositionGraph } from "../model/logits-graph";
import type { SplitTowers } from "../model/split";
import type { ModelSession, WorkerStatus } from "../model/session";
import type { SparseVector } from "../tasks/sparse";
import type { ColbertTokens, MultiVector, MultiVectorBatch, MultiVectorInput } from "../tasks/multivector";
import type { ColPaliTokens, TiledImageBatch, TiledImageInput } from "../tasks/colpali";
import type { HybridBatch, HybridInput, HybridResult } from "../tasks/hybrid";
import type { EncodeOptions, Encoded, Encoder } from "../tokenize/encode";
import type { Engine, EngineState } from "./engine";
import type { FeatureBatch } from "../tasks/batch-input";

/** What every served model has, whatever its family. */
export interface ServedBase {
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
  | (ServedBase & { task: "embed"; engine: Engine<Float32Array>; media: MediaTower | null; tokens: TokenStates })
  | (ServedBase & { task: "rerank"; engine: Engine<number> })
  | (ServedBase & { task: "classify"; engine: Engine<Float32Array> })
  | (ServedBase & { task: "sparse"; engine: Engine<SparseVector>; sparseQuery: SparseQuery | null })
  | (ServedBase & { task: "multivector"; engine: Engine<MultiVector, MultiVectorInput, MultiVectorBatch>; colbert: ColbertModel; colpali: null })
  // ColPali: the engine runs text queries; images go through colpali.images on the same session.
  | (ServedBase & { task: "multivector"; engine: Engine<MultiVector, MultiVectorInput, MultiVectorBatch>; colbert: null; colpali: ColPaliModel })
  | (ServedBase & { task: "hybrid"; engine: Engine<HybridResult, HybridInput, HybridBatch>; hybrid: HybridModel });

/** The query side of an inference-free sparse model: no model run, a static weight per token id. */
export interface SparseQuery {
  /** Each text's vector and its token count (content tokens, no special tokens). */
  encode(texts: string[]): Promise<{ vectors: SparseVector[]; tokens: number[] }>;
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

/** The inference worker of each session instance, for /health and /models. */
export function workersOf(m: ServedModel): Array<WorkerStatus & { threads: number }> {
  return sessionsOf(m).flatMap((s) => s.instanceStatus.map((w) => ({ ...w, threads: s.settings.numThreads })));
}

/** What a model embeds, for /models and error messages. */
export function modalitiesOf(m: ServedModel): Modality[] {
  return m.layout.modalities;
}

/** The engines of a model: its text engine, and its media tower's (or ColPali's image engine) when it has one. */
export function enginesOf(m: ServedModel): Array<Engine<any, any, any>> {
  if (m.task === "embed") return [m.engine, ...(m.media ? [m.media.engine] : []), ...(typeof m.tokens === "string" ? [] : [m.tokens])];
  if (m.task === "multivector" && m.colpali) return [m.engine, m.colpali.images];
  return [m.engine];
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
