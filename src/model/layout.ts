// Reads a model folder laid out as a HuggingFace hub repository: which task it serves, which ONNX file to load,
// and the sentence-transformers semantics (pooling, normalisation, max length, prompts). Knows nothing of requests.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Dtype, PoolingMethod } from "../config";
import { ModelLoadError } from "../errors";
import { onnxOutputNames, TOKEN_STATE_OUTPUTS, tokenStatesOutput } from "./onnx-graph";

export type Task = "embed" | "rerank" | "classify" | "sparse" | "multivector" | "hybrid";

/**
 * bge-m3 (hybrid): dense, lexical weights and multi-vectors from one run. Either aapot/bge-m3-onnx's export (one graph
 * with outputs dense_vecs, sparse_vecs, colbert_vecs) or BAAI/bge-m3's layout: an encoder export giving the token
 * states (token_embeddings, or last_hidden_state) with the heads beside it as torch.save'd sparse_linear.pt /
 * colbert_linear.pt, which the server reads (model/torch-state-dict.ts) and runs as a head graph after the encoder.
 */
export interface HybridLayout {
  format: "heads" | "hidden";
  /** dense_vecs ([B, H]), or the token states (pooled by the model's pooling, CLS for bge-m3). */
  denseOutput: string;
  /** sparse_vecs [B, T, 1] (relu(sparse_linear(h))), or the head graph's; null when not served. */
  sparseOutput: string | null;
  /** colbert_vecs [B, T-1, H] (colbert_linear(h[:, 1:])), or the head graph's [B, T, C]; null when not served. */
  colbertOutput: string | null;
  /** BAAI's layout: the pickled heads' files, applied to the token states in the inference worker. */
  pickledHeads: { sparse: string | null; colbert: string | null };
  /** Why sparse or multi-vector outputs are not served, for the 400 a request for them gets. */
  unavailable: string | null;
}

/**
 * Late-interaction (ColBERT) encoding: PyLate folders (config_sentence_transformers.json + 1_Dense) and
 * Stanford / fastembed-style exports (config.json HF_ColBERT, artifact.metadata, projection inside the graph).
 */
export interface MultiVectorLayout {
  format: "pylate" | "stanford";
  /** Token inserted after the first token of a query / document; null: none. */
  queryPrefix: string | null;
  documentPrefix: string | null;
  /** Total tokens of a query (expanded to it) and most tokens of a document, prefix included. */
  queryLength: number;
  documentLength: number;
  queryExpansion: boolean;
  attendToExpansion: boolean;
  /** Words whose token ids are dropped from documents' vectors. */
  skiplistWords: string[];
  /** Path of the Dense projection module applied after the encoder (PyLate); null when the graph projects. */
  densePath: string | null;
}

/**
 * ColPali (PaliGemma under a projection): text is read as a query, `<bos>{query_prefix}{query}` + 10 augmentation
 * tokens (the pad token) + "\n"; an image as `image_seq_length` image tokens + `<bos>{visual_prompt_prefix}\n` with its
 * pixel_values. One graph takes input_ids, attention_mask and pixel_values and returns every position's vector.
 */
export interface ColPaliLayout {
  /**
   * paligemma: ColPali, one fixed-size image per document; idefics3: ColModernVBERT, each image split into a grid of
   * tiles plus a global image (media/idefics3.ts), its prompt naming each tile (tasks/colpali.ts).
   */
  kind: "paligemma" | "idefics3";
  queryPrefix: string;
  visualPromptPrefix: string;
  /** Where the prefixes came from (processor_config.json, or transformers' ColPaliProcessor defaults). */
  promptSource: string;
  /** Image tokens per image (per tile for idefics3): the image processor's image_seq_length / image_seq_len. */
  imageSeqLength: number;
  /** The image token's id when config.json names it (image_token_index / image_token_id), else null (`<image>`). */
  imageTokenId: number | null;
  /** The image processor's settings (SiglipImageProcessor): size, resample, rescale, normalise. */
  preprocessor: Record<string, unknown>;
  /** Vision tower input size from config.json (fallback when the image processor omits sizes). */
  imageSize: number | null;
  /** Vector size from config.json's embedding_dim, when given. */
  dim: number | null;
}

/** The query side of an inference-free sparse encoder: SparseStaticEmbedding's folder and tokenizer. */
export interface SparseQueryLayout {
  path: string;
  /** Its own tokenizer (the model's when the folder has none); queries are tokenized without special tokens. */
  tokenizerJson: unknown;
  tokenizerConfig: Record<string, unknown>;
  /** Content tokens a query keeps (the tokenizer's model_max_length, as transformers truncates). */
  maxLength: number;
  /**
   * The older OpenSearch layout: idf.json's weight per token string (an absent token weighs 0, as in the model
   * card's lookup); null for a Router, whose weights are the query module's model.safetensors `weight`.
   */
  idf?: Record<string, number> | null;
}

/** SPLADE: weight of vocabulary entry v = pool over real tokens of activation(logit[t, v]) (SpladePooling). */
export interface SparseLayout {
  poolingStrategy: "max" | "sum";
  /** relu: log(1 + relu(x)); log1p_relu: log(1 + log(1 + relu(x))) (OpenSearch models). */
  activation: "relu" | "log1p_relu";
  /** Where the settings came from, for the load log. */
  source: string;
  /**
   * Inference-free encoders (a sentence-transformers Router: query -> SparseStaticEmbedding, document -> MLM +
   * SpladePooling): the query module's folder, whose tokenizer and per-token weights (model.safetensors `weight`,
   * e.g. IDF) encode queries without a model run; null for plain SPLADE.
   */
  query: SparseQueryLayout | null;
  /** The encoding an input without input_type gets (the Router's default_route); document for plain SPLADE. */
  defaultKind: "query" | "document";
  /** Documents leave out the tokenizer's special tokens (the older OpenSearch idf.json layout's model card does). */
  dropSpecialTokens?: boolean;
}
export type Modality = "text" | "image" | "audio";

/**
 * The towers of a CLIP/SigLIP (text + image) or CLAP (text + audio) repository: either separate exports
 * (onnx/text_model.onnx + onnx/vision_model.onnx or onnx/audio_model.onnx, each with its projected output) or one
 * combined onnx/model.onnx that takes both towers' inputs.
 */
export interface MediaLayout {
  modality: "image" | "audio";
  /** ONNX file of the text tower; the same file as mediaFile when combined. */
  textFile: string;
  mediaFile: string;
  combined: boolean;
  preprocessor: Record<string, unknown>;
  /** Vision tower input size from config.json (fallback when the preprocessor config omits sizes). */
  imageSize: number | null;
  /**
   * SigLIP: the text tower reads a fixed-length sequence (its processor pads to max_length, 64) and pools the LAST
   * position, so text is padded to this length; null for towers that take any length (CLIP, CLAP).
   */
  textLength: number | null;
}
/** A sentence-transformers Dense module after pooling, as its N_Dense/config.json describes it. */
export interface DenseModule {
  path: string;
  inFeatures: number;
  outFeatures: number;
  bias: boolean;
  activation: DenseActivation;
  /** use_residual: the input (projected when the sizes differ) is added to the output. */
  residual: boolean;
}
export type DenseActivation = "identity" | "tanh" | "relu" | "sigmoid";
const DENSE_ACTIVATIONS: Record<string, DenseActivation> = {
  Identity: "identity", Tanh: "tanh", ReLU: "relu", Sigmoid: "sigmoid",
};

/**
 * Task adapters (Jina v3: config.json `lora_adaptations`): the export's `task_id` input selects one LoRA adapter for
 * a whole run (its index in `names`), and the model's `encode(task=...)` prepends that task's instruction
 * (config.json `task_instructions`).
 */
export interface TaskAdapters {
  names: readonly string[];
  instructions: Readonly<Record<string, string>>;
}

export type Pooling = "mean" | "cls" | "max" | "last" | "mean_sqrt_len" | "weighted_mean";

export interface ModelLayout {
  dir: string;
  task: Task;
  modelType: string;
  architecture: string;
  /** Path of the chosen ONNX file, relative to dir (the text tower for multimodal models). */
  onnxFile: string;
  /** Inputs this model embeds: ["text"], or ["text", "image"] / ["text", "audio"]. */
  modalities: Modality[];
  /** Multimodal models only. */
  media: MediaLayout | null;
  dtype: Exclude<Dtype, "auto">;
  /** Longest sequence fed to the model, special tokens included. */
  maxLength: number;
  /** Decoder rerankers: the prompt pairs are read in (Qwen3-Reranker), null for cross-encoders. */
  rerankTemplate: RerankTemplate | null;
  /** Which side batches are padded on: tokenizer_config.json's padding_side (decoder models: left). */
  paddingSide: "left" | "right";
  /** Embedders only. */
  pooling: Pooling;
  /** Sparse (SPLADE) encoders only. */
  sparse: SparseLayout | null;
  /** Multi-vector (ColBERT) encoders only. */
  multivector: MultiVectorLayout | null;
  /** ColPali (multi-vector over text queries and images) only; task is then "multivector". */
  colpali: ColPaliLayout | null;
  /** bge-m3-style hybrid encoders only. */
  hybrid: HybridLayout | null;
  poolingSource: string;
  normalize: boolean;
  /**
   * Dense modules after pooling, in order. Applied by the server unless the export has a `sentence_embedding`
   * output (the whole sentence-transformers pipeline inside the graph), which is then read instead.
   */
  dense: DenseModule[];
  /** Whether prompt tokens take part in pooling (sentence-transformers include_prompt). */
  includePrompt: boolean;
  prompts: Record<string, string>;
  defaultPromptName: string | null;
  /**
   * NomicBERT (nomic-embed-text-v1/v1.5): with `dimensions`, the model card layer-norms the pooled vector (no affine)
   * before truncating it, then normalises.
   */
  matryoshkaLayerNorm: boolean;
  /** Jina v3 task adapters (config.json lora_adaptations), fed as the export's task_id; null for other models. */
  taskAdapters: TaskAdapters | null;
  /** Classifier / reranker labels by index. */
  labels: string[];
  hiddenSize: number | null;
  /** Byte size of the ONNX file and its external data, for the memory report. */
  weightBytes: number;
  tokenizerJson: unknown;
  tokenizerConfig: Record<string, unknown>;
  configJson: Record<string, unknown>;
  warnings: string[];
}

/** The hub's conventional ONNX file names per dtype, in preference order. */
export const ONNX_CANDIDATES: Record<Exclude<Dtype, "auto">, string[]> = {
  // vespa_colbert.onnx: fastembed's export of answerdotai/answerai-colbert-small-v1.
  float32: ["onnx/model.onnx", "model.onnx", "vespa_colbert.onnx"],
  float16: ["onnx/model_fp16.onnx", "model_fp16.onnx"],
  int8: [
    "onnx/model_quantized.onnx", "onnx/model_int8.onnx", "onnx/model_qint8_avx512_vnni.onnx", "onnx/model_qint8_avx512.onnx",
    "onnx/model_qint8_avx2.onnx", "onnx/model_quint8_avx2.onnx", "onnx/model_qint8_arm64.onnx", "onnx/model_uint8.onnx",
    "model_quantized.onnx", "model_int8.onnx",
  ],
};
const AUTO_ORDER: Exclude<Dtype, "auto">[] = ["float32", "int8", "float16"];

/** Picks the ONNX file for a dtype from a list of repository paths. Pure, so hub listings and folders share it. */
export function chooseOnnxFile(files: readonly string[], dtype: Dtype, modelId = "the model"): { file: string; dtype: Exclude<Dtype, "auto"> } {
  const have = new Set(files);
  const order = dtype === "auto" ? AUTO_ORDER : [dtype];
  for (const d of order) {
    for (const f of ONNX_CANDIDATES[d]) if (have.has(f)) return { file: f, dtype: d };
  }
  const looked = order.flatMap((d) => ONNX_CANDIDATES[d]);
  const present = files.filter((f) => f.endsWith(".onnx"));
  if (present.length) throw new ModelLoadError(`no ONNX export for dtype ${dtype}: looked for ${looked.join(", ")}; the repository has ${present.join(", ")}`);
  throw new ModelLoadError(noOnnxMessage(files, modelId));
}

/**
 * A repository without any ONNX export: what it has instead, and the command that makes an export this server
 * can serve from a local folder.
 */
export function noOnnxMessage(files: readonly string[], modelId: string): string {
  const weights = files.filter((f) => /\.(safetensors|bin|pt|pth|gguf|h5|msgpack|ckpt|tflite)$/.test(f) && !/(^|\/)(training_args|optimizer|scheduler)\.bin$/.test(f));
  const shown = weights.slice(0, 6).join(", ") + (weights.length > 6 ? ` and ${weights.length - 6} more` : "");
  const dir = `${modelId.split("/").pop() || "model"}-onnx`;
  return (
    `${modelId} has no ONNX export (no .onnx file; ` +
    (weights.length ? `its weights are ${shown})` : `it has ${files.slice(0, 8).join(", ") || "no files"})`) +
    `. Export one with \`optimum-cli export onnx --model ${modelId} ${dir}\` (pip install "optimum[onnxruntime]") ` +
    `and serve the folder: --model-id ./${dir}`
  );
}

const TOWER_SUFFIX: Record<Exclude<Dtype, "auto">, string[]> = {
  float32: [""],
  float16: ["_fp16"],
  int8: ["_quantized", "_int8", "_uint8"],
};

/** Which media tower a config.json describes: vision_config (CLIP, SigLIP) or audio_config (CLAP). */
export function mediaModalityOf(config: Record<string, unknown>): "image" | "audio" | null {
  if (config.vision_config && typeof config.vision_config === "object") return "image";
  if (config.audio_config && typeof config.audio_config === "object") return "audio";
  return null;
}

/**
 * The ONNX files of a multimodal model for a dtype: the separate tower exports when both are there, else the
 * combined model.onnx. Pure, so hub listings and folders share it.
 */
export function chooseTowerFiles(files: readonly string[], dtype: Dtype, modality: "image" | "audio"): { text: string; media: string; combined: boolean; dtype: Exclude<Dtype, "auto"> } {
  const have = new Set(files);
  const order = dtype === "auto" ? AUTO_ORDER : [dtype];
  const tower = modality === "image" ? "vision" : "audio";
  for (const d of order) {
    for (const sfx of TOWER_SUFFIX[d]) {
      const text = `onnx/text_model${sfx}.onnx`;
      const media = `onnx/${tower}_model${sfx}.onnx`;
      if (have.has(text) && have.has(media)) return { text, media, combined: false, dtype: d };
    }
  }
  try {
    const { file, dtype: d } = chooseOnnxFile(files, dtype);
    return { text: file, media: file, combined: true, dtype: d };
  } catch (e) {
    throw new ModelLoadError(`no ONNX export for this ${modality} model: looked for onnx/text_model.onnx + onnx/${tower}_model.onnx (and dtype variants); ${(e as Error).message}`);
  }
}

/** The ONNX files a repository listing needs for a dtype: both towers of a multimodal export, or the one model file. */
export function onnxFilesFor(files: readonly string[], dtype: Dtype, modelId?: string): string[] {
  const modality = files.some((f) => /^onnx\/vision_model[^/]*\.onnx$/.test(f)) ? "image" : files.some((f) => /^onnx\/audio_model[^/]*\.onnx$/.test(f)) ? "audio" : null;
  if (modality && files.some((f) => /^onnx\/text_model[^/]*\.onnx$/.test(f))) {
    try {
      const t = chooseTowerFiles(files, dtype, modality);
      return t.combined ? [t.text] : [t.text, t.media];
    } catch {
      /* fall through to the single-file rule and its message */
    }
  }
  return [chooseOnnxFile(files, dtype, modelId).file];
}

/** External weight files that belong to an ONNX file (both naming conventions in use on the hub). */
export function externalDataFiles(onnxFile: string, files: readonly string[]): string[] {
  const have = new Set(files);
  return [`${onnxFile}_data`, `${onnxFile}.data`, `${onnxFile}_data_1`].filter((f) => have.has(f));
}

/** The files a model needs besides its weights; missing optional ones are fine. */
export const METADATA_FILES = [
  "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "modules.json",
  "sentence_bert_config.json", "config_sentence_transformers.json", "preprocessor_config.json", "artifact.metadata",
  "processor_config.json", "idf.json", "router_config.json",
] as const;

/**
 * Model metadata (config.json, tokenizer files) at the root, else inside onnx/: some repositories ship their ONNX
 * export as a self-contained folder (protectai/deberta-v3-base-prompt-injection-v2).
 */
function readMetadata(dir: string, file: string): Record<string, unknown> | null {
  return readJson(dir, file) ?? readJson(dir, join("onnx", file));
}

function readJson(dir: string, file: string): Record<string, unknown> | null {
  const path = join(dir, file);
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new ModelLoadError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
}

interface StModule { path: string; kind: string }

/**
 * sentence-transformers modules this server implements (by the last segment of the class path). Any other module
 * in modules.json is refused at load: serving the model without it would give wrong vectors.
 */
export const KNOWN_MODULES: ReadonlySet<string> = new Set([
  "Transformer", "MLMTransformer", "Pooling", "Normalize", "Dense", "SpladePooling",
  // CrossEncoder over a causal LM: yes/no logits at the last position (rerankTemplateOf)
  "LogitScore",
]);

/**
 * The Dense modules of an embedder, checked against what this server can apply: after pooling (on the sentence
 * embedding), with an activation it knows. Refuses modules it does not know, with what is there.
 */
export function denseModules(modules: readonly StModule[], moduleConfig: (path: string) => Record<string, unknown> | null, allowed: ReadonlySet<string> = KNOWN_MODULES): DenseModule[] {
  const unknown = modules.filter((m) => !allowed.has(m.kind));
  if (unknown.length) {
    throw new ModelLoadError(
      `modules.json has sentence-transformers module${unknown.length > 1 ? "s" : ""} this server does not implement: ` +
        `${unknown.map((m) => `${m.kind} (${m.path || "."})`).join(", ")}; served without ${unknown.length > 1 ? "them" : "it"} the vectors would be wrong. ` +
        `Implemented: ${[...allowed].join(", ")}`,
    );
  }
  const poolingAt = modules.findIndex((m) => m.kind === "Pooling");
  const out: DenseModule[] = [];
  modules.forEach((m, i) => {
    if (m.kind !== "Dense") return;
    const cfg = moduleConfig(m.path);
    if (!cfg) throw new ModelLoadError(`Dense module ${m.path}: missing ${m.path}/config.json`);
    const input = cfg.module_input_name ?? "sentence_embedding";
    if (i < poolingAt || input !== "sentence_embedding") {
      throw new ModelLoadError(`Dense module ${m.path} works on token embeddings (before pooling); only Dense modules on the pooled sentence embedding are supported`);
    }
    const fn = String(cfg.activation_function ?? "torch.nn.modules.activation.Tanh");
    const activation = DENSE_ACTIVATIONS[fn.split(".").pop() ?? ""];
    if (!activation) throw new ModelLoadError(`Dense module ${m.path}: activation ${fn} is not supported (Identity, Tanh, ReLU, Sigmoid)`);
    const inFeatures = Number(cfg.in_features);
    const outFeatures = Number(cfg.out_features);
    if (!(inFeatures > 0 && outFeatures > 0)) throw new ModelLoadError(`Dense module ${m.path}: config.json lacks in_features/out_features`);
    out.push({ path: m.path, inFeatures, outFeatures, bias: cfg.bias !== false, activation, residual: cfg.use_residual === true });
  });
  return out;
}

/** modules.json of every sentence-transformers generation: the class is matched by its last name segment. */
export function readModules(modulesJson: unknown): StModule[] {
  if (!Array.isArray(modulesJson)) return [];
  return modulesJson
    .filter((m): m is Record<string, unknown> => typeof m === "object" && m !== null)
    .map((m) => {
      const type = String(m.type ?? "");
      return { path: String(m.path ?? ""), kind: type.split(".").pop() ?? type };
    });
}

/**
 * Pooling from a 1_Pooling/config.json of any generation: a `pooling_mode` string (newer) or the
 * `pooling_mode_*` booleans (all versions). Returns null when the file names no mode.
 */
export function poolingFromConfig(cfg: Record<string, unknown> | null): Pooling | null {
  if (!cfg) return null;
  const mode = cfg.pooling_mode;
  if (typeof mode === "string") {
    const named: Record<string, Pooling> = {
      cls: "cls", mean: "mean", max: "max", lasttoken: "last", last: "last",
      mean_sqrt_len_tokens: "mean_sqrt_len", weightedmean: "weighted_mean",
    };
    if (named[mode]) return named[mode]!;
  }
  if (cfg.pooling_mode_cls_token) return "cls";
  if (cfg.pooling_mode_mean_tokens) return "mean";
  if (cfg.pooling_mode_max_tokens) return "max";
  if (cfg.pooling_mode_mean_sqrt_len_tokens) return "mean_sqrt_len";
  if (cfg.pooling_mode_weightedmean_tokens) return "weighted_mean";
  if (cfg.pooling_mode_lasttoken) return "last";
  return null;
}

/** Positions usable by tokens: RoBERTa-family models offset positions by pad_token_id + 1. */
export function positionLimit(config: Record<string, unknown>): number | null {
  const maxPos = Number(config.max_position_embeddings);
  if (!Number.isFinite(maxPos) || maxPos <= 0) return null;
  const type = String(config.model_type ?? "");
  if (["roberta", "xlm-roberta", "camembert", "mpnet", "longformer", "ibert"].includes(type)) {
    const pad = Number(config.pad_token_id ?? 1);
    return maxPos - (Number.isFinite(pad) ? pad : 1) - 1;
  }
  return maxPos;
}

function sane(n: unknown): number | null {
  const v = Number(n);
  // Tokenizer configs use 1e30 for "no limit".
  return Number.isFinite(v) && v > 0 && v < 1_000_000 ? Math.floor(v) : null;
}

/**
 * Whether a model is a SPLADE sparse encoder: a sentence-transformers SparseEncoder (a SpladePooling module in
 * modules.json, its settings in that module's config.json) or a masked-LM export declared sparse with
 * --pooling-method splade (Qdrant/Splade_PP_en_v1 ships only config.json and model.onnx). A masked-LM
 * (*ForMaskedLM) model declared neither way is refused: its logits are not an embedding.
 */
export function sparseLayout(
  modules: readonly StModule[],
  moduleConfig: (path: string) => Record<string, unknown> | null,
  poolingOverride: PoolingMethod,
  architecture: string,
  routerConfig: Record<string, unknown> | null = null,
  idf: Record<string, unknown> | null = null,
): SparseLayout | null {
  if (modules.some((m) => m.kind === "Router")) return routedSparseLayout(modules, moduleConfig, routerConfig);
  const splade = modules.find((m) => m.kind === "SpladePooling");
  if (!splade && idf && architecture.endsWith("ForMaskedLM")) return idfSparseLayout(idf);
  if (!splade && modules.some((m) => m.kind === "SparseStaticEmbedding" || m.kind === "SparseAutoEncoder")) {
    throw new ModelLoadError("this SparseEncoder uses modules other than an MLM transformer + SpladePooling (a CSR SparseAutoEncoder, or a static embedding outside a query/document Router), which this server does not serve");
  }
  if (splade) return { ...spladeSettings(splade.path, moduleConfig), query: null, defaultKind: "document" };
  if (poolingOverride === "splade" && architecture.endsWith("ForSequenceClassification")) {
    throw new ModelLoadError(`--pooling-method splade needs a masked-LM export; ${architecture} is a classifier`);
  }
  if (poolingOverride === "splade") return { poolingStrategy: "max", activation: "relu", source: "--pooling-method splade", query: null, defaultKind: "document" };
  if (architecture.endsWith("ForMaskedLM")) {
    throw new ModelLoadError(
      `${architecture} is a masked language model and declares no sparse pooling (no SpladePooling module in modules.json); ` +
        "its logits are not an embedding. If it is a SPLADE model, serve it with --pooling-method splade",
    );
  }
  return null;
}

/**
 * The older OpenSearch inference-free layout (doc-v1, doc-v2-distill, doc-v2-mini before sentence-transformers 6):
 * a masked-LM export with idf.json (token -> query weight) and no Router. As the model cards' usage code does:
 * queries weigh each distinct token by idf.json with no model run; documents take the max over real tokens of
 * log(1 + relu(logit)) with the tokenizer's special tokens set to 0.
 */
function idfSparseLayout(idf: Record<string, unknown>): SparseLayout {
  const weights: Record<string, number> = {};
  for (const [token, w] of Object.entries(idf)) {
    if (typeof w !== "number" || !Number.isFinite(w)) throw new ModelLoadError(`idf.json must map each token to a number; "${token}" has ${JSON.stringify(w)}`);
    weights[token] = w;
  }
  return {
    poolingStrategy: "max", activation: "relu", source: "idf.json (OpenSearch inference-free layout)",
    query: { path: ".", tokenizerJson: null, tokenizerConfig: {}, maxLength: 0, idf: weights },
    defaultKind: "document", dropSpecialTokens: true,
  };
}

/** A SpladePooling module's settings from its config.json. */
function spladeSettings(path: string, moduleConfig: (path: string) => Record<string, unknown> | null) {
  const cfg = moduleConfig(path) ?? {};
  const strategy = String(cfg.pooling_strategy ?? "max");
  const activation = String(cfg.activation_function ?? "relu");
  if (strategy !== "max" && strategy !== "sum") throw new ModelLoadError(`SpladePooling pooling_strategy "${strategy}" is not supported (max, sum)`);
  if (activation !== "relu" && activation !== "log1p_relu") throw new ModelLoadError(`SpladePooling activation_function "${activation}" is not supported (relu, log1p_relu)`);
  return { poolingStrategy: strategy as "max" | "sum", activation: activation as "relu" | "log1p_relu", source: `${path}/config.json` };
}

/**
 * An inference-free SparseEncoder (OpenSearch doc-v2/v3-distill, sentence-transformers 6): modules.json holds one
 * Router whose router_config.json routes query -> [SparseStaticEmbedding] and document -> [MLMTransformer,
 * SpladePooling]; each module sits in the folder named by its id. Any other routing is refused.
 */
function routedSparseLayout(modules: readonly StModule[], moduleConfig: (path: string) => Record<string, unknown> | null, routerConfig: Record<string, unknown> | null): SparseLayout {
  if (modules.length !== 1) throw new ModelLoadError("a Router must be the only module in modules.json");
  if (!routerConfig) throw new ModelLoadError("modules.json has a Router but there is no router_config.json");
  const types = (routerConfig.types ?? {}) as Record<string, unknown>;
  const structure = (routerConfig.structure ?? {}) as Record<string, unknown>;
  const kind = (id: string) => String(types[id] ?? "").split(".").pop() ?? "";
  const route = (name: string) => (Array.isArray(structure[name]) ? (structure[name] as unknown[]).map(String) : []);
  const routes = Object.keys(structure).sort();
  const query = route("query");
  const document = route("document");
  const shape = `query -> [${query.map(kind).join(", ")}], document -> [${document.map(kind).join(", ")}]`;
  if (
    routes.join(",") !== "document,query" || query.length !== 1 || kind(query[0]!) !== "SparseStaticEmbedding" ||
    document.length !== 2 || !["MLMTransformer", "Transformer"].includes(kind(document[0]!)) || kind(document[1]!) !== "SpladePooling"
  ) {
    throw new ModelLoadError(
      `router_config.json routes ${routes.length ? routes.join(", ") : "nothing"} (${shape}); this server serves a Router of query -> ` +
        "[SparseStaticEmbedding] and document -> [MLMTransformer, SpladePooling] (inference-free sparse encoders) only",
    );
  }
  const params = (routerConfig.parameters ?? {}) as Record<string, unknown>;
  const fallback = params.allow_empty_key === false ? null : Object.keys(structure)[0];
  const defaultRoute = typeof params.default_route === "string" ? params.default_route : fallback;
  return {
    ...spladeSettings(document[1]!, moduleConfig),
    query: { path: query[0]!, tokenizerJson: null, tokenizerConfig: {}, maxLength: 0 },
    defaultKind: defaultRoute === "query" ? "query" : "document",
  };
}

/**
 * The padding side the tokenizer declares: tokenizer_config.json's `padding_side`, else tokenizer.json's padding
 * direction, else right. Decoder embedders (Qwen3-Embedding) declare left: their last real token is then always the
 * last position.
 */
export function paddingSideOf(tokenizerConfig: Record<string, unknown>, tokenizerJson: unknown): "left" | "right" {
  const side = tokenizerConfig.padding_side;
  if (side === "left" || side === "right") return side;
  const direction = (tokenizerJson as { padding?: { direction?: string } } | null)?.padding?.direction;
  return direction === "Left" ? "left" : "right";
}

/**
 * The prompt an LLM reranker reads a pair in (Qwen3-Reranker's model card): prefix, then
 * "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}", then suffix; the score is read at the last
 * position (yes/no logits of a causal LM, or the one logit of a -seq-cls conversion).
 */
export interface RerankTemplate {
  prefix: string;
  suffix: string;
  instruction: string;
  /** Causal LMs: the tokens whose logits are compared at the last position; null for -seq-cls conversions. */
  yesToken: string | null;
  noToken: string | null;
}

/**
 * LLM rerankers' default max length: the Qwen3-Reranker model card's scoring code truncates each prompt to
 * max_length = 8192 tokens, while its config.json allows 40,960 positions and its tokenizer_config says 131,072 (the
 * card's prose says 32k context). The server scores as the card's code does; --max-length raises it up to the
 * model's positions.
 */
export const LLM_RERANK_MAX_LENGTH = 8192;

export const QWEN3_RERANK_TEMPLATE: RerankTemplate = {
  prefix:
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. " +
    'Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n',
  suffix: "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
  instruction: "Given a web search query, retrieve relevant passages that answer the query",
  yesToken: "yes",
  noToken: "no",
};

const CHAT_DECODERS = new Set(["qwen2", "qwen3"]);

/**
 * Decoder rerankers: a *ForCausalLM export is served as a Qwen3-Reranker-style LLM reranker (yes/no logits), a
 * decoder *ForSequenceClassification with one label (a -seq-cls conversion) with the same prompt. Both need the
 * Qwen chat tokens; a causal LM without them is refused (its logits are not an embedding or a score).
 */
export function rerankTemplateOf(config: Record<string, unknown>, tokenizerJson: unknown, task: Task): RerankTemplate | null {
  const arch = Array.isArray(config.architectures) ? String(config.architectures[0] ?? "") : "";
  const type = String(config.model_type ?? "");
  const causal = arch.endsWith("ForCausalLM");
  if (!causal && !(task === "rerank" && CHAT_DECODERS.has(type))) return null;
  const tokens = new Set<string>();
  const tj = tokenizerJson as { model?: { vocab?: unknown }; added_tokens?: Array<{ content?: string }> } | null;
  for (const t of tj?.added_tokens ?? []) if (typeof t.content === "string") tokens.add(t.content);
  const vocab = tj?.model?.vocab;
  const has = (t: string) => tokens.has(t) || (!!vocab && typeof vocab === "object" && !Array.isArray(vocab) && t in (vocab as object));
  const needed = ["<|im_start|>", "<|im_end|>", ...(causal ? ["yes", "no"] : [])];
  const missing = needed.filter((t) => !has(t));
  if (!CHAT_DECODERS.has(type) || missing.length) {
    if (!causal) return null;
    throw new ModelLoadError(
      `${arch} is a causal language model; it is served only as a Qwen3-Reranker-style LLM reranker (model_type qwen2/qwen3 with ` +
        `<|im_start|>, <|im_end|>, yes and no tokens)` + (missing.length ? `, and its tokenizer lacks ${missing.join(", ")}` : `, not ${type}`),
    );
  }
  return causal ? QWEN3_RERANK_TEMPLATE : { ...QWEN3_RERANK_TEMPLATE, yesToken: null, noToken: null };
}

const PUNCTUATION = Array.from("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~");

/**
 * Whether a model is a ColBERT encoder, and its settings: PyLate's keys in config_sentence_transformers.json
 * (query_prefix, document_prefix, query_length, document_length, do_query_expansion, attend_to_expansion_tokens,
 * skiplist_words) with PyLate's defaults, or a Stanford HF_ColBERT config.json with artifact.metadata
 * (query_token_id, doc_token_id, query_maxlen, doc_maxlen, attend_to_mask_tokens).
 */
export function multiVectorLayout(
  config: Record<string, unknown>,
  stMeta: Record<string, unknown> | null,
  metadata: Record<string, unknown> | null,
  modules: readonly StModule[],
  positions: number | null,
): MultiVectorLayout | null {
  const arch = Array.isArray(config.architectures) ? String(config.architectures[0] ?? "") : "";
  const pylate = stMeta !== null && (stMeta.model_type === "ColBERT" || typeof stMeta.query_prefix === "string" || typeof stMeta.query_length === "number");
  const stanford = arch === "HF_ColBERT" || metadata !== null;
  if (!pylate && !stanford) return null;
  const num = (v: unknown, d: number) => (typeof v === "number" && Number.isInteger(v) && v > 0 ? v : d);
  const prefix = (v: unknown, d: string) => (typeof v === "string" ? (v === "" ? null : v) : d);
  const cap = (n: number) => (positions !== null ? Math.min(n, positions) : n);
  if (pylate) {
    const dense = modules.filter((m) => m.kind === "Dense");
    if (dense.length > 1) throw new ModelLoadError("a ColBERT model with more than one Dense module is not supported");
    if (dense.length === 0) throw new ModelLoadError("a PyLate ColBERT folder without its 1_Dense projection module cannot be served");
    const words = Array.isArray(stMeta!.skiplist_words) ? stMeta!.skiplist_words.map(String) : PUNCTUATION;
    return {
      format: "pylate",
      queryPrefix: prefix(stMeta!.query_prefix, "[Q] "),
      documentPrefix: prefix(stMeta!.document_prefix, "[D] "),
      queryLength: cap(num(stMeta!.query_length, 32)),
      documentLength: cap(num(stMeta!.document_length, 180)),
      queryExpansion: stMeta!.do_query_expansion !== false,
      attendToExpansion: stMeta!.do_query_expansion !== false && stMeta!.attend_to_expansion_tokens === true,
      skiplistWords: words,
      densePath: dense[0]!.path,
    };
  }
  const md = metadata ?? {};
  return {
    format: "stanford",
    queryPrefix: prefix(md.query_token_id, "[unused0]"),
    documentPrefix: prefix(md.doc_token_id, "[unused1]"),
    queryLength: cap(num(md.query_maxlen, 32)),
    documentLength: cap(num(md.doc_maxlen, positions ?? 512)),
    queryExpansion: true,
    attendToExpansion: md.attend_to_mask_tokens === true,
    skiplistWords: PUNCTUATION,
    densePath: null,
  };
}

/**
 * Jina v3's task adapters from config.json: `lora_adaptations` (task_id = index) and `task_instructions` (the text
 * its encode(task=...) prepends; sentence-transformers' prompts of the same names as fallback). null without them.
 */
export function taskAdaptersOf(config: Record<string, unknown>, prompts: Readonly<Record<string, string>>): TaskAdapters | null {
  const names = config.lora_adaptations;
  if (names === undefined) return null;
  if (!Array.isArray(names) || names.length === 0 || !names.every((n) => typeof n === "string")) {
    throw new ModelLoadError("config.json lora_adaptations must be a non-empty list of task names");
  }
  const given = (config.task_instructions ?? {}) as Record<string, unknown>;
  const instructions: Record<string, string> = {};
  for (const n of names as string[]) {
    const v = given[n] ?? prompts[n];
    if (v !== undefined && v !== null && typeof v !== "string") throw new ModelLoadError(`config.json task_instructions.${n} must be a string`);
    instructions[n] = (v as string | undefined) ?? "";
  }
  return { names: names as string[], instructions };
}

/** transformers' ColPaliProcessor defaults, used when the repository has no processor_config.json saying otherwise. */
export const COLPALI_DEFAULTS = { queryPrefix: "Question: ", visualPromptPrefix: "Describe the image." } as const;

/** transformers' ColModernVBertProcessor defaults (fastembed's Qdrant/colmodernvbert pipeline uses the same). */
export const COLMODERNVBERT_DEFAULTS = {
  queryPrefix: "",
  visualPromptPrefix: "<|begin_of_text|>User:<image>Describe the image.<end_of_utterance>\nAssistant:",
} as const;

/** Late-interaction vision retrievers this server does not implement: refused at load by name. */
const UNSUPPORTED_VISION_RETRIEVERS: Record<string, string> = {
  modernvbert: "ModernVBERT without the ColModernVBert retrieval head (no multi-vector projection)",
  idefics3: "Idefics3 (a generative vision-language model, not a retriever)",
  colqwen2: "ColQwen2 (dynamic-resolution image patches)",
  colqwen2_5: "ColQwen2.5 (dynamic-resolution image patches)",
};

/**
 * Whether a model is ColPali, and its settings: transformers' layout (config.json model_type colpali, vlm_config =
 * PaliGemma) or a merged export whose config.json is the PaliGemma one (model_type paligemma). The prefixes and the
 * image processor come from processor_config.json (transformers 5 nests the image processor in it) or
 * preprocessor_config.json; prefixes default to transformers' ColPaliProcessor's. Other late-interaction vision
 * retrievers (ColModernVBERT, ColQwen2) are refused with what they would need.
 */
export function colpaliLayout(
  config: Record<string, unknown>,
  processorConfig: Record<string, unknown> | null,
  preprocessorConfig: Record<string, unknown> | null,
): ColPaliLayout | null {
  const type = String(config.model_type ?? "");
  const arch = Array.isArray(config.architectures) ? String(config.architectures[0] ?? "") : "";
  // ColModernVBERT: transformers' layout (model_type colmodernvbert, vlm_config = ModernVBert) or the original /
  // Qdrant export's flat ModernVBert config naming the ColModernVBert architecture.
  const idefics3 = type === "colmodernvbert" || /^ColModernVBert/.test(arch);
  const unsupported = idefics3 ? undefined : UNSUPPORTED_VISION_RETRIEVERS[type] ?? (/^ColQwen2/.test(arch) ? arch : undefined);
  if (unsupported) {
    throw new ModelLoadError(
      `${arch || type}: ${unsupported} is not supported; of the late-interaction vision retrievers this server serves ColPali (PaliGemma) and ColModernVBERT`,
    );
  }
  if (type !== "colpali" && type !== "paligemma" && !idefics3) return null;
  const vlm = vlmConfig(config);
  const vision = (vlm.vision_config ?? {}) as Record<string, unknown>;
  const text = colpaliTextConfig(config);
  const nested = processorConfig?.image_processor;
  const preprocessor = (nested && typeof nested === "object" ? nested : preprocessorConfig) as Record<string, unknown> | null;
  const what = idefics3 ? "a ColModernVBERT model" : "a ColPali model";
  if (!preprocessor) throw new ModelLoadError(`${what} needs its image processor settings (preprocessor_config.json, or image_processor in processor_config.json)`);
  if (idefics3 && !/^Idefics3ImageProcessor/.test(String(preprocessor.image_processor_type ?? ""))) {
    throw new ModelLoadError(`${what} needs an Idefics3 image processor (image_processor_type Idefics3ImageProcessor), got ${JSON.stringify(preprocessor.image_processor_type ?? null)}`);
  }
  const imageSize = Number.isFinite(Number(vision.image_size)) ? Number(vision.image_size) : null;
  const patch = Number(vision.patch_size);
  // ColModernVBERT: (tile / patch)^2 patches per tile, pixel-shuffled by pixel_shuffle_factor (default 4) per side.
  const shuffle = Number(vlm.pixel_shuffle_factor ?? vlm.scale_factor ?? 4);
  const seq = idefics3
    ? sane(processorConfig?.image_seq_len) ?? (imageSize && patch > 0 && shuffle > 0 ? Math.floor((imageSize / patch) ** 2 / shuffle ** 2) : null)
    : sane(preprocessor.image_seq_length) ?? sane(vision.num_image_tokens) ?? sane(text.num_image_tokens) ??
      (imageSize && patch > 0 ? Math.floor(imageSize / patch) ** 2 : null);
  if (seq === null) throw new ModelLoadError(`${what} needs image_seq_length (image processor) or the vision tower's image_size and patch_size`);
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  const queryPrefix = str(processorConfig?.query_prefix);
  const visualPromptPrefix = str(processorConfig?.visual_prompt_prefix);
  const tokenId = Number(vlm.image_token_index ?? vlm.image_token_id);
  const dim = Number(config.embedding_dim);
  const defaults = idefics3 ? COLMODERNVBERT_DEFAULTS : COLPALI_DEFAULTS;
  return {
    kind: idefics3 ? "idefics3" : "paligemma",
    // ColModernVBertProcessor takes an empty visual_prompt_prefix for absent (`or` its default); ColPali keeps it.
    queryPrefix: queryPrefix ?? defaults.queryPrefix,
    visualPromptPrefix: (idefics3 ? visualPromptPrefix || undefined : visualPromptPrefix) ?? defaults.visualPromptPrefix,
    promptSource: queryPrefix !== undefined && visualPromptPrefix !== undefined ? "processor_config.json" : `transformers' ${idefics3 ? "ColModernVBertProcessor" : "ColPaliProcessor"} defaults`,
    imageSeqLength: seq,
    imageTokenId: Number.isInteger(tokenId) && tokenId >= 0 ? tokenId : null,
    preprocessor,
    imageSize,
    dim: Number.isInteger(dim) && dim > 0 ? dim : null,
  };
}

/** The vision-language config of a retriever: transformers' vlm_config (ColPali, ColModernVBert), else the config itself. */
function vlmConfig(config: Record<string, unknown>): Record<string, unknown> {
  const wrapped = config.model_type === "colpali" || config.model_type === "colmodernvbert";
  return (wrapped ? config.vlm_config ?? config : config) as Record<string, unknown>;
}

/** The text_config of a ColPali (Gemma) or ColModernVBERT (ModernBERT) config.json. */
function colpaliTextConfig(config: Record<string, unknown>): Record<string, unknown> {
  return (vlmConfig(config).text_config ?? {}) as Record<string, unknown>;
}

/** BAAI's bge-m3 heads as pickled torch files (FlagEmbedding saves and loads them with torch.save / torch.load). */
export const PICKLED_M3_HEADS = ["sparse_linear.pt", "colbert_linear.pt"] as const;
/** The names the pickled heads' graph answers under (session head outputs, beside the encoder's). */
export const M3_HEAD_OUTPUTS = { sparse: "sparse_linear", colbert: "colbert_linear" } as const;

/**
 * Whether a model is a bge-m3-style hybrid encoder: its ONNX has aapot's dense_vecs output (sparse_vecs and
 * colbert_vecs served when present too), or its folder holds BAAI's pickled heads next to an encoder export (dense
 * from the pooled token states, lexical weights and multi-vectors through the heads). Pure: the output names are
 * read by the caller.
 */
export function hybridLayout(outputNames: readonly string[], files: readonly string[]): HybridLayout | null {
  if (outputNames.includes("dense_vecs")) {
    const sparseOutput = outputNames.includes("sparse_vecs") ? "sparse_vecs" : null;
    const colbertOutput = outputNames.includes("colbert_vecs") ? "colbert_vecs" : null;
    const lacking = [sparseOutput ? null : "sparse_vecs", colbertOutput ? null : "colbert_vecs"].filter((x) => x !== null);
    return {
      format: "heads",
      denseOutput: "dense_vecs",
      sparseOutput,
      colbertOutput,
      pickledHeads: { sparse: null, colbert: null },
      unavailable: lacking.length ? `its ONNX export has no ${lacking.join(" or ")} output` : null,
    };
  }
  const pickles = PICKLED_M3_HEADS.filter((f) => files.includes(f));
  if (!pickles.length) return null;
  // BAAI/bge-m3's onnx/model.onnx (sentence-transformers' export) gives token_embeddings and sentence_embedding.
  const states = tokenStatesOutput(outputNames);
  if (!states) {
    throw new ModelLoadError(`a bge-m3 checkpoint (${pickles.join(", ")}) needs an ONNX export with a ${TOKEN_STATE_OUTPUTS.join(", ")} or dense_vecs output; this one has ${outputNames.join(", ")}`);
  }
  const sparse = files.includes("sparse_linear.pt") ? "sparse_linear.pt" : null;
  const colbert = files.includes("colbert_linear.pt") ? "colbert_linear.pt" : null;
  return {
    format: "hidden",
    denseOutput: states,
    sparseOutput: sparse ? M3_HEAD_OUTPUTS.sparse : null,
    colbertOutput: colbert ? M3_HEAD_OUTPUTS.colbert : null,
    pickledHeads: { sparse, colbert },
    unavailable: sparse && colbert ? null : `its folder has no ${sparse ? "colbert_linear.pt" : "sparse_linear.pt"} beside the encoder`,
  };
}

/**
 * A bge-m3 encoder without a pooling config (Xenova/bge-m3 ships config.json, tokenizer and onnx/ only): BAAI/bge-m3's
 * XLMRobertaModel with 8194 positions (8192 tokens + the padding offset), and no Jina task adapters (jina-embeddings-v3
 * shares the encoder shape and mean-pools). Models built on bge-m3 (e.g. Snowflake arctic-embed-l-v2.0) pool CLS too.
 */
export function looksLikeBgeM3(config: Record<string, unknown>): boolean {
  const arch = Array.isArray(config.architectures) ? String(config.architectures[0] ?? "") : "";
  return arch === "XLMRobertaModel" && config.max_position_embeddings === 8194 && config.lora_adaptations === undefined;
}

export function taskOf(config: Record<string, unknown>): { task: Task; labels: string[] } {
  const arch = Array.isArray(config.architectures) ? String(config.architectures[0] ?? "") : "";
  if (arch.endsWith("ForCausalLM")) return { task: "rerank", labels: [] };
  const id2label = (config.id2label ?? {}) as Record<string, string>;
  const labels = Object.keys(id2label)
    .sort((a, b) => Number(a) - Number(b))
    .map((k) => String(id2label[k]));
  if (arch.endsWith("ForSequenceClassification")) {
    const n = Number(config.num_labels ?? labels.length) || labels.length;
    const count = labels.length || n || 1;
    const named = labels.length === count ? labels : Array.from({ length: count }, (_, i) => `LABEL_${i}`);
    return { task: count === 1 ? "rerank" : "classify", labels: named };
  }
  return { task: "embed", labels: [] };
}

/**
 * jina-clip's text tower instructions (config.json text_config.hf_model_config_kwargs.task_instructions, which its
 * encode_text(task=...) prepends), the prompts of a repository without config_sentence_transformers.json. Empty
 * instructions are left out (no prompt).
 */
export function towerTaskInstructions(config: Record<string, unknown>): Record<string, string> {
  const text = config.text_config as Record<string, unknown> | undefined;
  const kwargs = text?.hf_model_config_kwargs as Record<string, unknown> | undefined;
  const given = kwargs?.task_instructions;
  const out: Record<string, string> = {};
  if (given && typeof given === "object") for (const [k, v] of Object.entries(given)) if (typeof v === "string" && v) out[k] = v;
  return out;
}

export function readLayout(dir: string, files: readonly string[], dtype: Dtype, poolingOverride: PoolingMethod, maxLengthOverride = 0): ModelLayout {
  const warnings: string[] = [];
  const config = readMetadata(dir, "config.json");
  if (!config) throw new ModelLoadError(`${dir}: missing config.json`);
  const tokenizerJson = readMetadata(dir, "tokenizer.json");
  if (!tokenizerJson) throw new ModelLoadError(`${dir}: missing tokenizer.json (only fast-tokenizer repositories are supported)`);
  const tokenizerConfig: Record<string, unknown> = { ...(readMetadata(dir, "special_tokens_map.json") ?? {}), ...(readMetadata(dir, "tokenizer_config.json") ?? {}) };
  // special_tokens_map.json values may be objects ({content: ...}); the tokenizer wants strings.
  for (const [k, v] of Object.entries(tokenizerConfig)) {
    if (v && typeof v === "object" && !Array.isArray(v) && "content" in (v as object)) tokenizerConfig[k] = (v as { content: string }).content;
  }

  const taskInfo = taskOf(config);
  const { labels } = taskInfo;
  const colpali = colpaliLayout(config, readJson(dir, "processor_config.json"), readJson(dir, "preprocessor_config.json"));
  if (colpali?.kind === "paligemma" && colpali.promptSource !== "processor_config.json") {
    warnings.push(`ColPali prompts from ${colpali.promptSource} (query prefix ${JSON.stringify(colpali.queryPrefix)}): no processor_config.json names query_prefix and visual_prompt_prefix`);
  }
  const modality = colpali ? null : mediaModalityOf(config);
  let onnxFile: string;
  let chosen: Exclude<Dtype, "auto">;
  let media: MediaLayout | null = null;
  if (modality) {
    const towers = chooseTowerFiles(files, dtype, modality);
    onnxFile = towers.text;
    chosen = towers.dtype;
    const preprocessor = readJson(dir, "preprocessor_config.json");
    if (!preprocessor) throw new ModelLoadError(`${dir}: missing preprocessor_config.json (needed for ${modality} inputs)`);
    const vision = (config.vision_config ?? {}) as Record<string, unknown>;
    media = {
      modality,
      textFile: towers.text,
      mediaFile: towers.media,
      combined: towers.combined,
      preprocessor,
      imageSize: Number.isFinite(Number(vision.image_size)) ? Number(vision.image_size) : null,
      textLength: /^siglip/.test(String(config.model_type ?? ""))
        ? sane(tokenizerConfig.model_max_length) ?? sane((config.text_config as Record<string, unknown> | undefined)?.max_position_embeddings) ?? 64
        : null,
    };
  } else {
    ({ file: onnxFile, dtype: chosen } = chooseOnnxFile(files, dtype, dir));
  }

  if (chosen === "float16" && /^gemma3/.test(String(config.model_type ?? ""))) {
    // Gemma 3's activations overflow float16: EmbeddingGemma's fp16 export returns NaN vectors.
    throw new ModelLoadError(`${onnxFile}: Gemma 3 models (EmbeddingGemma) give NaN outputs in float16; use the float32 export (--dtype float32)`);
  }

  // sentence-transformers modules: Transformer (maybe in a sub-folder), Pooling, Normalize, Dense.
  const modules = readModules(readJson(dir, "modules.json"));
  const transformerPath = modules.find((m) => m.kind === "Transformer")?.path ?? "";
  const stConfig = readJson(dir, join(transformerPath, "sentence_bert_config.json")) ?? readJson(dir, "sentence_bert_config.json");
  const poolingPath = modules.find((m) => m.kind === "Pooling")?.path ?? "1_Pooling";
  const poolingConfig = readJson(dir, join(poolingPath, "config.json"));
  const normalize = modules.some((m) => m.kind === "Normalize");
  const sparse = sparseLayout(modules, (p) => readJson(dir, join(p, "config.json")), poolingOverride,
    Array.isArray(config.architectures) ? String(config.architectures[0] ?? "") : "", readJson(dir, "router_config.json"),
    files.includes("idf.json") ? readJson(dir, "idf.json") : null);
  if (sparse?.query) {
    // The query module's tokenizer (SparseStaticEmbedding saves its own), read here so the registry does no file I/O.
    const q = sparse.query;
    q.tokenizerJson = readJson(dir, join(q.path, "tokenizer.json")) ?? tokenizerJson;
    q.tokenizerConfig = readJson(dir, join(q.path, "tokenizer_config.json")) ?? tokenizerConfig;
    q.maxLength = sane(q.tokenizerConfig.model_max_length) ?? sane(tokenizerConfig.model_max_length) ?? 512;
  }
  const stMeta = readJson(dir, "config_sentence_transformers.json");
  const multivector = sparse ? null : multiVectorLayout(config, stMeta, readJson(dir, "artifact.metadata"), modules, positionLimit(config));
  // bge-m3 is an XLM-RoBERTa encoder: only those exports are opened to read their output names.
  const hybrid = !sparse && !multivector && !colpali && !media && taskInfo.task === "embed" && String(config.model_type ?? "") === "xlm-roberta"
    ? hybridLayout(onnxOutputNames(join(dir, onnxFile)), files)
    : null;
  const task: Task = sparse ? "sparse" : multivector || colpali ? "multivector" : hybrid ? "hybrid" : taskInfo.task;
  const rerankTemplate = rerankTemplateOf(config, tokenizerJson, task);
  // sentence-transformers CLIP repositories name their one module CLIPModel; the towers are read from config.json.
  // An inference-free SparseEncoder's Router was checked by sparseLayout.
  const dense = denseModules(sparse?.query ? [] : modules, (p) => readJson(dir, join(p, "config.json")), media ? new Set([...KNOWN_MODULES, "CLIPModel"]) : KNOWN_MODULES);

  let pooling: Pooling;
  let poolingSource: string;
  if (poolingOverride !== "auto" && poolingOverride !== "splade") {
    pooling = poolingOverride;
    poolingSource = "--pooling-method";
  } else if (hybrid) {
    // bge-m3's dense vector is the CLS state (FlagEmbedding), whatever a pooling config says.
    pooling = "cls";
    poolingSource = "bge-m3 (CLS)";
  } else {
    const fromFile = poolingFromConfig(poolingConfig);
    if (fromFile) {
      pooling = fromFile;
      poolingSource = `${poolingPath}/config.json`;
    } else if (task === "embed" && looksLikeBgeM3(config)) {
      pooling = "cls";
      poolingSource = "bge-m3 (XLMRobertaModel, 8194 positions): CLS";
      warnings.push(
        "no 1_Pooling/config.json: an XLMRobertaModel with 8194 positions is taken for bge-m3 (Xenova/bge-m3 and other " +
          "encoder-only exports), whose dense vector is the CLS state: using CLS pooling; pass --pooling-method to choose",
      );
    } else {
      pooling = "mean";
      poolingSource = "default (no pooling config found)";
      if (task === "embed") warnings.push("no 1_Pooling/config.json: using mean pooling; pass --pooling-method to choose");
    }
  }

  // ColPali's positions are its text model's (PaliGemma's text_config, inside vlm_config for transformers' layout).
  const limit = positionLimit(colpali ? colpaliTextConfig(config) : config);
  let maxLength = multivector ? Math.max(multivector.queryLength, multivector.documentLength) :
    Math.min(
      sane(stConfig?.max_seq_length) ?? sane(tokenizerConfig.model_max_length) ?? limit ?? 512,
      limit ?? Number.MAX_SAFE_INTEGER,
    );
  if (rerankTemplate) maxLength = Math.min(maxLength, LLM_RERANK_MAX_LENGTH);
  if (maxLengthOverride > 0) {
    if (multivector || media || colpali) {
      throw new ModelLoadError(`--max-length applies to text models; this ${multivector ? "multi-vector" : "multimodal"} model takes its lengths from its own configuration`);
    }
    if (limit !== null && maxLengthOverride > limit) {
      throw new ModelLoadError(`--max-length ${maxLengthOverride} is more than the model's ${limit} positions (config.json max_position_embeddings)`);
    }
    maxLength = maxLengthOverride;
  }

  const prompts: Record<string, string> = {};
  const stPrompts = stMeta?.prompts && typeof stMeta.prompts === "object" ? stMeta.prompts as Record<string, unknown> : null;
  for (const [k, v] of Object.entries(stPrompts ?? towerTaskInstructions(config))) if (typeof v === "string") prompts[k] = v;
  const defaultPromptName = typeof stMeta?.default_prompt_name === "string" ? stMeta.default_prompt_name : null;

  // Multimodal towers output projections: their shared space has projection_dim dimensions.
  const textConfig = (config.text_config ?? {}) as Record<string, unknown>;
  const hidden = colpali
    ? colpali.dim ?? NaN
    : media
    ? Number(config.projection_dim ?? textConfig.projection_dim ?? textConfig.projection_size ?? textConfig.hidden_size)
    : dense.length
      ? dense[dense.length - 1]!.outFeatures
      : Number(config.hidden_size ?? config.d_model ?? config.n_embd ?? poolingConfig?.embedding_dimension ?? poolingConfig?.word_embedding_dimension);
  let weightBytes = 0;
  const onnxFiles = media && !media.combined ? [media.textFile, media.mediaFile] : [onnxFile];
  for (const f of onnxFiles.flatMap((o) => [o, ...externalDataFiles(o, files)])) {
    try { weightBytes += Bun.file(join(dir, f)).size; } catch { /* size is informational */ }
  }

  return {
    dir,
    task,
    // Decoder rerankers read the score at the last position: they pad on the left whatever the tokenizer says.
    paddingSide: rerankTemplate ? "left" : paddingSideOf(tokenizerConfig, tokenizerJson),
    rerankTemplate,
    modelType: String(config.model_type ?? "unknown"),
    architecture: Array.isArray(config.architectures) ? String(config.architectures[0]) : "unknown",
    onnxFile,
    modalities: media ? ["text", media.modality] : colpali ? ["text", "image"] : ["text"],
    media,
    dtype: chosen,
    maxLength,
    pooling,
    poolingSource: sparse ? sparse.source : poolingSource,
    sparse,
    dense,
    multivector,
    colpali,
    hybrid,
    normalize: hybrid ? true : normalize,
    includePrompt: poolingConfig?.include_prompt !== false,
    prompts,
    defaultPromptName,
    taskAdapters: taskAdaptersOf(config, prompts),
    // nomic-embed-text-v2-moe (nomic_bert with experts) truncates plainly, as sentence-transformers' truncate_dim.
    matryoshkaLayerNorm: config.model_type === "nomic_bert" && config.num_experts === undefined && config.moe_every_n_layers === undefined,
    labels,
    hiddenSize: Number.isFinite(hidden) ? hidden : null,
    weightBytes,
    tokenizerJson,
    tokenizerConfig,
    configJson: config,
    warnings,
  };
}
