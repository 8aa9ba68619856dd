// The benchmark model: a bge-small-en-v1.5-shaped BertModel with seeded random weights, generated on demand from
// the committed skeleton (graph + manifest, bench/model-skeleton*/) into a git-ignored cache folder, laid out as a
// sentence-transformers repository (onnx/model.onnx + onnx/model.onnx_data, tokenizer, CLS pooling, Normalize) so
// that this server, transformers.js and plain onnxruntime all load the same files.
//
//   bun bench/model.ts [--int8] [--seed N] [--out DIR] [--force]
//
// Every tensor gets its own PRNG stream (seed mixed with the tensor's index), so any slice of the data file can be
// regenerated alone; the test checks the format on small tensors without writing the 130 MB file.
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createHash } from "node:crypto";

export const REPO_ROOT = resolve(import.meta.dir, "..");
export const SKELETONS = {
  fp32: join(REPO_ROOT, "bench", "model-skeleton"),
  int8: join(REPO_ROOT, "bench", "model-skeleton-int8"),
} as const;
export type Variant = keyof typeof SKELETONS;
/** bge-small-en-v1.5 uses exactly bert-base-uncased's WordPiece tokenizer (vocab 30522, lowercase). */
export const TOKENIZER_PATH = resolve(REPO_ROOT, "..", "shared", "tokenizers", "bert-base-uncased.tokenizer.json");
export const DEFAULT_OUT = { fp32: join(REPO_ROOT, ".cache", "bench-model"), int8: join(REPO_ROOT, ".cache", "bench-model-int8") } as const;
export const DEFAULT_SEED = 20240601;
export const MODEL_NAME = "bge-small-en-v1.5 architecture, random weights";

export type Kind = "weight" | "bias" | "layernorm_weight" | "int8_weight" | "uint8_weight";

export interface TensorSpec {
  name: string;
  offset: number;
  length: number;
  elements: number;
  shape: number[];
  dtype: "float32" | "int8" | "uint8";
  kind: Kind;
}

export interface FillRule {
  distribution: "normal" | "constant" | "uniform_int";
  mean?: number;
  std?: number;
  value?: number;
  low?: number;
  high?: number;
}

export interface Manifest {
  format: number;
  model: string;
  data_file: string;
  data_bytes: number;
  fill: Record<string, FillRule>;
  tensors: TensorSpec[];
}

const BYTES: Record<TensorSpec["dtype"], number> = { float32: 4, int8: 1, uint8: 1 };

export function skeletonPresent(variant: Variant = "fp32"): boolean {
  const dir = SKELETONS[variant];
  return existsSync(join(dir, "model.onnx")) && existsSync(join(dir, "manifest.json")) && existsSync(join(dir, "config.json"));
}

export function readManifest(skeletonDir: string): Manifest {
  return JSON.parse(readFileSync(join(skeletonDir, "manifest.json"), "utf8")) as Manifest;
}

/** The manifest's tensors must tile the data file exactly: contiguous, in order, sizes matching shapes and dtypes. */
export function checkManifest(m: Manifest): void {
  let at = 0;
  for (const t of m.tensors) {
    if (t.offset !== at) throw new Error(`manifest: ${t.name} starts at ${t.offset}, expected ${at}`);
    const elements = t.shape.reduce((a, b) => a * b, 1);
    if (elements !== t.elements) throw new Error(`manifest: ${t.name} shape ${t.shape} has ${elements} elements, listed ${t.elements}`);
    const bytes = BYTES[t.dtype];
    if (bytes === undefined) throw new Error(`manifest: ${t.name} has unsupported dtype ${t.dtype}`);
    if (t.length !== elements * bytes) throw new Error(`manifest: ${t.name} is ${t.length} bytes, expected ${elements * bytes}`);
    if (!m.fill[t.kind]) throw new Error(`manifest: no fill rule for kind ${t.kind} (${t.name})`);
    at += t.length;
  }
  if (at !== m.data_bytes) throw new Error(`manifest: tensors cover ${at} bytes, data_bytes says ${m.data_bytes}`);
}

/** splitmix32-style mixer: one well-spread 32-bit state per (seed, tensor index). */
function mix(x: number): number {
  x = (x + 0x9e3779b9) | 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** sfc32: small, fast, good enough statistically; returns uniform 32-bit unsigned integers. */
export function prng(seed: number, stream: number): () => number {
  let a = mix(seed ^ 0x6a09e667);
  let b = mix(a ^ stream);
  let c = mix(b + 0x3c6ef372);
  let d = mix(c ^ (stream * 0x9e3779b1));
  const next = () => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return t >>> 0;
  };
  for (let i = 0; i < 12; i++) next();
  return next;
}

/** Uniform floats in [0, 1) from `prng` (the benchmark scripts' synthetic inputs). */
export function uniform(seed: number, stream = 0): () => number {
  const next = prng(seed, stream);
  return () => next() / 2 ** 32;
}

/** Fills `out` (exactly t.length bytes) with tensor `index` of the manifest for this seed. */
export function fillTensor(t: TensorSpec, index: number, rule: FillRule, seed: number, out: Uint8Array): void {
  if (out.byteLength !== t.length) throw new Error(`fillTensor: buffer is ${out.byteLength} bytes, ${t.name} needs ${t.length}`);
  if (rule.distribution === "constant") {
    if (t.dtype !== "float32") throw new Error(`constant fill for ${t.dtype} is not supported`);
    new Float32Array(out.buffer, out.byteOffset, t.elements).fill(rule.value ?? 0);
    return;
  }
  const next = prng(seed, index + 1);
  if (rule.distribution === "uniform_int") {
    const low = rule.low ?? 0;
    const span = (rule.high ?? 255) - low + 1;
    const view = t.dtype === "int8" ? new Int8Array(out.buffer, out.byteOffset, t.elements) : out;
    for (let i = 0; i < t.elements; i++) view[i] = low + (next() % span);
    return;
  }
  if (rule.distribution !== "normal" || t.dtype !== "float32") throw new Error(`unsupported fill ${rule.distribution} for ${t.dtype}`);
  // Box-Muller, two normals per pair of uniforms; uniforms in (0, 1].
  const f = new Float32Array(out.buffer, out.byteOffset, t.elements);
  const mean = rule.mean ?? 0;
  const std = rule.std ?? 1;
  const scale = 1 / 4294967296;
  for (let i = 0; i < t.elements; i += 2) {
    const u1 = (next() + 1) * scale;
    const u2 = next() * scale;
    const r = Math.sqrt(-2 * Math.log(u1)) * std;
    const th = 2 * Math.PI * u2;
    f[i] = mean + r * Math.cos(th);
    if (i + 1 < t.elements) f[i + 1] = mean + r * Math.sin(th);
  }
}

/** A float32-aligned buffer for one tensor's bytes. */
export function tensorBuffer(t: TensorSpec): Uint8Array {
  return new Uint8Array(new ArrayBuffer(Math.ceil(t.length / 4) * 4), 0, t.length);
}

/** Writes the whole data file, tensor by tensor. */
export function writeData(m: Manifest, seed: number, path: string): void {
  checkManifest(m);
  const fd = openSync(path, "w");
  try {
    let at = 0;
    m.tensors.forEach((t, i) => {
      const buf = tensorBuffer(t);
      fillTensor(t, i, m.fill[t.kind]!, seed, buf);
      let done = 0;
      while (done < buf.length) done += writeSync(fd, buf, done, buf.length - done, at + done);
      at += buf.length;
    });
  } finally {
    closeSync(fd);
  }
}

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** sentence-transformers files that make the folder be served like BAAI/bge-small-en-v1.5 (CLS + Normalize). */
function writeRepoFiles(dir: string, skeletonDir: string): void {
  copyFileSync(join(skeletonDir, "config.json"), join(dir, "config.json"));
  copyFileSync(TOKENIZER_PATH, join(dir, "tokenizer.json"));
  const json = (file: string, v: unknown) => {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), JSON.stringify(v, null, 2) + "\n");
  };
  json("tokenizer_config.json", {
    tokenizer_class: "BertTokenizer",
    model_max_length: 512,
    do_lower_case: true,
    clean_up_tokenization_spaces: true,
    strip_accents: null,
    tokenize_chinese_chars: true,
    cls_token: "[CLS]",
    sep_token: "[SEP]",
    pad_token: "[PAD]",
    unk_token: "[UNK]",
    mask_token: "[MASK]",
  });
  json("special_tokens_map.json", {
    cls_token: "[CLS]", sep_token: "[SEP]", pad_token: "[PAD]", unk_token: "[UNK]", mask_token: "[MASK]",
  });
  json("sentence_bert_config.json", { max_seq_length: 512, do_lower_case: true });
  json("modules.json", [
    { idx: 0, name: "0", path: "", type: "sentence_transformers.models.Transformer" },
    { idx: 1, name: "1", path: "1_Pooling", type: "sentence_transformers.models.Pooling" },
    { idx: 2, name: "2", path: "2_Normalize", type: "sentence_transformers.models.Normalize" },
  ]);
  json("1_Pooling/config.json", {
    word_embedding_dimension: 384,
    pooling_mode_cls_token: true,
    pooling_mode_mean_tokens: false,
    pooling_mode_max_tokens: false,
    pooling_mode_mean_sqrt_len_tokens: false,
  });
  mkdirSync(join(dir, "2_Normalize"), { recursive: true });
}

export interface EnsureOptions {
  variant?: Variant;
  seed?: number;
  out?: string;
  force?: boolean;
  log?: (msg: string) => void;
}

/**
 * Generates the model folder unless an identical one (same skeleton, tokenizer and seed) is already there.
 * Returns the folder. Writes into a temporary sibling and renames it, so an interrupted run leaves no half model.
 */
export function ensureBenchModel(opts: EnsureOptions = {}): string {
  const variant = opts.variant ?? "fp32";
  const seed = opts.seed ?? DEFAULT_SEED;
  const out = resolve(opts.out ?? DEFAULT_OUT[variant]);
  const log = opts.log ?? (() => {});
  const skeleton = SKELETONS[variant];
  if (!skeletonPresent(variant)) {
    throw new Error(`benchmark skeleton missing: ${skeleton} (model.onnx, manifest.json, config.json); it is committed on the fixtures branch`);
  }
  if (!existsSync(TOKENIZER_PATH)) {
    throw new Error(`tokenizer missing: ${TOKENIZER_PATH} (bert-base-uncased tokenizer.json, expected in ../shared/tokenizers relative to the repository root)`);
  }
  const stamp = {
    seed,
    variant,
    model: sha256(join(skeleton, "model.onnx")),
    manifest: sha256(join(skeleton, "manifest.json")),
    tokenizer: sha256(TOKENIZER_PATH),
    generator: 1,
  };
  const stampPath = join(out, "bench-model.json");
  if (!opts.force && existsSync(stampPath)) {
    try {
      if (JSON.stringify(JSON.parse(readFileSync(stampPath, "utf8"))) === JSON.stringify(stamp)) return out;
    } catch { /* regenerate */ }
  }
  const manifest = readManifest(skeleton);
  checkManifest(manifest);
  const tmp = `${out}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(join(tmp, "onnx"), { recursive: true });
  const t0 = performance.now();
  log(`generating ${variant} benchmark model (seed ${seed}, ${(manifest.data_bytes / 2 ** 20).toFixed(0)} MiB) into ${out}`);
  copyFileSync(join(skeleton, "model.onnx"), join(tmp, "onnx", "model.onnx"));
  writeData(manifest, seed, join(tmp, "onnx", manifest.data_file));
  writeRepoFiles(tmp, skeleton);
  writeFileSync(join(tmp, "bench-model.json"), JSON.stringify(stamp, null, 2) + "\n");
  rmSync(out, { recursive: true, force: true });
  mkdirSync(dirname(out), { recursive: true });
  renameSync(tmp, out);
  log(`generated in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return out;
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const val = (flag: string) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  try {
    const dir = ensureBenchModel({
      variant: args.includes("--int8") ? "int8" : "fp32",
      seed: val("--seed") !== undefined ? Number(val("--seed")) : undefined,
      out: val("--out"),
      force: args.includes("--force"),
      log: (m) => console.error(m),
    });
    console.log(dir);
  } catch (e) {
    console.error(`bench/model.ts: ${(e as Error).message}`);
    process.exit(1);
  }
}
