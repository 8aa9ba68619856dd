// Reads tensors from a .safetensors file: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw little-endian data. Used for the small weight files of
// sentence-transformers modules that sit outside the ONNX graph (Dense heads).
import { readFileSync } from "node:fs";
import { ModelLoadError } from "../errors";
import { bf16ToFloat, halfToFloat } from "./half";

export interface WeightTensor {
  shape: number[];
  data: Float32Array;
}

/** Every tensor of a safetensors file as float32 (F32, F16 and BF16 are read; other dtypes are refused). */
export function readSafetensors(path: string): Map<string, WeightTensor> {
  const bytes = readFileSync(path);
  if (bytes.length < 8) throw new ModelLoadError(`${path} is not a safetensors file (too short)`);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  if (headerLength > bytes.length - 8) throw new ModelLoadError(`${path} is not a safetensors file (header length ${headerLength})`);
  let header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  try {
    header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8"));
  } catch (e) {
    throw new ModelLoadError(`${path} is not a safetensors file: ${(e as Error).message}`);
  }
  const base = 8 + headerLength;
  const out = new Map<string, WeightTensor>();
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [from, to] = t.data_offsets;
    // Copy out of the file buffer: typed-array views need aligned offsets.
    const raw = new Uint8Array(bytes.subarray(base + from, base + to)).buffer;
    let data: Float32Array;
    if (t.dtype === "F32") data = new Float32Array(raw);
    else if (t.dtype === "F16") data = halfToFloat(new Uint16Array(raw));
    else if (t.dtype === "BF16") data = bf16ToFloat(new Uint16Array(raw));
    else throw new ModelLoadError(`${path}: tensor ${name} has dtype ${t.dtype}; only F32, F16 and BF16 weights are read`);
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (data.length !== count) throw new ModelLoadError(`${path}: tensor ${name} holds ${data.length} values for shape ${t.shape.join("x")}`);
    out.set(name, { shape: t.shape, data });
  }
  return out;
}
