// Graphs built from config.json + safetensors: the architectures the builder knows (one file each, one line here),
// the choice between a repository's ONNX export and a built graph, and the cache of built graphs.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Dtype, GraphMode } from "../../config";
import { ModelLoadError } from "../../errors";
import { log } from "../../log";
import type { Architecture, Built } from "./architecture";
import { bert, roberta } from "./bert";
import { deberta } from "./deberta";
import { distilbert } from "./distilbert";
import { gemma3 } from "./gemma3";
import { modernbert } from "./modernbert";
import { mpnet } from "./mpnet";
import { nomic } from "./nomic";
import { qwen3 } from "./qwen3";
import { Builder } from "./blocks";
import { ElemType, Graph } from "./graph";
import type { Quantization } from "./quantize";
import { safetensorsFiles, shardsOfIndex, Weights } from "../safetensors";

export const ARCHITECTURES: readonly Architecture[] = [bert, roberta, distilbert, mpnet, modernbert, nomic, deberta, qwen3, gemma3];

/** Bumped whenever a built graph changes for the same weights: older cached graphs are then rebuilt. */
export const BUILDER_VERSION = 3;


/** The architecture that builds a config, or null. */
export function architectureFor(config: Record<string, unknown>): Architecture | null {
  const names = Array.isArray(config.architectures) ? config.architectures.map(String) : [];
  if (names.length) return ARCHITECTURES.find((a) => names.some((n) => a.architectures.includes(n))) ?? null;
  return ARCHITECTURES.find((a) => a.modelTypes.includes(String(config.model_type ?? ""))) ?? null;
}

/** Every architecture name the builder knows, for messages and docs. */
export function knownArchitectures(): string[] {
  return ARCHITECTURES.flatMap((a) => a.architectures);
}

function describe(config: Record<string, unknown>): string {
  return Array.isArray(config.architectures) && config.architectures.length ? config.architectures.map(String).join(", ") : `model_type ${String(config.model_type ?? "unknown")}`;
}

/** The refusal for an architecture the builder does not know: what it is, what is known, how to export one. */
export function unknownArchitectureMessage(config: Record<string, unknown>, modelId: string): string {
  const dir = `${modelId.split("/").pop() || "model"}-onnx`;
  return (
    `the graph builder does not know ${describe(config)} (it builds ${knownArchitectures().join(", ")}). ` +
    `Export the model with \`optimum-cli export onnx --model ${modelId} ${dir}\` (pip install "optimum[onnxruntime]") and serve the folder: --model-id ./${dir}`
  );
}

/** Whether a repository listing has an ONNX export at the root or in onnx/. */
export function hasOnnxExport(files: readonly string[]): boolean {
  return files.some((f) => /^(onnx\/)?[^/]+\.onnx$/.test(f));
}

/** The dtypes a built graph comes in: float32, and int8 (Linear weights quantized at build time for MatMulNBits). */
export const BUILT_DTYPES: readonly Dtype[] = ["auto", "float32", "int8"];

/**
 * int8: 8-bit weights in blocks of 32 along the input dimension; activations quantized per block of each row. On
 * bge-small's shape blocks of 128 ran a little faster (0.99x float32's throughput against 0.94x) but a text's vector
 * then moved with its batch (1.2e-2); with blocks of 32 it did not move at all (bench/built-graph.ts).
 */
export const INT8: Quantization = { bits: 8, block: 32 };

/**
 * Whether `auto` builds a graph although the repository has an export: float32 only (an export's int8 / fp16 files are
 * what those dtypes ask for), an architecture measured at least as fast as its export (`preferred`) and a config it
 * builds, and nothing the export may carry that the folder lacks (a sentence-transformers Dense module's weights).
 */
function prefersBuilt(files: readonly string[], config: Record<string, unknown>, dtype: Dtype): boolean {
  if (dtype !== "auto" && dtype !== "float32") return false;
  const arch = architectureFor(config);
  if (!arch?.preferred?.(config)) return false;
  const dense = files.filter((f) => /^\d+_Dense[^/]*\/config\.json$/.test(f)).map((f) => f.replace(/config\.json$/, "model.safetensors"));
  return dense.every((f) => files.includes(f));
}

/**
 * Export or build, and why: `export` never builds; `build` always does (the weights must be there); `auto` builds
 * when the repository has safetensors weights and either no ONNX export or an architecture whose built graph is
 * preferred to its export (`config`, the repository's config.json, tells; without it an export is kept).
 */
export function chooseGraph(files: readonly string[], mode: GraphMode, dtype: Dtype = "auto", config: Record<string, unknown> | null = null): { build: boolean; reason: string } {
  const weights = safetensorsFiles(files) !== null;
  const exported = hasOnnxExport(files);
  let choice: { build: boolean; reason: string };
  if (mode === "export") choice = { build: false, reason: "--graph export" };
  else if (mode === "build") {
    if (!weights) throw new ModelLoadError("--graph build needs model.safetensors (or model.safetensors.index.json and its shards); the repository has none");
    choice = { build: true, reason: "--graph build" };
  } else if (exported && weights && config && prefersBuilt(files, config, dtype)) {
    choice = { build: true, reason: `built from config.json and safetensors in preference to the repository's ONNX export: as fast and as exact for ${describe(config)} (--graph auto; --graph export runs the export)` };
  } else if (exported) choice = { build: false, reason: "the repository's ONNX export (--graph auto)" };
  else if (!weights) choice = { build: false, reason: "no ONNX export and no safetensors weights" };
  else choice = { build: true, reason: "no ONNX export in the repository (--graph auto): built from config.json and safetensors" };
  if (choice.build && !BUILT_DTYPES.includes(dtype)) {
    throw new ModelLoadError(
      `--dtype ${dtype}: built graphs are float32 or int8 (${choice.reason}); serve it with --dtype float32 or int8${exported ? ", or the repository's export (--graph export)" : ", or export the dtype with optimum-cli and serve that folder"}`,
    );
  }
  return choice;
}

/** Files a hub download needs for a built graph: the safetensors and, when sharded, the index (its shards follow). */
export function weightFilesToFetch(files: readonly string[]): string[] {
  const found = safetensorsFiles(files);
  if (!found) return [];
  return found.index ? [found.index] : found.shards;
}

/**
 * The folder a built graph is cached in: named by the weights' identity (real folder path, size and modification
 * time of config.json and every weight file), the dtype and the builder version, so a changed model or a new builder
 * builds again. Hub snapshots are named by commit, so their identity is stable.
 */
export function graphCacheDir(root: string, dir: string, files: readonly string[], dtype: string): string {
  const found = safetensorsFiles(files);
  const weightFiles = found?.index ? [found.index, ...shardsOfIndex(JSON.parse(readFileSync(join(dir, found.index), "utf8"))).sort()] : found?.shards ?? [];
  const hash = createHash("sha256").update(realpathSync(dir));
  for (const f of [configFileIn(files) ?? "config.json", ...weightFiles]) {
    const st = statSync(join(dir, f));
    hash.update(`|${f}:${st.size}:${Math.round(st.mtimeMs)}`);
  }
  hash.update(`|${dtype}|${BUILDER_VERSION}`);
  return join(root, "infinity-graphs", hash.digest("hex").slice(0, 24));
}

/** Which graph a model runs, and why: what the layout, the load log and GET /models read. */
export interface GraphChoice {
  source: "export" | "build";
  reason: string;
  /** The built graph's absolute path (its weights in <path>.data); null for an export, which the layout chooses. */
  path: string | null;
  /** The built graph's dtype; null for an export. */
  dtype: "float32" | "int8" | null;
  /** Whether the built graph came from the cache; false for an export. */
  cached: boolean;
  /** Time to build (or find) the graph; 0 for an export. */
  seconds: number;
  /** The config.json architecture it was built as; null for an export. */
  architecture: string | null;
}

/** Where a model's files keep config.json: at the root, else in onnx/ (self-contained export folders); null: nowhere. */
export function configFileIn(files: readonly string[]): string | null {
  return ["config.json", "onnx/config.json"].find((f) => files.includes(f)) ?? null;
}

function readConfig(path: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new ModelLoadError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
}

/** The graph a model folder runs under a --graph mode: the export (left to the layout), or built now / from the cache. */
export function prepareGraph(dir: string, files: readonly string[], modelId: string, mode: GraphMode, dtype: Dtype, cacheRoot: string): GraphChoice {
  const configFile = configFileIn(files);
  const config = mode !== "export" && configFile ? readConfig(join(dir, configFile)) : null;
  const { build, reason } = chooseGraph(files, mode, dtype, config);
  if (!build) return { source: "export", reason, path: null, dtype: null, cached: false, seconds: 0, architecture: null };
  if (!config) throw new ModelLoadError(`${dir}: missing config.json, which a built graph is built from`);
  const built = builtGraph(dir, files, config, cacheRoot, modelId, dtype === "int8" ? "int8" : "float32");
  return { source: "build", reason, path: built.path, dtype: built.dtype, cached: built.cached, seconds: built.ms / 1000, architecture: built.architecture };
}

export interface BuiltGraph {
  /** The graph file (its weights in <path>.data beside it). */
  path: string;
  dtype: "float32" | "int8";
  /** Whether it came from the cache. */
  cached: boolean;
  ms: number;
  architecture: string;
}

/**
 * The built graph of a model folder, from the cache or built now into it. Built into a temporary folder and renamed,
 * so a crash or a second process never leaves a half-written graph where the cache is read.
 */
export function builtGraph(
  dir: string, files: readonly string[], config: Record<string, unknown>, cacheRoot: string, modelId: string, dtype: "float32" | "int8" = "float32",
): BuiltGraph {
  const started = performance.now();
  const arch = architectureFor(config);
  if (!arch) throw new ModelLoadError(unknownArchitectureMessage(config, modelId));
  const folder = graphCacheDir(cacheRoot, dir, files, dtype);
  const path = join(folder, "model.onnx");
  if (existsSync(path)) return { path, dtype, cached: true, ms: performance.now() - started, architecture: describe(config) };
  const tmp = `${folder}.tmp-${process.pid}-${Date.now()}`;
  mkdirSync(tmp, { recursive: true });
  try {
    writeGraph(arch, dir, files, config, join(tmp, "model.onnx"), dtype === "int8" ? INT8 : null);
    try {
      renameSync(tmp, folder);
    } catch (e) {
      // Another process built it first: use theirs.
      if (!existsSync(path)) throw e;
      rmSync(tmp, { recursive: true, force: true });
    }
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  const ms = performance.now() - started;
  log.info("graph built from config.json and safetensors", { architecture: describe(config), dtype, folder, ms: Math.round(ms) });
  return { path, dtype, cached: false, ms, architecture: describe(config) };
}

/** Writes the graph of one architecture and its weights (model.onnx + model.onnx.data). */
export function writeGraph(arch: Architecture, dir: string, files: readonly string[], config: Record<string, unknown>, path: string, quant: Quantization | null = null): void {
  const weights = new Weights(dir, files);
  const g = new Graph(`${path}.data`);
  try {
    const b = new Builder(g, weights, config, quant);
    const built: Built = arch.build(b);
    const hidden = Number(config.hidden_size ?? config.d_model ?? config.dim);
    g.output(built.hidden, "last_hidden_state", ElemType.float, ["batch", "sequence", Number.isFinite(hidden) ? hidden : "hidden"]);
    if (built.contextual) g.output(built.contextual, "contextual", ElemType.float, ["batch", "sequence", "dim"]);
    if (built.logits) g.output(built.logits, "logits", ElemType.float, built.tokenLogits ? ["batch", "sequence", "vocab"] : ["batch", "labels"]);
    g.write(path, `infinity graph builder ${BUILDER_VERSION}`);
  } catch (e) {
    g.abandon();
    throw e;
  }
}
