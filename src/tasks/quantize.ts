// Compact encodings of one embedding: int8/uint8 scalars and packed sign bits, as lists or base64 bytes.
//
// binary / ubinary follow sentence-transformers' quantize_embeddings: one bit per dimension, 1 when the component is
// positive, packed MSB first into bytes (numpy packbits; the last byte is zero-padded), ubinary as uint8 and
// binary = ubinary - 128 as int8.
// int8 / uint8 need no calibration data: each vector is scaled by its own largest absolute component, so that
// component maps to +-127 and nothing is clipped: int8 = round(x * 127 / max|x|), uint8 = int8 + 128. The scale
// differs per vector, so compare int8 vectors by cosine (or re-normalise them), not by raw dot product.
// With a model's calibration ranges (--quantization-ranges) int8 / uint8 are sentence-transformers'
// quantize_embeddings(..., ranges=...) instead: per dimension, step = (max - min) / 255 (1 where that is 0),
// uint8 = clip(floor((x - min) / step), 0, 255), int8 = uint8 - 128; in float32 arithmetic for float32 ranges, as
// numpy computes it, and float64 for float64 ranges.

import type { QuantizationRanges } from "../model/quantization-ranges";

export const VECTOR_TYPES = ["float", "int8", "uint8", "binary", "ubinary"] as const;
export type VectorType = (typeof VECTOR_TYPES)[number];

const same = (x: number) => x;

/** sentence-transformers' calibrated uint8 buckets of one vector (its length must equal the ranges'). */
export function toUint8Calibrated(v: Float32Array, r: QuantizationRanges): Uint8Array {
  if (v.length !== r.min.length) throw new Error(`a ${v.length}-dimensional vector with ${r.min.length}-dimensional calibration ranges`);
  const f = r.float32 ? Math.fround : same;
  const out = new Uint8Array(v.length);
  for (let i = 0; i < v.length; i++) {
    let step = f(f(r.max[i]! - r.min[i]!) / 255);
    if (step === 0) step = 1;
    const q = Math.floor(f(f(v[i]! - r.min[i]!) / step));
    out[i] = q < 0 ? 0 : q > 255 ? 255 : q;
  }
  return out;
}

export function toInt8Calibrated(v: Float32Array, r: QuantizationRanges): Int8Array {
  const u = toUint8Calibrated(v, r);
  const out = new Int8Array(u.length);
  for (let i = 0; i < u.length; i++) out[i] = u[i]! - 128;
  return out;
}

export function toInt8(v: Float32Array): Int8Array {
  let max = 0;
  for (let i = 0; i < v.length; i++) max = Math.max(max, Math.abs(v[i]!));
  const out = new Int8Array(v.length);
  if (max === 0) return out;
  const scale = 127 / max;
  for (let i = 0; i < v.length; i++) out[i] = Math.round(v[i]! * scale);
  return out;
}

export function toUint8(v: Float32Array): Uint8Array {
  const q = toInt8(v);
  const out = new Uint8Array(q.length);
  for (let i = 0; i < q.length; i++) out[i] = q[i]! + 128;
  return out;
}

/** Sign bits, MSB first: ceil(dims / 8) bytes. */
export function toUbinary(v: Float32Array): Uint8Array {
  const out = new Uint8Array(Math.ceil(v.length / 8));
  for (let i = 0; i < v.length; i++) if (v[i]! > 0) out[i >> 3]! |= 0x80 >> (i & 7);
  return out;
}

export function toBinary(v: Float32Array): Int8Array {
  const u = toUbinary(v);
  const out = new Int8Array(u.length);
  for (let i = 0; i < u.length; i++) out[i] = u[i]! - 128;
  return out;
}

/** The typed array of a vector in one type (float stays float32); int8/uint8 by the model's ranges when it has them. */
export function quantize(v: Float32Array, type: VectorType, ranges: QuantizationRanges | null = null): Float32Array | Int8Array | Uint8Array {
  switch (type) {
    case "float":
      return v;
    case "int8":
      return ranges ? toInt8Calibrated(v, ranges) : toInt8(v);
    case "uint8":
      return ranges ? toUint8Calibrated(v, ranges) : toUint8(v);
    case "binary":
      return toBinary(v);
    case "ubinary":
      return toUbinary(v);
  }
}

/** The raw little-endian bytes of a typed array, base64-encoded (float32 for float: OpenAI's base64 format). */
export function bytesBase64(a: Float32Array | Int8Array | Uint8Array): string {
  // Typed arrays are little-endian on every platform Bun runs on.
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString("base64");
}

/** One vector as an API returns it: a list of numbers, or base64 of its bytes. */
export function encodeVector(v: Float32Array, type: VectorType, base64: boolean, ranges: QuantizationRanges | null = null): number[] | string {
  const q = quantize(v, type, ranges);
  return base64 ? bytesBase64(q) : Array.from(q);
}
