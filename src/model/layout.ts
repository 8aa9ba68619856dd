// Reads a model folder laid out as a HuggingFace hub repository: config.json, the tokenizer files, modules.json, the
// pooling config, max length and prompts, and composes them with what each task kind reads of its own files
// (sparse-, multivector-, colpali-, hybrid-layout.ts, rerank-template.ts) into one ModelLayout. Knows nothing of
// requests.

import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Dtype, PoolingMethod } from "../config";
import { ModelLoadError } from "../errors";
import { onnxOutputNames } from "./onnx-graph";
import type { GraphChoice } from "./build";
import { positionLimit, sane } from "./config-values";
import { chooseOnnxFile, chooseTowerFiles, externalDataFiles } from "./repo-files";
import { denseModules, KNOWN_MODULES, poolingFromConfig, readModules, type DenseModule, type Pooling } from "./st-modules";
import { taskOf, type Task } from "./model-task";
import { mediaModalityOf, type MediaLayout, type Modality } from "./media-layout";
import { sparseLayout, type SparseLayout } from "./sparse-layout";
import { multiVectorLayout, type MultiVectorLayout } from "./multivector-layout";
import { colpaliLayout, colpaliTextConfig, type ColPaliLayout } from "./colpali-layout";
import { hybridLayout, looksLikeBgeM3, type HybridLayout } from "./hybrid-layout";
import { LLM_RERANK_MAX_LENGTH, rerankTemplateOf, type RerankTemplate } from "./rerank-template";

/**
 * Task adapters (Jina v3: config.json `lora_adaptations`): the export's `task_id` input selects one LoRA adapter for
 * a whole run (its index in `names`), and the model's `encode(task=...)` prepends that task's instruction
 * (config.json `task_instructions`).
 */
export interface TaskAdapters {
  names: readonly string[];
  instructions: Readonly<Record<string, string>>;
}

export interface ModelLayout {
  dir: string;
  task: Task;
  modelType: string;
  architecture: string;
  /**
   * Path of the chosen ONNX file, relative to dir (the text tower for multimodal models), or absolute for a graph
   * built from safetensors (in the cache): open it with resolve(dir, onnxFile).
   */
  onnxFile: string;
  /** Which graph runs (the export, or built from config.json + safetensors) and why. */
  graph: Omit<GraphChoice, "path">;
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

const EXPORTED: GraphChoice = { source: "export", reason: "the repository's ONNX export", path: null, dtype: null, cached: false, seconds: 0, architecture: null };

export function readLayout(
  dir: string, files: readonly string[], dtype: Dtype, poolingOverride: PoolingMethod, maxLengthOverride = 0, graph: GraphChoice = EXPORTED,
): ModelLayout {
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
  if (graph.path && (colpali || modality)) throw new ModelLoadError(`the graph builder builds text models; this ${colpali ? "ColPali" : modality} model needs its ONNX export (--graph export)`);
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
  } else if (graph.path) {
    onnxFile = graph.path;
    chosen = graph.dtype ?? "float32";
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
    ? hybridLayout(onnxOutputNames(resolve(dir, onnxFile)), files)
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
  const weightFiles = graph.path ? [graph.path, `${graph.path}.data`] : onnxFiles.flatMap((o) => [o, ...externalDataFiles(o, files)]);
  for (const f of weightFiles) {
    try { weightBytes += Bun.file(resolve(dir, f)).size; } catch { /* size is informational */ }
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
    graph: { source: graph.source, reason: graph.reason, dtype: graph.dtype, cached: graph.cached, seconds: graph.seconds, architecture: graph.architecture },
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
