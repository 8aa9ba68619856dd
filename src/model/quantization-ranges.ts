// A model's int8/uint8 calibration ranges (--quantization-ranges): per-dimension minimum and maximum of calibration
// embeddings, as sentence-transformers' quantize_embeddings(..., ranges=...) takes them. Read from a local file at
// load, never downloaded: JSON {"min": [...], "max": [...]} (float32 values) or a NumPy .npy of shape (2, dim),
// float32 ('<f4') or float64 ('<f8'): row 0 the minimums, row 1 the maximums.
import { readFileSync } from "node:fs";
import { ModelLoadError } from "../errors";

/** Per-dimension calibration bounds; float32: the bounds are float32 values and numpy's arithmetic is float32. */
export interface QuantizationRanges {
  min: Float64Array;
  max: Float64Array;
  float32: boolean;
}

function fail(path: string, why: string): never {
  throw new ModelLoadError(`--quantization-ranges ${path}: ${why}`);
}

/** The (2, dim) array of a .npy file: its dtype and both rows. */
function readNpy(path: string, bytes: Uint8Array): QuantizationRanges {
  const magic = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
  if (bytes.length < 10 || magic.some((b, i) => bytes[i] !== b)) fail(path, "not a .npy file (no \\x93NUMPY magic)");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const major = bytes[6]!;
  const headerLength = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true);
  const headerStart = major === 1 ? 10 : 12;
  const header = new TextDecoder().decode(bytes.subarray(headerStart, headerStart + headerLength));
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*(True|False)/.exec(header)?.[1] === "True";
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1]?.split(",").map((s) => s.trim()).filter(Boolean).map(Number);
  if (descr !== "<f4" && descr !== "<f8") fail(path, `dtype ${descr ?? "?"} is not supported (float32 '<f4' or float64 '<f8')`);
  if (!shape || shape.length !== 2 || shape[0] !== 2 || !(shape[1]! > 0)) fail(path, `shape (${shape?.join(", ") ?? "?"}) is not (2, dim): row 0 the minimums, row 1 the maximums`);
  const dim = shape[1]!;
  const size = descr === "<f4" ? 4 : 8;
  const dataStart = headerStart + headerLength;
  if (bytes.length - dataStart !== 2 * dim * size) fail(path, `expected ${2 * dim * size} data bytes, found ${bytes.length - dataStart}`);
  const at = (row: number, col: number) => {
    const k = fortran ? col * 2 + row : row * dim + col;
    return size === 4 ? view.getFloat32(dataStart + k * 4, true) : view.getFloat64(dataStart + k * 8, true);
  };
  const min = new Float64Array(dim);
  const max = new Float64Array(dim);
  for (let i = 0; i < dim; i++) {
    min[i] = at(0, i);
    max[i] = at(1, i);
  }
  return { min, max, float32: size === 4 };
}

function readJson(path: string, text: string): QuantizationRanges {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    fail(path, `not valid JSON (${(e as Error).message})`);
  }
  const o = parsed as { min?: unknown; max?: unknown };
  const list = (v: unknown, key: string) => {
    if (!Array.isArray(v) || v.length === 0 || v.some((x) => typeof x !== "number")) fail(path, `"${key}" must be a non-empty list of numbers`);
    return Float64Array.from(v as number[], Math.fround);
  };
  if (typeof o !== "object" || o === null) fail(path, 'expected {"min": [...], "max": [...]}');
  const min = list(o.min, "min");
  const max = list(o.max, "max");
  if (min.length !== max.length) fail(path, `"min" has ${min.length} values and "max" ${max.length}`);
  return { min, max, float32: true };
}

/** Reads and checks a ranges file: finite values, max >= min in every dimension. */
export function readQuantizationRanges(path: string): QuantizationRanges {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    fail(path, `cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  const ranges = path.toLowerCase().endsWith(".npy") ? readNpy(path, bytes) : readJson(path, new TextDecoder().decode(bytes));
  for (let i = 0; i < ranges.min.length; i++) {
    const lo = ranges.min[i]!;
    const hi = ranges.max[i]!;
    if (!Number.isFinite(lo) || !Number.isFinite(hi)) fail(path, `dimension ${i} has a non-finite bound`);
    if (hi < lo) fail(path, `dimension ${i} has max ${hi} below min ${lo}`);
  }
  return ranges;
}
