// Weights quantized at build time for onnxruntime's MatMulNBits: each row of a torch Linear weight [N, K] cut into
// blocks of `block` along K, each block symmetric with its own scale (absmax / (2^(bits-1) - 1)), stored unsigned
// around the default zero point 2^(bits-1) (so no zero-point tensor), 4-bit values two to a byte, low nibble first.
// With accuracy_level 4 onnxruntime quantizes the activations per block of each row as well: a text's numbers never
// depend on the other rows of its batch.

export interface Quantization {
  bits: 4 | 8;
  /** Elements of K per block (a power of two, at least 16). */
  block: number;
}

export interface QuantizedWeight {
  /** [N, blocks, block * bits / 8] */
  packed: Uint8Array;
  /** [N, blocks] */
  scales: Float32Array;
  blocks: number;
}

export function quantizeBlockwise(w: Float32Array, n: number, k: number, q: Quantization): QuantizedWeight {
  const blocks = Math.ceil(k / q.block);
  const blob = (q.block * q.bits) / 8;
  const packed = new Uint8Array(n * blocks * blob);
  const scales = new Float32Array(n * blocks);
  const qmax = 2 ** (q.bits - 1) - 1;
  const zero = 2 ** (q.bits - 1);
  for (let row = 0; row < n; row++) {
    for (let b = 0; b < blocks; b++) {
      const from = row * k + b * q.block;
      const to = row * k + Math.min(k, (b + 1) * q.block);
      let absmax = 0;
      for (let i = from; i < to; i++) absmax = Math.max(absmax, Math.abs(w[i]!));
      const scale = absmax > 0 ? absmax / qmax : 1;
      scales[row * blocks + b] = scale;
      const out = (row * blocks + b) * blob;
      for (let j = 0; j < q.block; j++) {
        const value = from + j < to ? Math.max(-qmax, Math.min(qmax, Math.round(w[from + j]! / scale))) + zero : zero;
        if (q.bits === 8) packed[out + j] = value;
        else packed[out + (j >> 1)]! |= j & 1 ? value << 4 : value;
      }
    }
  }
  return { packed, scales, blocks };
}

/** The float weights a quantized one stands for (tests: the graph must compute x times these). */
export function dequantizeBlockwise(qw: QuantizedWeight, n: number, k: number, q: Quantization): Float32Array {
  const out = new Float32Array(n * k);
  const blob = (q.block * q.bits) / 8;
  const zero = 2 ** (q.bits - 1);
  for (let row = 0; row < n; row++) {
    for (let i = 0; i < k; i++) {
      const b = Math.floor(i / q.block);
      const j = i % q.block;
      const at = (row * qw.blocks + b) * blob;
      const value = q.bits === 8 ? qw.packed[at + j]! : (qw.packed[at + (j >> 1)]! >> (j & 1 ? 4 : 0)) & 15;
      out[row * k + i] = (value - zero) * qw.scales[row * qw.blocks + b]!;
    }
  }
  return out;
}
