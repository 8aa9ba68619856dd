// Turns a model id into a local folder: a folder on disk is used as it is; a hub id is downloaded into a cache laid
// out like huggingface_hub's (models--org--name/snapshots/<commit>/...), so Python tools and this server share it.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync, rmSync } from "node:fs";
import { dirname, join, posix, relative, resolve as resolvePath } from "node:path";
import { homedir } from "node:os";
import type { Dtype, GraphMode } from "../config";
import { ModelLoadError } from "../errors";
import { log } from "../log";
import { externalDataFiles, METADATA_FILES, onnxFilesFor } from "./repo-files";
import { PICKLED_M3_HEADS } from "./hybrid-layout";
import { onnxExternalDataFiles } from "./onnx-graph";
import { chooseGraph, configFileIn, weightFilesToFetch } from "./build";
import { shardsOfIndex } from "./safetensors";
import { copyGcsFolder, gcsSettingsFromEnv, parseGcsUri, type GcsSettings } from "./gcs";

export interface HubSettings {
  /** Hub base URL (HF_ENDPOINT), e.g. https://huggingface.co. */
  endpoint: string;
  token: string | null;
  offline: boolean;
  cacheDir: string;
  /** Cloud Storage (gs:// model ids); from the environment when absent. */
  gcs?: GcsSettings;
  /** Progress output; a TTY gets a redrawn bar, anything else a line per file. */
  progress: (msg: string, done: boolean) => void;
}

export interface ResolvedModel {
  dir: string;
  /** Every file path in the repository (or folder), relative, with forward slashes. */
  files: string[];
  source: "local" | "hub" | "cache";
}

/** Reads the hub settings from the environment once, at the edge (cli.ts). */
export function hubSettingsFromEnv(env: Record<string, string | undefined>, cacheDirOption: string | null): HubSettings {
  const hfHome = env.HF_HOME ?? join(env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "huggingface");
  const cacheDir = cacheDirOption ?? env.INFINITY_HOME ?? env.HF_HUB_CACHE ?? join(hfHome, "hub");
  const truthy = (v: string | undefined) => !!v && ["1", "true", "yes", "on"].includes(v.toLowerCase());
  const tty = process.stderr.isTTY;
  return {
    endpoint: (env.HF_ENDPOINT ?? "https://huggingface.co").replace(/\/+$/, ""),
    token: env.HF_TOKEN ?? env.HUGGING_FACE_HUB_TOKEN ?? null,
    offline: truthy(env.HF_HUB_OFFLINE) || truthy(env.TRANSFORMERS_OFFLINE),
    cacheDir,
    gcs: gcsSettingsFromEnv(env),
    progress: (msg, done) => {
      if (tty) process.stderr.write(`\r\x1b[2K${msg}${done ? "\n" : ""}`);
      else if (done) process.stderr.write(msg + "\n");
    },
  };
}

/** Every file below a folder, as repository paths (forward slashes), sorted. */
export function listFolder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      if (entry.name.startsWith(".")) continue;
      const full = join(d, entry.name);
      // Snapshot folders of huggingface_hub hold symlinks to blobs: follow them.
      const isDir = entry.isDirectory() || (entry.isSymbolicLink() && statSync(full).isDirectory());
      if (isDir) walk(full);
      else out.push(relative(dir, full).split("\\").join("/"));
    }
  };
  walk(dir);
  return out.sort();
}

export function looksLikeLocalPath(modelId: string): boolean {
  return modelId.startsWith("/") || modelId.startsWith("./") || modelId.startsWith("../") || modelId.startsWith("~") || existsSync(modelId);
}

/**
 * Which repository files a model needs: metadata, module configs, and the ONNX file for the dtype and its data, or,
 * when the graph is built (--graph), the safetensors weights (a sharded model's index; its shards follow it).
 */
export function filesToFetch(repoFiles: readonly string[], dtype: Dtype, modelId?: string, graph: GraphMode = "auto", config: Record<string, unknown> | null = null): string[] {
  const wanted = new Set<string>();
  const have = new Set(repoFiles);
  // Metadata at the root, else the copy inside onnx/ (self-contained export folders).
  for (const f of METADATA_FILES) {
    if (have.has(f)) wanted.add(f);
    else if (have.has(`onnx/${f}`)) wanted.add(`onnx/${f}`);
  }
  for (const f of repoFiles) {
    // Pooling / Normalize / Dense module configs of sentence-transformers live in numbered folders; Dense
    // weights are applied by the server when the export stops at the token embeddings.
    if (/^\d+_[^/]+\/config\.json$/.test(f) || /^[^/]+\/sentence_bert_config\.json$/.test(f) || /^\d+_Dense[^/]*\/model\.safetensors$/.test(f)) wanted.add(f);
    // A sentence-transformers Router's modules sit in <route>_<n>_<Module>/ folders: their configs and tokenizers,
    // and a SparseStaticEmbedding's weights (inference-free sparse queries); the MLM's weights stay on the hub.
    if (/^[a-z]+_\d+_[^/]+\/(config|tokenizer|tokenizer_config|special_tokens_map)\.json$/.test(f) || /^[a-z]+_\d+_SparseStaticEmbedding\/model\.safetensors$/.test(f)) wanted.add(f);
  }
  // BAAI/bge-m3's sparse and ColBERT heads (torch.save'd nn.Linear state_dicts, a few MB) beside its encoder export.
  for (const f of PICKLED_M3_HEADS) if (have.has(f)) wanted.add(f);
  if (chooseGraph(repoFiles, graph, dtype, config).build) {
    for (const f of weightFilesToFetch(repoFiles)) wanted.add(f);
    return [...wanted];
  }
  for (const file of onnxFilesFor(repoFiles, dtype, modelId)) {
    wanted.add(file);
    for (const f of externalDataFiles(file, repoFiles)) wanted.add(f);
  }
  return [...wanted];
}

/**
 * The config.json among a folder's `files`, or null when there is none or it is not a JSON object (the load that
 * reads it later says what is wrong): what auto's choice of graph reads.
 */
function configOf(dir: string, files: readonly string[]): Record<string, unknown> | null {
  const file = configFileIn(files);
  if (!file) return null;
  try {
    const v = JSON.parse(readFileSync(join(dir, file), "utf8"));
    return v && typeof v === "object" && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

function repoFolder(cacheDir: string, modelId: string): string {
  return join(cacheDir, `models--${modelId.replace(/\//g, "--")}`);
}

async function hubFetch(settings: HubSettings, url: string): Promise<Response> {
  const headers: Record<string, string> = { "user-agent": "infinity-bun/0.1" };
  if (settings.token) headers.authorization = `Bearer ${settings.token}`;
  let res: Response;
  try {
    res = await fetch(url, { headers, redirect: "follow" });
  } catch (e) {
    throw new ModelLoadError(
      `cannot reach the hub at ${settings.endpoint} (${(e as Error).message}); set HF_HUB_OFFLINE=1 to use the cache only, or pass a local folder`,
    );
  }
  if (res.status === 401 || res.status === 403) throw new ModelLoadError(`hub refused ${url} (${res.status}): gated or private model? set HF_TOKEN`);
  if (res.status === 404) throw new ModelLoadError(`not found on the hub: ${url}`);
  if (!res.ok) throw new ModelLoadError(`hub answered ${res.status} for ${url}`);
  return res;
}

async function download(settings: HubSettings, url: string, dest: string, label: string): Promise<void> {
  const res = await hubFetch(settings, url);
  mkdirSync(dirname(dest), { recursive: true });
  const total = Number(res.headers.get("content-length") ?? 0);
  const tmp = `${dest}.incomplete-${process.pid}`;
  const writer = Bun.file(tmp).writer();
  let done = 0;
  let lastDraw = 0;
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      writer.write(chunk);
      done += chunk.byteLength;
      const now = Date.now();
      if (now - lastDraw > 200) {
        lastDraw = now;
        settings.progress(progressLine(label, done, total), false);
      }
    }
    await writer.end();
  } catch (e) {
    rmSync(tmp, { force: true });
    throw new ModelLoadError(`download of ${url} broke off: ${(e as Error).message}`);
  }
  if (total && done !== total) {
    rmSync(tmp, { force: true });
    throw new ModelLoadError(`download of ${url} is incomplete: ${done} of ${total} bytes`);
  }
  renameSync(tmp, dest);
  settings.progress(progressLine(label, done, total || done), true);
}

export function progressLine(label: string, done: number, total: number): string {
  const mb = (n: number) => (n / 1048576).toFixed(1);
  if (!total) return `downloading ${label} ${mb(done)} MB`;
  const frac = Math.min(1, done / total);
  const width = 24;
  const filled = Math.round(frac * width);
  return `downloading ${label} [${"#".repeat(filled)}${"-".repeat(width - filled)}] ${(frac * 100).toFixed(0)}% ${mb(done)}/${mb(total)} MB`;
}

/** Resolves a model id to a folder, downloading what it needs from the hub into the cache. */
export async function resolveModel(modelId: string, revision: string, dtype: Dtype, settings: HubSettings, graph: GraphMode = "auto"): Promise<ResolvedModel> {
  if (modelId.startsWith("gs://")) {
    // A folder in Cloud Storage (Vertex AI's AIP_STORAGE_URI): copied into the cache once, then read as a folder.
    const { bucket, prefix } = parseGcsUri(modelId);
    const dir = await copyGcsFolder(modelId, join(settings.cacheDir, "gcs", bucket, prefix || "_bucket"), settings.gcs ?? gcsSettingsFromEnv({}));
    return { dir, files: listFolder(dir), source: "local" };
  }
  if (looksLikeLocalPath(modelId)) {
    const dir = resolvePath(modelId.startsWith("~") ? join(homedir(), modelId.slice(1)) : modelId);
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new ModelLoadError(`model folder not found: ${dir}`);
    return { dir, files: listFolder(dir), source: "local" };
  }
  if (!/^[\w.-]+(\/[\w.-]+)?$/.test(modelId)) {
    throw new ModelLoadError(`"${modelId}" is neither an existing folder nor a hub id (org/name)`);
  }
  const repo = repoFolder(settings.cacheDir, modelId);
  const refFile = join(repo, "refs", revision);

  // Offline, or a pinned commit already cached: serve from the cache without asking the hub.
  const cachedCommit = existsSync(refFile) ? readFileSync(refFile, "utf8").trim() : /^[0-9a-f]{40}$/.test(revision) ? revision : null;
  if (settings.offline) {
    if (!cachedCommit || !existsSync(join(repo, "snapshots", cachedCommit))) {
      throw new ModelLoadError(`HF_HUB_OFFLINE is set and ${modelId}@${revision} is not in the cache at ${settings.cacheDir}`);
    }
    const dir = join(repo, "snapshots", cachedCommit);
    const files = listFolder(dir);
    // A clear error if the cached snapshot lacks the dtype's file (or, to build, its weights).
    if (!chooseGraph(files, graph, dtype, configOf(dir, files)).build) onnxFilesFor(files, dtype, modelId);
    return { dir, files, source: "cache" };
  }

  const info = (await (await hubFetch(settings, `${settings.endpoint}/api/models/${modelId}/revision/${encodeURIComponent(revision)}`)).json()) as {
    sha?: string;
    siblings?: { rfilename: string }[];
  };
  const commit = info.sha;
  const repoFiles = (info.siblings ?? []).map((s) => s.rfilename);
  if (!commit || repoFiles.length === 0) throw new ModelLoadError(`hub returned no file list for ${modelId}@${revision}`);
  const snapshot = join(repo, "snapshots", commit);
  const fetchFile = async (file: string) => {
    const dest = join(snapshot, file);
    if (existsSync(dest)) return;
    const url = `${settings.endpoint}/${modelId}/resolve/${commit}/${file.split("/").map(encodeURIComponent).join("/")}`;
    await download(settings, url, dest, `${modelId}/${file}`);
  };
  // config.json first: whether auto builds the graph (and so fetches the weights, not the export) depends on it.
  const configFile = configFileIn(repoFiles);
  if (configFile) await fetchFile(configFile);
  const needed = filesToFetch(repoFiles, dtype, modelId, graph, configOf(snapshot, repoFiles));
  for (const file of needed) await fetchFile(file);
  // A sharded model's shards are named by its index.
  for (const index of needed.filter((f) => f.endsWith(".safetensors.index.json"))) {
    const base = posix.dirname(index);
    for (const shard of shardsOfIndex(JSON.parse(readFileSync(join(snapshot, index), "utf8")))) {
      const file = posix.normalize(posix.join(base, shard));
      if (!repoFiles.includes(file)) throw new ModelLoadError(`${modelId}: ${index} names ${file}, which the repository does not have`);
      if (!needed.includes(file)) needed.push(file);
      await fetchFile(file);
    }
  }
  // External data files besides <file>.onnx_data are known only from the graph itself (BAAI/bge-m3's
  // onnx/Constant_7_attr__value): read what each downloaded ONNX file names and fetch those too.
  for (const onnx of needed.filter((f) => f.endsWith(".onnx"))) {
    for (const location of onnxExternalDataFiles(join(snapshot, onnx))) {
      const file = posix.normalize(posix.join(posix.dirname(onnx), location));
      if (!repoFiles.includes(file)) throw new ModelLoadError(`${modelId}: ${onnx} keeps tensors in ${file}, which the repository does not have`);
      if (!needed.includes(file)) needed.push(file);
      await fetchFile(file);
    }
  }
  mkdirSync(dirname(refFile), { recursive: true });
  writeFileSync(refFile, commit);
  log.info("model files ready", { model: modelId, revision, commit, files: needed.length });
  // The layout reads what the repository lists, but only downloaded files exist locally.
  return { dir: snapshot, files: listFolder(snapshot), source: "hub" };
}
