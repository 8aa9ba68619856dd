// Reads safetensors weights: an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape
// and byte range, then the raw little-endian data. A model's weights (one file, or the shards model.safetensors.index.json
// names) are mapped, not read, and a tensor is converted to float32 only when the graph builder asks for it
// (build/); the small files of sentence-transformers modules (Dense heads) are read whole.
import { closeSync, existsSync, openSync, readFileSync, readSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ModelLoadError } from "../errors";
import { bf16ToFloat, halfToFloat } from "./half";

export interface WeightTensor {
  shape: number[];
  data: Float32Array;
}

export interface TensorInfo {
  dtype: string;
  shape: number[];
  file: string;
  /** Byte range inside the file. */
  begin: number;
  end: number;
}

/** The weight files of a repository listing: the index's shards, else model.safetensors; null when it has neither. */
export function safetensorsFiles(files: readonly string[]): { index: string | null; shards: string[] } | null {
  if (files.includes("model.safetensors.index.json")) return { index: "model.safetensors.index.json", shards: [] };
  if (files.includes("model.safetensors")) return { index: null, shards: ["model.safetensors"] };
  return null;
}

/** Shard names of an index file (weight_map values, each once). */
export function shardsOfIndex(indexJson: unknown): string[] {
  const map = (indexJson as { weight_map?: Record<string, unknown> } | null)?.weight_map;
  if (!map || typeof map !== "object") throw new ModelLoadError("model.safetensors.index.json has no weight_map");
  return [...new Set(Object.values(map).map(String))];
}

const BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2, F64: 8, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1 };

/** The header of one safetensors file: tensor name -> dtype, shape and byte range. */
export function readHeader(path: string): Map<string, TensorInfo> {
  const fd = openSync(path, "r");
  try {
    const head = Buffer.alloc(8);
    if (readSync(fd, head, 0, 8, 0) !== 8) throw new ModelLoadError(`${path} is not a safetensors file (shorter than 8 bytes)`);
    const length = Number(head.readBigUInt64LE(0));
    if (length <= 0 || length > 100_000_000) throw new ModelLoadError(`${path} is not a safetensors file (header length ${length})`);
    const json = Buffer.alloc(length);
    readSync(fd, json, 0, length, 8);
    let header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
    try {
      header = JSON.parse(json.toString("utf8"));
    } catch (e) {
      throw new ModelLoadError(`${path}: unreadable safetensors header (${(e as Error).message})`);
    }
    const out = new Map<string, TensorInfo>();
    for (const [name, t] of Object.entries(header)) {
      if (name === "__metadata__") continue;
      const [begin, end] = t.data_offsets;
      const count = t.shape.reduce((a, b) => a * b, 1);
      if (BYTES[t.dtype] === undefined) throw new ModelLoadError(`${path}: tensor ${name} has dtype ${t.dtype}, which this server does not read`);
      if (end - begin !== count * BYTES[t.dtype]!) throw new ModelLoadError(`${path}: tensor ${name} has ${end - begin} bytes for shape [${t.shape}] ${t.dtype}`);
      out.set(name, { dtype: t.dtype, shape: t.shape, file: path, begin: 8 + length + begin, end: 8 + length + end });
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

/** Raw little-endian tensor bytes (F32, F16 or BF16) as float32; a copy, since file offsets need not be aligned. */
export function decodeFloat(bytes: Uint8Array, dtype: string, what: string): Float32Array {
  const raw = new Uint8Array(bytes).buffer;
  if (dtype === "F32") return new Float32Array(raw);
  if (dtype === "F16") return halfToFloat(new Uint16Array(raw));
  if (dtype === "BF16") return bf16ToFloat(new Uint16Array(raw));
  throw new ModelLoadError(`${what} is ${dtype}; only F32, F16 and BF16 weights are read`);
}

/** Every tensor of one safetensors file as float32: the small weight files of sentence-transformers modules (Dense). */
export function readSafetensors(path: string): Map<string, WeightTensor> {
  const bytes = readFileSync(path);
  const out = new Map<string, WeightTensor>();
  for (const [name, t] of readHeader(path)) out.set(name, { shape: t.shape, data: decodeFloat(bytes.subarray(t.begin, t.end), t.dtype, `${path}: tensor ${name}`) });
  return out;
}

/** The weights of a model folder, by name; names are found with or without the architecture's prefix. */
export class Weights {
  private readonly maps = new Map<string, Uint8Array>();
  readonly tensors = new Map<string, TensorInfo>();
  private readonly used = new Set<string>();

  constructor(dir: string, files: readonly string[]) {
    const found = safetensorsFiles(files);
    if (!found) throw new ModelLoadError(`${dir} has no model.safetensors (or model.safetensors.index.json): nothing to build a graph from`);
    const shards = found.index ? shardsOfIndex(JSON.parse(readFileSync(join(dir, found.index), "utf8"))) : found.shards;
    for (const shard of shards) {
      const path = join(dir, shard);
      if (!existsSync(path)) throw new ModelLoadError(`${dir}: weight shard ${shard} is missing`);
      for (const [name, info] of readHeader(path)) this.tensors.set(name, info);
    }
  }

  /** The first of `names` that exists, or null. */
  find(...names: string[]): string | null {
    for (const n of names) if (this.tensors.has(n)) return n;
    return null;
  }

  has(name: string): boolean {
    return this.tensors.has(name);
  }

  shape(name: string): number[] {
    return this.info(name).shape;
  }

  private info(name: string): TensorInfo {
    const t = this.tensors.get(name);
    if (!t) throw new ModelLoadError(`the weights have no tensor ${name}`);
    return t;
  }

  /** A tensor as float32 (F32, F16 and BF16 weights). */
  float(name: string): Float32Array {
    const t = this.info(name);
    this.used.add(name);
    let map = this.maps.get(t.file);
    if (!map) {
      map = Bun.mmap(t.file, { shared: false });
      this.maps.set(t.file, map);
    }
    return decodeFloat(map.subarray(t.begin, t.end), t.dtype, `tensor ${name}`);
  }

  /** The names no part of the graph read (for the load log: a head the builder does not know shows here). */
  unused(): string[] {
    return [...this.tensors.keys()].filter((n) => !this.used.has(n));
  }
}

/** Writes a safetensors file from raw little-endian tensor bytes (the tests' and the bench's models). */
export function writeSafetensors(path: string, tensors: Record<string, { dtype: string; shape: number[]; bytes: Uint8Array }>): void {
  const header: Record<string, unknown> = {};
  let at = 0;
  for (const [name, t] of Object.entries(tensors)) {
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [at, at + t.bytes.byteLength] };
    at += t.bytes.byteLength;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - ((json.length + 8) % 8)) % 8);
  const head = Buffer.alloc(8);
  head.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  writeFileSync(path, Buffer.concat([head, Buffer.from(json), ...Object.values(tensors).map((t) => Buffer.from(t.bytes))]));
}
