// The Config type, the option table (one place that defines every flag, its environment variable, default
// and help), per-model list expansion and validation. Pure: no I/O. cli.ts feeds it argv, env and the parsed file.
import { ConfigError } from "./errors";
import { vertexRoutes } from "./platform";

export type Dtype = "auto" | "float32" | "float16" | "int8";
/** Which graph runs: the repository's ONNX export, one built from config.json + safetensors, or the export when there is one. */
export type GraphMode = "auto" | "export" | "build";
export type PoolingMethod = "auto" | "mean" | "cls" | "max" | "last" | "splade";
export type LogLevel = "debug" | "info" | "warn" | "error";

export interface ModelConfig {
  modelId: string;
  servedModelName: string;
  revision: string;
  batchSize: number;
  maxBatchTokens: number;
  dtype: Dtype;
  graph: GraphMode;
  device: string;
  poolingMethod: PoolingMethod;
  modelWarmup: boolean;
  numThreads: number;
  /** Session instances (inference workers) of the model, each running its own batch; 0 = calibrate at warm-up. */
  instances: number;
  /** --num-threads was given (0: calibrated with the instances at warm-up). */
  numThreadsSet: boolean;
  maxQueueSize: number;
  memoryBudgetMb: number;
  /** Seconds a batch may run before its inference worker counts as hung and is replaced (0: never). */
  inferenceTimeoutSeconds: number;
  /** Run overhead in tokens for the batcher; 0: calibrated at warm-up (the built-in constant without warm-up). */
  runOverheadTokens: number;
  /** Load at startup, or on the first request for it. */
  load: LoadPolicy;
  /** Unload after this many seconds without requests (0: never). */
  idleUnloadSeconds: number;
  /** Token limit of one input (truncation), instead of the model's own; 0: the model's own. */
  maxLength: number;
  /** A local file of int8/uint8 calibration ranges (per-dimension min and max), or null: calibration-free scale. */
  quantizationRanges: string | null;
  /** Weight of an inference-free sparse model's query token absent from idf.json: 0 (model cards) or 1 (OpenSearch). */
  idfMissingWeight: number;
}

export type LoadPolicy = "startup" | "on-demand";
export type OpenAiTokenIds = "cl100k" | "model";
export const OPENAI_TOKEN_IDS: readonly OpenAiTokenIds[] = ["cl100k", "model"];
export const LOAD_POLICIES: readonly LoadPolicy[] = ["startup", "on-demand"];

export interface ServerConfig {
  host: string;
  port: number;
  urlPrefix: string;
  logLevel: LogLevel;
  logFormat: "text" | "json";
  apiKeys: string[];
  permissiveCors: boolean;
  corsOrigins: string[];
  maxRequestBytes: number;
  maxInputsPerRequest: number;
  /** Most token vectors one multi-vector (ColBERT) request may return. */
  maxVectorsPerRequest: number;
  /** What integer inputs on the OpenAI-shaped /embeddings mean: cl100k_base ids (decoded) or the model's own ids. */
  openaiTokenIds: OpenAiTokenIds;
  maxInputChars: number;
  tokenizerWorkers: number;
  media: MediaConfig;
  shutdownTimeoutSeconds: number;
  preloadOnly: boolean;
  /** Vertex AI's health and prediction routes (AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE), served at the root. */
  vertex: { health: string | null; predict: string | null };
  cacheDir: string | null;
  /** Memory all loaded models may take together, in MB (0: unlimited). */
  maxModelsMemoryMb: number;
  /** Seconds a request waits for an on-demand model's load. */
  modelLoadTimeoutSeconds: number;
  /** After a failed load, seconds until a request tries it again (doubling per further failure); 0: every request. */
  modelLoadRetrySeconds: number;
  /** null: no result cache (the default). */
  resultCache: ResultCacheConfig | null;
  /** gRPC port (0: any free one), or null (off). */
  grpcPort: number | null;
  /** OTLP/HTTP collector URL for traces, or null (off). */
  otlpEndpoint: string | null;
  otlpServiceName: string;
  models: ModelConfig[];
}

/** Where computed results are cached: in process, in an SQLite file, or in Redis (shared by replicas). */
export interface ResultCacheConfig {
  backend: { kind: "memory" } | { kind: "sqlite"; path: string } | { kind: "redis"; url: string };
  /** Bound of the memory and sqlite backends; Redis is bounded by its own maxmemory. */
  sizeMb: number;
}

/** Parses --result-cache: "memory", "sqlite:PATH", "redis://HOST:PORT" (or rediss://); "" / "off" / "none": no cache. */
export function parseResultCache(spec: string | null, sizeMb: number): ResultCacheConfig | null {
  const s = (spec ?? "").trim();
  if (s === "" || s === "off" || s === "none") return null;
  if (sizeMb < 1) throw new ConfigError(`--result-cache-size-mb must be at least 1, got ${sizeMb}`);
  if (s === "memory") return { backend: { kind: "memory" }, sizeMb };
  if (s.startsWith("sqlite:")) {
    const path = s.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (!path) throw new ConfigError("--result-cache sqlite:PATH needs a file path, e.g. sqlite:/var/cache/infinity/results.db");
    return { backend: { kind: "sqlite", path }, sizeMb };
  }
  if (/^rediss?:\/\//.test(s)) {
    try {
      new URL(s);
    } catch {
      throw new ConfigError(`--result-cache: "${s}" is not a valid redis:// URL`);
    }
    return { backend: { kind: "redis", url: s }, sizeMb };
  }
  throw new ConfigError(`--result-cache: expected memory, sqlite:PATH or redis://HOST:PORT, got "${s}"`);
}

/** Image and audio inputs: decoding limits, the worker pool, and fetching http(s) URLs. */
export interface MediaConfig {
  workers: number;
  maxBytes: number;
  maxImagePixels: number;
  allowUrls: boolean;
  urlTimeoutSeconds: number;
  urlPublicOnly: boolean;
}

type Kind = "string" | "int" | "bool" | "enum" | "list";

export interface OptionSpec {
  /** Flag name without dashes, kebab-case; also the key in the config file. */
  name: string;
  kind: Kind;
  /** Per-model options take one value for all models, or one per model by position. */
  perModel: boolean;
  default: string | number | boolean | string[] | null;
  /** Shown in --help when the default is computed at startup. */
  defaultLabel?: string;
  choices?: readonly string[];
  help: string;
  /** Flags that may be repeated (lists, model ids). */
  repeatable?: boolean;
  /** Not settable from the config file (e.g. the path of the file itself). */
  cliOnly?: boolean;
}

export const DTYPES: readonly Dtype[] = ["auto", "float32", "float16", "int8"];
export const GRAPH_MODES: readonly GraphMode[] = ["auto", "export", "build"];
export const POOLING_METHODS: readonly PoolingMethod[] = ["auto", "mean", "cls", "max", "last", "splade"];
export const DEVICES = ["auto", "cpu", "cuda", "tensorrt", "coreml", "dml", "webgpu"] as const;

export const OPTIONS: readonly OptionSpec[] = [
  // Per-model options.
  { name: "model-id", kind: "string", perModel: true, repeatable: true, default: null,
    help: "HuggingFace model id, local folder or gs://bucket/folder (copied from Cloud Storage); repeat to serve several models" },
  { name: "served-model-name", kind: "string", perModel: true, repeatable: true, default: null,
    defaultLabel: "derived from model-id", help: "name clients use in the `model` field" },
  { name: "revision", kind: "string", perModel: true, repeatable: true, default: "main",
    help: "hub branch, tag or commit to download" },
  { name: "batch-size", kind: "int", perModel: true, repeatable: true, default: 32,
    help: "most inputs in one inference batch" },
  { name: "max-batch-tokens", kind: "int", perModel: true, repeatable: true, default: 0,
    defaultLabel: "0 = auto: timed at warm-up (512 on CPU, 16384 on GPU providers without warm-up)",
    help: "token budget of one batch: padded length x batch size; a longer input runs alone; 0 times batches of doubling size at warm-up and moves off that constant only to a size that runs at least 10% more tokens/s (sizes past the peak are not tried; GET /models shows max_batch_tokens_source)" },
  { name: "dtype", kind: "enum", perModel: true, repeatable: true, default: "auto", choices: DTYPES,
    help: "which ONNX export to load: float32 (model.onnx), float16 (model_fp16.onnx), int8 (model_quantized.onnx / model_int8.onnx); auto prefers float32. A built graph (--graph) is float32, or int8 with its weights quantized at build time (MatMulNBits)" },
  { name: "graph", kind: "enum", perModel: true, repeatable: true, default: "auto", choices: GRAPH_MODES,
    help: "which graph runs: export (the repository's ONNX file), build (built at load from config.json and safetensors, cached under the cache dir's infinity-graphs/), or auto: built when the repository has no export, or for BERT / RoBERTa / XLM-R at float32 (measured as fast as their exports, with less memory), else the export; GET /models says which ran and why" },
  { name: "device", kind: "enum", perModel: true, repeatable: true, default: "auto", choices: DEVICES,
    help: "onnxruntime execution provider; falls back to cpu with a warning when unavailable" },
  { name: "pooling-method", kind: "enum", perModel: true, repeatable: true, default: "auto", choices: POOLING_METHODS,
    help: "embedding pooling; auto uses what the model's 1_Pooling/config.json (or SpladePooling) says; splade serves a masked-LM export (logits) as a SPLADE sparse encoder" },
  { name: "model-warmup", kind: "bool", perModel: true, repeatable: true, default: true,
    help: "run warm-up batches before /health reports ready (--no-model-warmup to skip)" },
  { name: "num-threads", kind: "int", perModel: true, repeatable: true, default: 0, defaultLabel: "0 = number of CPU cores",
    help: "onnxruntime intra-op threads per model (per instance with --instances)" },
  { name: "instances", kind: "int", perModel: true, repeatable: true, default: 0, defaultLabel: "0 = decide at warm-up",
    help: "session instances of the model, each in its own inference worker with --num-threads intra-op threads and its own copy of the weights, running different batches in parallel; 0: one session, unless --max-models-memory-mb is set: then warm-up times one session with all cores against one single-threaded session per core (up to 4) and keeps the instances when they are faster by at least the factor they add to the model's memory (and 1.1x) and fit the budget (1 with --no-model-warmup, with --num-threads given, or on a GPU)" },
  { name: "max-queue-size", kind: "int", perModel: true, repeatable: true, default: 8192,
    help: "queued inputs per model before requests get 429" },
  { name: "memory-budget-mb", kind: "int", perModel: true, repeatable: true, default: 0, defaultLabel: "0 = unlimited",
    help: "cap on a model's activation memory per batch; lowers the batch token budget to fit" },
  { name: "inference-timeout", kind: "int", perModel: true, repeatable: true, default: 120, defaultLabel: "120 (0 = never)",
    help: "seconds one batch may run before the model's inference worker counts as hung: it is replaced and the batch retried once (503 when that fails too)" },
  { name: "run-overhead-tokens", kind: "int", perModel: true, repeatable: true, default: 0, defaultLabel: "0 = calibrate at warm-up",
    help: "what one run costs beyond its tokens, in tokens: a batch of n inputs may carry (n - 1) x this many padding tokens; 0 measures it at warm-up (24 with --no-model-warmup)" },
  { name: "load", kind: "enum", perModel: true, repeatable: true, default: "startup", choices: LOAD_POLICIES,
    help: "when the model is loaded: at startup, or on the first request for it (requests wait, up to --model-load-timeout)" },
  { name: "idle-unload-seconds", kind: "int", perModel: true, repeatable: true, default: 0, defaultLabel: "0 = never",
    help: "unload the model after this many seconds without requests (its sessions and inference workers are freed); the next request loads it again" },
  { name: "quantization-ranges", kind: "string", perModel: true, repeatable: true, default: null, defaultLabel: "none",
    help: "int8/uint8 calibration of an embedding model: a local file with the per-dimension min and max of calibration embeddings (JSON {\"min\": [...], \"max\": [...]} or a .npy of shape (2, dim)); int8/uint8 then follow sentence-transformers' quantize_embeddings with those ranges instead of the per-vector scale; checked at load" },
  { name: "idf-missing-weight", kind: "enum", perModel: true, repeatable: true, default: "0", choices: ["0", "1"],
    help: "weight of a query token absent from idf.json (inference-free sparse models in the older OpenSearch layout): 0 as the model cards' usage code, 1 as OpenSearch's in-cluster neural_sparse query (ml-commons' sparse tokenizer and neural-search's analyzer); refused at load for a model without idf.json" },
  { name: "max-length", kind: "int", perModel: true, repeatable: true, default: 0, defaultLabel: "0 = the model's own",
    help: "tokens an input is truncated to, instead of the model's own limit (sentence-transformers max_seq_length, else the tokenizer's model_max_length, within max_position_embeddings; LLM rerankers at most 8192, the Qwen3-Reranker model card's max_length); at most the model's positions; text models only (not ColBERT / ColPali / image or audio models)" },
  // Server options.
  { name: "host", kind: "string", perModel: false, default: "0.0.0.0", help: "address to listen on" },
  { name: "port", kind: "int", perModel: false, default: 7997, help: "port to listen on" },
  { name: "url-prefix", kind: "string", perModel: false, default: "", help: "prefix for the API routes, e.g. /v1" },
  { name: "log-level", kind: "enum", perModel: false, default: "info", choices: ["debug", "info", "warn", "error"],
    help: "least severe log level printed (debug logs one line per request)" },
  { name: "log-format", kind: "enum", perModel: false, default: "text", choices: ["text", "json"], help: "log line format" },
  { name: "api-key", kind: "list", perModel: false, repeatable: true, default: [],
    help: "require `Authorization: Bearer <key>` (or the bare key) on API routes; repeat for several keys" },
  { name: "api-key-file", kind: "string", perModel: false, default: null, help: "file with one API key per line" },
  { name: "permissive-cors", kind: "bool", perModel: false, default: false, help: "allow any origin (CORS)" },
  { name: "cors-allow-origins", kind: "list", perModel: false, repeatable: true, default: [],
    help: "origins allowed by CORS; repeat for several" },
  { name: "max-request-bytes", kind: "int", perModel: false, default: 32 * 1024 * 1024,
    help: "largest request body accepted (413 past it)" },
  { name: "max-inputs-per-request", kind: "int", perModel: false, default: 2048, help: "most inputs in one request" },
  { name: "max-vectors-per-request", kind: "int", perModel: false, default: 65536,
    help: "most token vectors one request may return: /embeddings with a multi-vector model (ColBERT, ColPali, bge-m3's `multi_vector` output) and TEI's /embed_all, counted before it runs (413 past it; 65536 vectors of 128 floats are 32 MiB as float32); /rerank with these models holds at most this many document vectors at once: it computes and scores the documents in chunks of that many vectors (a document more than this is a chunk alone), so any request it accepts is answered" },
  { name: "openai-token-ids", kind: "enum", perModel: false, default: "cl100k", choices: OPENAI_TOKEN_IDS,
    help: "what integer inputs on /embeddings (OpenAI shape) are: cl100k = OpenAI's cl100k_base token ids (what OpenAI clients such as LangChain's OpenAIEmbeddings send), decoded to text and tokenized by the model; model = ids of the model's own vocabulary, fed as given (as TEI's /embed)" },
  { name: "max-input-chars", kind: "int", perModel: false, default: 1_000_000,
    help: "longest single input string accepted, in characters" },
  { name: "tokenizer-workers", kind: "int", perModel: false, default: 0, defaultLabel: "0 = min(4, cores - 1), at least 1",
    help: "tokenizer worker threads" },
  { name: "media-workers", kind: "int", perModel: false, default: 0, defaultLabel: "0 = min(2, cores)",
    help: "worker threads that decode and preprocess image/audio inputs (started only when a multimodal model is served)" },
  { name: "max-media-bytes", kind: "int", perModel: false, default: 16 * 1024 * 1024,
    help: "largest image/audio file accepted, as decoded from a data: URI or downloaded from a URL (413 past it)" },
  { name: "max-image-pixels", kind: "int", perModel: false, default: 25_000_000,
    help: "largest image accepted, in width x height pixels (decompression bombs)" },
  { name: "allow-media-urls", kind: "bool", perModel: false, default: true,
    help: "fetch http(s) URLs given as image/audio inputs (--no-allow-media-urls: data: URIs only)" },
  { name: "media-url-timeout", kind: "int", perModel: false, default: 10,
    help: "seconds allowed for fetching one media URL, connection to last byte" },
  { name: "media-url-public-only", kind: "bool", perModel: false, default: false,
    help: "fetch media URLs only from public addresses: also refuse loopback, private, CGNAT and unique-local ranges (link-local and cloud metadata addresses are always refused)" },
  { name: "shutdown-timeout", kind: "int", perModel: false, default: 30,
    help: "seconds to finish queued work after SIGTERM/SIGINT" },
  { name: "cache-dir", kind: "string", perModel: false, default: null, defaultLabel: "$INFINITY_HOME or $HF_HOME/hub",
    help: "where hub downloads and built graphs (infinity-graphs/) are cached" },
  { name: "result-cache", kind: "string", perModel: false, default: null, defaultLabel: "off",
    help: "cache results per input: memory (in-process LRU), sqlite:PATH (file, survives restarts) or redis://HOST:PORT (shared by replicas); a failing cache is skipped, never fails a request" },
  { name: "result-cache-size-mb", kind: "int", perModel: false, default: 1024,
    help: "size bound of the memory and sqlite result caches (least recently used entries are evicted); Redis is bounded by its own maxmemory" },
  { name: "grpc-port", kind: "int", perModel: false, default: -1, defaultLabel: "off",
    help: "serve TEI's gRPC API (tei.v1: Info, Embed, Predict, Rerank, Tokenize and their streams) and grpc.health.v1 on this port (0: any free port), on --host, behind the same API key (authorization metadata); a call picks its model with the `model` metadata" },
  { name: "otlp-endpoint", kind: "string", perModel: false, default: null, defaultLabel: "off ($OTEL_EXPORTER_OTLP_ENDPOINT when set)",
    help: "export OpenTelemetry traces over OTLP/HTTP (protobuf) to this collector (its /v1/traces): a span per request with its tokenization, cache lookup, queue wait, batch and inference; a request's traceparent joins its caller's trace" },
  { name: "otlp-service-name", kind: "string", perModel: false, default: "infinity", defaultLabel: "infinity ($OTEL_SERVICE_NAME when set)",
    help: "service.name of the exported spans" },
  { name: "max-models-memory-mb", kind: "int", perModel: false, default: 0, defaultLabel: "0 = unlimited",
    help: "memory all loaded models may take together (as measured at load); loading past it first unloads the least recently used idle models, else answers 503" },
  { name: "model-load-timeout", kind: "int", perModel: false, default: 60,
    help: "seconds a request waits for its on-demand model to load before 503 with Retry-After (the load goes on)" },
  { name: "model-load-retry-seconds", kind: "int", perModel: false, default: 10,
    help: "after a model's load fails, requests for it get 503 model_load_failed with Retry-After for this long before one tries again (doubling with each further failure, up to 5 minutes; 0: every request tries)" },
  { name: "preload-only", kind: "bool", perModel: false, default: false,
    help: "download/resolve every model and build the graphs that are built (--graph), then exit 0" },
  { name: "config", kind: "string", perModel: false, default: null, cliOnly: true,
    help: "TOML config file with server keys and [[models]] tables" },
];

export function envName(optionName: string): string {
  return "INFINITY_" + optionName.toUpperCase().replace(/-/g, "_");
}

/** A raw value as it came from one source, before typing. File values arrive typed already. */
export type RawValue = string | number | boolean | Array<string | number | boolean>;

export interface Sources {
  /** From argv: each option's values in order (repeated flags append). */
  flags: Map<string, string[]>;
  /** The process environment (only INFINITY_* keys are read). */
  env: Record<string, string | undefined>;
  /** The parsed config file, or null. */
  file: Record<string, unknown> | null;
  /** Number of CPU cores, for computed defaults. */
  cpuCount: number;
}

const specByName = new Map(OPTIONS.map((o) => [o.name, o]));

export function findOption(name: string): OptionSpec | undefined {
  return specByName.get(name);
}

function typed(spec: OptionSpec, raw: unknown, source: string): string | number | boolean {
  const where = `${source} --${spec.name}`;
  switch (spec.kind) {
    case "int": {
      const n = typeof raw === "number" ? raw : typeof raw === "string" && /^-?\d+$/.test(raw.trim()) ? Number(raw) : NaN;
      if (!Number.isSafeInteger(n) || n < 0) throw new ConfigError(`${where}: expected a non-negative integer, got ${JSON.stringify(raw)}`);
      return n;
    }
    case "bool": {
      if (typeof raw === "boolean") return raw;
      const s = String(raw).trim().toLowerCase();
      if (["1", "true", "yes", "on"].includes(s)) return true;
      if (["0", "false", "no", "off"].includes(s)) return false;
      throw new ConfigError(`${where}: expected true or false, got ${JSON.stringify(raw)}`);
    }
    case "enum": {
      const s = String(raw);
      if (!spec.choices!.includes(s)) throw new ConfigError(`${where}: expected one of ${spec.choices!.join(", ")}, got ${JSON.stringify(raw)}`);
      return s;
    }
    default: {
      if (typeof raw !== "string" && typeof raw !== "number") throw new ConfigError(`${where}: expected a string, got ${JSON.stringify(raw)}`);
      return String(raw);
    }
  }
}

/** kebab-case file keys are canonical; snake_case is accepted too (what Python users write). */
function fileValue(obj: Record<string, unknown> | null | undefined, name: string): unknown {
  if (!obj) return undefined;
  if (name in obj) return obj[name];
  const snake = name.replace(/-/g, "_");
  return snake in obj ? obj[snake] : undefined;
}

/** Values of one option from the highest-precedence source that sets it: flag > env > file > default. */
function pick(spec: OptionSpec, src: Sources): { values: unknown[]; source: string } | null {
  const flag = src.flags.get(spec.name);
  if (flag && flag.length) return { values: flag, source: "flag" };
  const env = src.env[envName(spec.name)];
  if (env !== undefined && env !== "") {
    // Lists in environment variables are ';'-separated.
    const parts = spec.perModel || spec.kind === "list" ? env.split(";").map((s) => s.trim()).filter((s) => s !== "") : [env];
    return { values: parts, source: `environment ${envName(spec.name)}` };
  }
  if (!spec.perModel) {
    const v = fileValue(src.file, spec.name);
    if (v !== undefined) return { values: Array.isArray(v) ? v : [v], source: "config file" };
  }
  return null;
}

function fileModels(src: Sources): Record<string, unknown>[] {
  const models = src.file?.models;
  if (models === undefined) return [];
  if (!Array.isArray(models) || models.some((m) => typeof m !== "object" || m === null || Array.isArray(m))) {
    throw new ConfigError("config file: `models` must be an array of tables ([[models]])");
  }
  return models as Record<string, unknown>[];
}

/** The served name derived from a model id: the id itself for hub ids, the folder name for local paths. */
export function defaultServedName(modelId: string): string {
  const trimmed = modelId.replace(/[\\/]+$/, "");
  // Hub ids are "name" or "org/name"; anything else is a folder path, named by its last component.
  if (trimmed.startsWith("/") || trimmed.startsWith(".") || /^[A-Za-z]:[\\/]/.test(trimmed) || trimmed.split(/[\\/]/).length > 2) {
    return trimmed.split(/[\\/]/).pop() || trimmed;
  }
  return trimmed;
}

export function buildConfig(src: Sources): ServerConfig {
  const file = src.file;
  if (file) {
    const known = new Set(OPTIONS.filter((o) => !o.perModel && !o.cliOnly).flatMap((o) => [o.name, o.name.replace(/-/g, "_")]));
    for (const key of Object.keys(file)) {
      if (key !== "models" && !known.has(key)) throw new ConfigError(`config file: unknown key "${key}"`);
    }
  }
  const models = fileModels(src);
  const perModelKnown = new Set(OPTIONS.filter((o) => o.perModel).flatMap((o) => [o.name, o.name.replace(/-/g, "_")]));
  models.forEach((m, i) => {
    for (const key of Object.keys(m)) {
      if (!perModelKnown.has(key)) throw new ConfigError(`config file: [[models]] #${i + 1}: unknown key "${key}"`);
    }
  });

  // The model list: from flags/env if given there, else from the file's [[models]].
  const idSpec = specByName.get("model-id")!;
  const idPick = pick(idSpec, src);
  let modelIds: string[];
  let fromFile = false;
  if (idPick) {
    modelIds = idPick.values.map((v) => String(v));
  } else {
    modelIds = models.map((m, i) => {
      const v = fileValue(m, "model-id");
      if (typeof v !== "string" || !v) throw new ConfigError(`config file: [[models]] #${i + 1} needs a model-id`);
      return v;
    });
    fromFile = true;
  }
  if (modelIds.length === 0) throw new ConfigError("no model given: pass --model-id <hub id or folder> (or INFINITY_MODEL_ID, or [[models]] in --config)");
  const n = modelIds.length;

  const perModel = (name: string): Array<string | number | boolean> => {
    const spec = specByName.get(name)!;
    const p = pick(spec, src);
    if (p) {
      if (p.values.length !== 1 && p.values.length !== n) {
        throw new ConfigError(`${p.source} --${name}: got ${p.values.length} values for ${n} models; give one value (for all) or one per model`);
      }
      return Array.from({ length: n }, (_, i) => typed(spec, p.values.length === 1 ? p.values[0] : p.values[i], p.source));
    }
    return Array.from({ length: n }, (_, i) => {
      // [[models]] tables apply only when the model list itself comes from the file.
      const v = fromFile ? fileValue(models[i], name) : undefined;
      if (v !== undefined) return typed(spec, v, `config file [[models]] #${i + 1}`);
      return spec.default as string | number | boolean;
    });
  };
  const server = (name: string): unknown => {
    const spec = specByName.get(name)!;
    const p = pick(spec, src);
    if (!p) return spec.default;
    if (spec.kind === "list") return p.values.map((v) => String(typed(spec, v, p.source)));
    if (p.values.length > 1) throw new ConfigError(`${p.source} --${name}: given ${p.values.length} times; it takes one value`);
    return typed(spec, p.values[0], p.source);
  };

  const names = perModel("served-model-name");
  const revision = perModel("revision");
  const batchSize = perModel("batch-size");
  const maxBatchTokens = perModel("max-batch-tokens");
  const dtype = perModel("dtype");
  const graph = perModel("graph");
  const device = perModel("device");
  const pooling = perModel("pooling-method");
  const warmup = perModel("model-warmup");
  const threads = perModel("num-threads");
  const instances = perModel("instances");
  const maxQueue = perModel("max-queue-size");
  const memory = perModel("memory-budget-mb");
  const inferenceTimeout = perModel("inference-timeout");
  const runOverhead = perModel("run-overhead-tokens");
  const load = perModel("load");
  const idleUnload = perModel("idle-unload-seconds");
  const ranges = perModel("quantization-ranges");
  const idfMissing = perModel("idf-missing-weight");
  const maxLength = perModel("max-length");

  const modelConfigs: ModelConfig[] = modelIds.map((modelId, i) => {
    if (!modelId.trim()) throw new ConfigError(`model #${i + 1}: empty model id`);
    const bs = batchSize[i] as number;
    const mbt = maxBatchTokens[i] as number;
    if (bs < 1) throw new ConfigError(`--batch-size must be at least 1 (model ${modelId})`);
    if ((maxQueue[i] as number) < 1) throw new ConfigError(`--max-queue-size must be at least 1 (model ${modelId})`);
    if ((inferenceTimeout[i] as number) < 0) throw new ConfigError(`--inference-timeout must be 0 (never) or a number of seconds (model ${modelId})`);
    if ((instances[i] as number) < 0) throw new ConfigError(`--instances must be 0 (calibrate) or a number of instances (model ${modelId})`);
    if ((runOverhead[i] as number) < 0) throw new ConfigError(`--run-overhead-tokens must be 0 (calibrate) or a number of tokens (model ${modelId})`);
    return {
      modelId,
      servedModelName: (names[i] as string | null) ?? defaultServedName(modelId),
      revision: revision[i] as string,
      batchSize: bs,
      maxBatchTokens: mbt,
      dtype: dtype[i] as Dtype,
      graph: graph[i] as GraphMode,
      device: device[i] as string,
      poolingMethod: pooling[i] as PoolingMethod,
      modelWarmup: warmup[i] as boolean,
      numThreads: (threads[i] as number) || src.cpuCount,
      numThreadsSet: (threads[i] as number) > 0,
      instances: instances[i] as number,
      maxQueueSize: maxQueue[i] as number,
      memoryBudgetMb: memory[i] as number,
      inferenceTimeoutSeconds: inferenceTimeout[i] as number,
      runOverheadTokens: runOverhead[i] as number,
      load: load[i] as LoadPolicy,
      idleUnloadSeconds: idleUnload[i] as number,
      quantizationRanges: (ranges[i] as string | null) || null,
      idfMissingWeight: Number(idfMissing[i]),
      maxLength: maxLength[i] as number,
    };
  });
  const seen = new Set<string>();
  for (const m of modelConfigs) {
    if (seen.has(m.servedModelName)) {
      throw new ConfigError(`served model name "${m.servedModelName}" is used twice; give each model a unique --served-model-name`);
    }
    seen.add(m.servedModelName);
  }

  const port = server("port") as number;
  if (port > 65535) throw new ConfigError(`--port must be between 0 (any free port) and 65535, got ${port}`);
  let urlPrefix = String(server("url-prefix") ?? "").trim();
  if (urlPrefix && !urlPrefix.startsWith("/")) urlPrefix = "/" + urlPrefix;
  urlPrefix = urlPrefix.replace(/\/+$/, "");
  const positive = (name: string): number => {
    const v = server(name) as number;
    if (v < 1) throw new ConfigError(`--${name} must be at least 1, got ${v}`);
    return v;
  };
  const workers = server("tokenizer-workers") as number;

  return {
    host: server("host") as string,
    port,
    urlPrefix,
    logLevel: server("log-level") as LogLevel,
    logFormat: server("log-format") as "text" | "json",
    apiKeys: server("api-key") as string[],
    permissiveCors: server("permissive-cors") as boolean,
    corsOrigins: server("cors-allow-origins") as string[],
    maxRequestBytes: positive("max-request-bytes"),
    maxInputsPerRequest: positive("max-inputs-per-request"),
    maxVectorsPerRequest: positive("max-vectors-per-request"),
    openaiTokenIds: server("openai-token-ids") as OpenAiTokenIds,
    maxInputChars: positive("max-input-chars"),
    // One core is the main thread's. Each worker holds a runtime and a copy of every tokenizer (~23 MB RSS for the
    // bench model's); one tokenized 330,000-520,000 tokens/s of 32-text requests on the loaded 2-core machine, 40x
    // what the model runs there, so a second one on 2 cores only held memory (bench/README.md "Memory").
    tokenizerWorkers: workers || Math.max(1, Math.min(4, src.cpuCount - 1)),
    media: {
      workers: (server("media-workers") as number) || Math.max(1, Math.min(2, src.cpuCount)),
      maxBytes: positive("max-media-bytes"),
      maxImagePixels: positive("max-image-pixels"),
      allowUrls: server("allow-media-urls") as boolean,
      urlTimeoutSeconds: positive("media-url-timeout"),
      urlPublicOnly: server("media-url-public-only") as boolean,
    },
    shutdownTimeoutSeconds: server("shutdown-timeout") as number,
    preloadOnly: server("preload-only") as boolean,
    vertex: vertexRoutes(src.env),
    cacheDir: (server("cache-dir") as string | null) ?? null,
    maxModelsMemoryMb: server("max-models-memory-mb") as number,
    modelLoadTimeoutSeconds: positive("model-load-timeout"),
    modelLoadRetrySeconds: server("model-load-retry-seconds") as number,
    resultCache: parseResultCache(server("result-cache") as string | null, server("result-cache-size-mb") as number),
    ...otlpOf(src, server("otlp-endpoint") as string | null),
    grpcPort: grpcPortOf(server("grpc-port") as number),
    models: modelConfigs,
  };
}

function grpcPortOf(port: number): number | null {
  if (port === -1) return null;
  if (port < 0 || port > 65535) throw new ConfigError(`--grpc-port must be between 0 (any free port) and 65535, got ${port}`);
  return port;
}

/** Traces: --otlp-endpoint, else OTEL_EXPORTER_OTLP_ENDPOINT; the service name from the flag, else OTEL_SERVICE_NAME. */
function otlpOf(src: Sources, flag: string | null): { otlpEndpoint: string | null; otlpServiceName: string } {
  const endpoint = (flag ?? src.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? "").trim() || null;
  if (endpoint !== null && !/^https?:\/\/[^/\s]+/i.test(endpoint)) throw new ConfigError(`--otlp-endpoint must be an http(s) URL such as http://collector:4318, got "${endpoint}"`);
  const given = pick(specByName.get("otlp-service-name")!, src);
  const name = (given ? String(given.values[0]) : src.env.OTEL_SERVICE_NAME ?? "infinity").trim();
  if (!name) throw new ConfigError("--otlp-service-name must not be empty");
  return { otlpEndpoint: endpoint, otlpServiceName: name };
}

/** The value of --api-key-file, which cli.ts reads and appends to apiKeys. */
export function apiKeyFileOption(src: Sources): string | null {
  const p = pick(specByName.get("api-key-file")!, src);
  return p ? String(p.values[0]) : null;
}

/** Parses argv (after the optional `v2` subcommand) into per-option value lists. */
export function parseArgv(argv: string[]): { flags: Map<string, string[]>; help: boolean; version: boolean } {
  const flags = new Map<string, string[]>();
  let help = false;
  let version = false;
  const add = (name: string, value: string) => {
    const list = flags.get(name) ?? [];
    list.push(value);
    flags.set(name, list);
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--help" || arg === "-h") { help = true; continue; }
    if (arg === "--version") { version = true; continue; }
    if (!arg.startsWith("--")) throw new ConfigError(`unexpected argument "${arg}"; options start with --, see --help`);
    let name = arg.slice(2);
    let value: string | undefined;
    const eq = name.indexOf("=");
    if (eq >= 0) { value = name.slice(eq + 1); name = name.slice(0, eq); }
    name = name.replace(/_/g, "-");
    let spec = specByName.get(name);
    if (!spec && name.startsWith("no-")) {
      const positive = specByName.get(name.slice(3));
      if (positive?.kind === "bool") {
        if (value !== undefined) throw new ConfigError(`--${name} takes no value`);
        add(positive.name, "false");
        continue;
      }
    }
    if (!spec) throw new ConfigError(`unknown option --${name}; see --help`);
    if (spec.kind === "bool" && value === undefined) {
      // A bool flag takes an optional explicit value only as --flag=value.
      add(spec.name, "true");
      continue;
    }
    if (value === undefined) {
      value = argv[++i];
      if (value === undefined || (value.startsWith("--") && value.length > 2)) throw new ConfigError(`--${name} needs a value`);
    }
    add(spec.name, value);
  }
  return { flags, help, version };
}

export function helpText(): string {
  const lines = [
    "infinity: embedding, reranking and classification server for HuggingFace models",
    "",
    "usage: infinity v2 --model-id <hub id | folder> [--model-id ...] [options]",
    "       (the `v2` subcommand is optional)",
    "       infinity serve [options]: SageMaker's start: port 8080, the model from HF_MODEL_ID or /opt/ml/model",
    "Vertex AI's AIP_HTTP_PORT, AIP_STORAGE_URI (gs:// or a folder), AIP_HEALTH_ROUTE and AIP_PREDICT_ROUTE are read",
    "when set (docs/deploy.md).",
    "",
    "Per-model options take one value (for all models) or one per --model-id, by position.",
    "Every option is also read from INFINITY_<NAME> (lists ';'-separated); precedence:",
    "flag > environment > config file > default.",
    "",
  ];
  for (const o of OPTIONS) {
    const flag = o.kind === "bool" ? `--[no-]${o.name}` : `--${o.name} <${o.kind === "enum" ? o.choices!.join("|") : o.kind === "int" ? "n" : "value"}>`;
    lines.push(`  ${flag}`);
    lines.push(`      ${o.help}${o.perModel ? " [per model]" : ""}`);
    lines.push(`      default: ${optionDefaultText(o)}; env: ${envName(o.name)}`);
  }
  lines.push("  --help, -h      this text");
  lines.push("  --version       print the version");
  return lines.join("\n");
}

/** An option's default as --help and the flag reference show it. */
export function optionDefaultText(o: OptionSpec): string {
  return o.defaultLabel ?? (o.default === null ? "none" : Array.isArray(o.default) ? (o.default.length ? o.default.join(",") : "none") : String(o.default));
}

/**
 * The flag reference as a Markdown table, rendered from OPTIONS (the table --help prints): flag, environment
 * variable, default, per model, description. build/flags-doc.ts writes it into docs/operations.md; a test checks
 * that the committed section is this text.
 */
export function flagReferenceMarkdown(): string {
  const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\s*\n\s*/g, " ");
  const rows = [
    "| flag | environment | default | per model | description |",
    "|---|---|---|---|---|",
  ];
  for (const o of OPTIONS) {
    const flag = o.kind === "bool" ? `--[no-]${o.name}` : `--${o.name}`;
    const notes = [
      o.choices ? `one of: ${o.choices.join(", ")}` : "",
      o.repeatable && !o.perModel ? "repeatable" : "",
      o.cliOnly ? "not a config-file key" : "",
    ].filter((s) => s !== "");
    const description = o.help + (notes.length ? ` (${notes.join("; ")})` : "");
    rows.push(`| \`${flag}\` | \`${envName(o.name)}\` | ${cell(optionDefaultText(o) || "(empty)")} | ${o.perModel ? "yes" : "no"} | ${cell(description)} |`);
  }
  rows.push("| `--help`, `-h` | | | | print the option list and exit |");
  rows.push("| `--version` | | | | print the version and exit |");
  return rows.join("\n");
}
