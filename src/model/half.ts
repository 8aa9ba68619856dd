// 16-bit float formats as float32, without onnxruntime: float16 outputs (onnx.ts) and float16 / bfloat16 weights
// of sentence-transformers modules (safetensors.ts).

export function halfToFloat(h: Uint16Array): Float32Array {
  const out = new Float32Array(h.length);
  for (let i = 0; i < h.length; i++) {
    const x = h[i]!;
    const sign = x & 0x8000 ? -1 : 1;
    const exp = (x >> 10) & 0x1f;
    const frac = x & 0x3ff;
    out[i] =
      exp === 0 ? sign * frac * 2 ** -24 : exp === 31 ? (frac ? NaN : sign * Infinity) : sign * (1 + frac / 1024) * 2 ** (exp - 15);
  }
  return out;
}

/** bfloat16 is the top half of a float32. */
export function bf16ToFloat(h: Uint16Array): Float32Array {
  const out = new Float32Array(h.length);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < h.length; i++) bits[i] = h[i]! << 16;
  return out;
}
