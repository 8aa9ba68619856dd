// The blocks every architecture file composes: inputs, embeddings, norms, linear layers, activations, attention
// variants (onnxruntime's fused Attention / MultiHeadAttention, rotary, additive bias for causal, sliding-window and
// relative positions) and MLPs. Activations are [batch, sequence, hidden] float32 tensors named by string.
import { ModelLoadError } from "../../errors";
import { ElemType, f, type Graph } from "./graph";
import type { Weights } from "../safetensors";
import { quantizeBlockwise, type Quantization } from "./quantize";

/** What an architecture file builds with: the graph, the weights, and the config it reads. */
export class Builder {
  /** Name prefixes tried in turn when a weight is looked up (e.g. "bert." for a BertForSequenceClassification). */
  private prefix = "";
  /** Projection weights already written (float, or packed + scales), by weight name. */
  private readonly projections = new Map<string, string[]>();

  /** `quant`: the Linear weights quantized block-wise for MatMulNBits (--dtype int8); null: float32. */
  constructor(readonly g: Graph, readonly w: Weights, readonly config: Record<string, unknown>, readonly quant: Quantization | null = null) {}

  /** Chooses the first prefix under which `probe` exists ("" included); throws when none has it. */
  usePrefix(probe: string, prefixes: readonly string[]): void {
    for (const p of ["", ...prefixes]) {
      if (this.w.has(p + probe)) {
        this.prefix = p;
        return;
      }
    }
    throw new ModelLoadError(`the weights have no ${probe} (tried the prefixes ${["(none)", ...prefixes].join(", ")}): not the layout this architecture is built from`);
  }

  /** A weight name under the model's prefix. */
  name(n: string): string {
    return this.prefix + n;
  }

  has(n: string): boolean {
    return this.w.has(this.prefix + n);
  }

  /** Whether config.json's `architectures` names `arch` (the head to build). */
  declares(arch: string): boolean {
    return Array.isArray(this.config.architectures) && this.config.architectures.map(String).includes(arch);
  }

  /** A config number, or `fallback`; a missing required number (no fallback) fails the build with its key. */
  num(key: string, fallback?: number): number {
    const v = this.config[key];
    if (typeof v === "number" && Number.isFinite(v)) return v;
    if (fallback !== undefined) return fallback;
    throw new ModelLoadError(`config.json has no number ${key}, which the graph needs`);
  }

  /** A weight (under the prefix unless `top`) as a graph initializer, optionally transposed from [out, in] to [in, out]. */
  tensor(n: string, opts: { transpose?: boolean; top?: boolean; scale?: number; add?: number } = {}): string {
    const full = opts.top ? n : this.prefix + n;
    let data = this.w.float(full);
    let dims = this.w.shape(full);
    if (opts.transpose) {
      if (dims.length !== 2) throw new ModelLoadError(`${full} has shape [${dims}], not a matrix`);
      data = transpose(data, dims[0]!, dims[1]!);
      dims = [dims[1]!, dims[0]!];
    }
    if (opts.scale !== undefined || opts.add !== undefined) {
      const s = opts.scale ?? 1;
      const a = opts.add ?? 0;
      for (let i = 0; i < data.length; i++) data[i] = data[i]! * s + a;
    }
    return this.g.weight(full, data, dims);
  }

  /** y = x W^T + b for a torch Linear `n` (bias when the weights have one). */
  linear(x: string, n: string, opts: { top?: boolean } = {}): string {
    const full = opts.top ? n : this.prefix + n;
    const y = this.matmul(x, n, opts);
    return this.w.has(`${full}.bias`) ? this.g.op("Add", [y, this.tensor(`${n}.bias`, { top: opts.top })]) : y;
  }

  /** x W^T for a torch Linear `n` (its weight only): a MatMul, or MatMulNBits when the graph is quantized. */
  matmul(x: string, n: string, opts: { top?: boolean } = {}): string {
    const full = `${opts.top ? n : this.prefix + n}.weight`;
    const dims = this.w.shape(full);
    if (dims.length !== 2) throw new ModelLoadError(`${full} has shape [${dims}], not a matrix`);
    return this.matmulRows(x, full, this.w.float(full), dims[0]!, dims[1]!);
  }

  /** x W^T for a weight given as rows [n, k] (torch's layout); a weight used twice is written once. */
  private matmulRows(x: string, stem: string, rows: Float32Array, n: number, k: number): string {
    let inputs = this.projections.get(stem);
    if (!inputs) {
      if (!this.quant) inputs = [this.g.weight(stem, transpose(rows, n, k), [k, n])];
      else {
        const qw = quantizeBlockwise(rows, n, k, this.quant);
        inputs = [
          this.g.weight(`${stem}.q${this.quant.bits}`, qw.packed, [n, qw.blocks, (this.quant.block * this.quant.bits) / 8], ElemType.uint8),
          this.g.weight(`${stem}.scales`, qw.scales, [n * qw.blocks]),
        ];
      }
      this.projections.set(stem, inputs);
    }
    if (!this.quant) return this.g.op("MatMul", [x, inputs[0]!]);
    const q = this.quant;
    return this.g.op("MatMulNBits", [x, ...inputs], { K: k, N: n, bits: q.bits, block_size: q.block, accuracy_level: 4 }, "ms");
  }

  /** The weights [W1; W2; ...] of Linears of the same input, as rows [sum of outs, in], and each one's outs. */
  stacked(ns: string[]): { rows: Float32Array; inner: number; outs: number[] } {
    const mats = ns.map((n) => ({ data: this.w.float(this.prefix + `${n}.weight`), dims: this.w.shape(this.prefix + `${n}.weight`) }));
    const inner = mats[0]!.dims[1]!;
    if (mats.some((m) => m.dims.length !== 2 || m.dims[1] !== inner)) throw new ModelLoadError(`${ns.join(", ")} do not take the same input size`);
    const rows = new Float32Array(mats.reduce((a, m) => a + m.data.length, 0));
    let at = 0;
    for (const m of mats) {
      rows.set(m.data, at);
      at += m.data.length;
    }
    return { rows, inner, outs: mats.map((m) => m.dims[0]!) };
  }

  /** The biases of Linears side by side (zeros where `zeroBias` and one has none; else all or none must have one). */
  stackedBias(ns: string[], outs: number[], zeroBias = false): string | null {
    const present = ns.filter((n) => this.has(`${n}.bias`));
    if (present.length === 0 && !zeroBias) return null;
    if (present.length !== ns.length && !zeroBias) throw new ModelLoadError(`only some of ${ns.join(", ")} have a bias`);
    const bias = new Float32Array(outs.reduce((a, b) => a + b, 0));
    let at = 0;
    ns.forEach((n, i) => {
      if (this.has(`${n}.bias`)) bias.set(this.w.float(this.prefix + `${n}.bias`), at);
      at += outs[i]!;
    });
    return this.g.weight(this.prefix + ns.join("+") + ".bias", bias, [bias.length]);
  }

  /** Several Linears of the same input as one projection (MatMul or MatMulNBits) and its stacked bias. */
  joined(x: string, ns: string[], zeroBias = false): { y: string; bias: string | null; outs: number[] } {
    const { rows, inner, outs } = this.stacked(ns);
    const y = this.matmulRows(x, this.prefix + ns.join("+"), rows, rows.length / inner, inner);
    return { y, bias: this.stackedBias(ns, outs, zeroBias), outs };
  }

  /** Several Linears of the same input as one MatMul (their weights side by side), split back. */
  linears(x: string, ns: string[]): string[] {
    const { y, bias, outs } = this.joined(x, ns);
    return this.g.opN("Split", [bias ? this.g.op("Add", [y, bias]) : y, this.g.constInt(outs)], ns.length, { axis: -1 });
  }

  /** LayerNorm `n` (under the prefix unless `top`); without a stored bias, zeros. */
  layerNorm(x: string, n: string, eps: number, opts: { top?: boolean } = {}): string {
    const full = opts.top ? n : this.name(n);
    const bias = this.w.has(`${full}.bias`) ? this.tensor(`${n}.bias`, opts) : this.g.constFloat(new Array(this.w.shape(`${full}.weight`)[0]).fill(0));
    return this.g.op("LayerNormalization", [x, this.tensor(`${n}.weight`, opts), bias], { axis: -1, epsilon: f(eps) });
  }

  /**
   * LayerNorm(x (+ bias) + skip) as Add and LayerNormalization: on CPU that runs faster than onnxruntime's fused
   * SkipLayerNormalization (bge-small at 1 thread: 0.88-1.00x of the export with it, 0.99-1.09x without;
   * bench/built-graph.ts).
   */
  skipLayerNorm(x: string, skip: string, n: string, eps: number, bias?: string): string {
    const sum = this.g.op("Add", [bias ? this.g.op("Add", [x, bias]) : x, skip]);
    return this.g.op("LayerNormalization", [sum, this.tensor(`${n}.weight`), this.tensor(`${n}.bias`)], { axis: -1, epsilon: f(eps) });
  }

  /** RMSNorm; `offset` 1 for Gemma, which scales by (1 + weight). */
  rmsNorm(x: string, n: string, eps: number, offset = 0): string {
    return this.g.op("SimplifiedLayerNormalization", [x, this.tensor(`${n}.weight`, { add: offset })], { axis: -1, epsilon: f(eps) });
  }

  /** An activation by its transformers name (config.json hidden_act / hidden_activation). */
  activation(x: string, act: string): string {
    const g = this.g;
    switch (act) {
      case "gelu":
      case "gelu_python":
        return g.op("Gelu", [x], {}, "ms");
      case "gelu_new":
      case "gelu_pytorch_tanh":
      case "gelu_fast":
        return g.op("FastGelu", [x], {}, "ms");
      case "relu":
        return g.op("Relu", [x]);
      case "silu":
      case "swish":
        return g.op("Mul", [x, g.op("Sigmoid", [x])]);
      case "tanh":
        return g.op("Tanh", [x]);
      default:
        throw new ModelLoadError(`activation ${act} is not one the graph builder writes (${ACTIVATIONS.join(", ")})`);
    }
  }
}

function transpose(data: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = data[r * cols + c]!;
  return out;
}

/** The token inputs every built graph takes (int64, as exports declare them). */
export function textInputs(g: Graph, opts: { tokenTypes?: boolean; positions?: boolean } = {}): { ids: string; mask: string; types: string | null; positions: string | null } {
  const dims = ["batch", "sequence"];
  return {
    ids: g.input("input_ids", ElemType.int64, dims),
    mask: g.input("attention_mask", ElemType.int64, dims),
    types: opts.tokenTypes ? g.input("token_type_ids", ElemType.int64, dims) : null,
    positions: opts.positions ? g.input("position_ids", ElemType.int64, dims) : null,
  };
}

/** Gathers rows of an embedding table. */
export function embed(b: Builder, ids: string, table: string): string {
  return b.g.op("Gather", [b.tensor(`${table}.weight`), ids]);
}

/** The activations (transformers names) Builder.activation writes. */
export const ACTIVATIONS = ["gelu", "gelu_python", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "silu", "swish", "tanh"] as const;

/**
 * A masked-LM head at every position, [B, S, V] (SPLADE-style sparse encoders pool it): decoder(LayerNorm(act(dense(h)))),
 * top-level names. The decoder is the word embedding `table` (transposed in the graph, stored once) unless the weights
 * hold their own; its bias is the first of `bias` the weights have.
 */
export function maskedLmHead(b: Builder, h: string, table: string, n: { dense: string; norm: string; decoder: string; bias: readonly string[] }, act: string, eps: number): string {
  const g = b.g;
  const x = b.layerNorm(b.activation(b.linear(h, n.dense, { top: true }), act), n.norm, eps, { top: true });
  const y = b.w.has(`${n.decoder}.weight`) ? b.matmul(x, n.decoder, { top: true }) : g.op("MatMul", [x, g.op("Transpose", [table], { perm: [1, 0] })]);
  const bias = n.bias.find((name) => b.w.has(name));
  return bias ? g.op("Add", [y, b.tensor(bias, { top: true })]) : y;
}

/** Positions 0..S-1 as a [1, S] int64 tensor, from any [B, S] input. */
export function arangePositions(g: Graph, like: string): string {
  const seq = g.op("Gather", [g.op("Shape", [like]), g.constInt(1)], { axis: 0 });
  const range = g.op("Range", [g.constInt(0), seq, g.constInt(1)]);
  return g.op("Unsqueeze", [range, g.constInt([0])]);
}

/** Positions 0.. over each row's real tokens ([B, S] int64 from the int64 mask, either padding side; pads read 0). */
export function maskPositions(g: Graph, mask: string): string {
  return g.op("Mul", [g.op("Sub", [g.op("CumSum", [mask, g.constInt(1)]), g.constInt(1)]), mask]);
}

/** The 2-D padding mask as onnxruntime's attention ops take it (int32, 1 = attend). */
export function maskIndex(g: Graph, mask: string): string {
  return g.op("Cast", [mask], { to: ElemType.int32 });
}

/**
 * An additive attention bias [B, 1, S, S]: 0 where a query may attend a key, -10000 elsewhere (a padded key; with
 * `causal`, a later one; with `window`, one further than window positions away: |i - j| > window).
 */
export function attentionBias(g: Graph, mask: string, opts: { causal?: boolean; window?: number } = {}): string {
  // allowed[b, 1, i, j] = mask[b, j] (and the positional rules), as a float 0/1.
  const keys = g.op("Cast", [g.op("Unsqueeze", [mask, g.constInt([1, 2])])], { to: ElemType.float }); // [B,1,1,S]
  let allowed = keys;
  if (opts.causal || opts.window !== undefined) {
    const pos = g.op("Squeeze", [arangePositions(g, mask), g.constInt([0])]); // [S]
    const rows = g.op("Unsqueeze", [pos, g.constInt([1])]); // [S,1]
    const cols = g.op("Unsqueeze", [pos, g.constInt([0])]); // [1,S]
    const diff = g.op("Sub", [cols, rows]); // j - i
    let rule: string | null = null;
    const and = (a: string | null, c: string) => (a ? g.op("And", [a, c]) : c);
    if (opts.causal) rule = and(rule, g.op("LessOrEqual", [diff, g.constInt(0)]));
    if (opts.window !== undefined) rule = and(rule, g.op("LessOrEqual", [g.op("Abs", [diff]), g.constInt(opts.window)]));
    allowed = g.op("Mul", [keys, g.op("Cast", [rule!], { to: ElemType.float })]);
  } else {
    // Padding alone: broadcast over the queries too, as MultiHeadAttention wants [B, 1, S, S].
    const shape = g.op("Shape", [mask]);
    const seq = g.op("Slice", [shape, g.constInt([1]), g.constInt([2])]);
    allowed = g.op("Expand", [keys, g.op("Concat", [g.op("Slice", [shape, g.constInt([0]), g.constInt([1])]), g.constInt([1]), seq, seq], { axis: 0 })]);
  }
  // (allowed - 1) * 10000: 0 or -10000, as onnxruntime's own mask_filter_value.
  return g.op("Mul", [g.op("Sub", [allowed, g.constFloat(1)]), g.constFloat(10000)]);
}

/**
 * Self-attention with the projections fused into onnxruntime's Attention operator (one [H, 3H] MatMul inside):
 * the BERT-family shape. `bias`: an additive [B|1, N, S, S] attention bias (relative positions, windows).
 */
export function fusedSelfAttention(b: Builder, x: string, names: { q: string; k: string; v: string }, heads: number, mask: string, bias?: string): string {
  const g = b.g;
  const ns = [names.q, names.k, names.v];
  if (b.quant) {
    // The projections quantized (MatMulNBits), attention in MultiHeadAttention: Attention takes float weights only.
    const { y, bias: qkvBias, outs } = b.joined(x, ns, true);
    const [q, k, v] = g.opN("Split", [g.op("Add", [y, qkvBias!]), g.constInt(outs)], 3, { axis: -1 });
    const padding = attentionBias(g, mask);
    return g.op("MultiHeadAttention", [q!, k!, v!, "", "", bias ? g.op("Add", [padding, bias]) : padding], { num_heads: heads }, "ms");
  }
  const { rows, inner, outs } = b.stacked(ns);
  const weight = g.weight(b.name(ns.join("+")), transpose(rows, rows.length / inner, inner), [inner, rows.length / inner]);
  const inputs = [x, weight, b.stackedBias(ns, outs, true)!, mask];
  if (bias) inputs.push("", bias);
  const attrs: Record<string, number | number[]> = { num_heads: heads };
  if (outs[0] !== outs[2] || outs[0] !== outs[1]) attrs.qkv_hidden_sizes = outs;
  return g.op("Attention", inputs, attrs, "ms");
}

/** BERT's names of layer `p`'s sublayers (encoder.layer.N). */
export function bertSublayers(p: string) {
  return { out: `${p}.attention.output.dense`, outNorm: `${p}.attention.output.LayerNorm`, up: `${p}.intermediate.dense`, down: `${p}.output.dense`, downNorm: `${p}.output.LayerNorm` };
}

/**
 * The BERT-family layer after attention, post-LayerNorm: the output projection and residual LayerNorm, then the MLP
 * (up, activation, down) and residual LayerNorm; the up projection's bias folded into BiasGelu for gelu.
 */
export function postNormSublayers(
  b: Builder, h: string, ctx: string, n: { out: string; outNorm: string; up: string; down: string; downNorm: string }, act: string, eps: number,
): string {
  const g = b.g;
  const attnOut = b.matmul(ctx, `${n.out}`);
  h = b.skipLayerNorm(attnOut, h, n.outNorm, eps, b.tensor(`${n.out}.bias`));
  const up = b.matmul(h, `${n.up}`);
  const upBias = b.tensor(`${n.up}.bias`);
  const inter = act === "gelu" ? g.op("BiasGelu", [up, upBias], {}, "ms") : b.activation(g.op("Add", [up, upBias]), act);
  const down = b.matmul(inter, `${n.down}`);
  return b.skipLayerNorm(down, h, n.downNorm, eps, b.tensor(`${n.down}.bias`));
}

/**
 * Attention over projected q [B,S,N*D], k and v [B,S,Nkv*D] (grouped-query: key/value heads repeated): onnxruntime's
 * MultiHeadAttention, masked by `bias` [B|1, 1|N, S, S]. `scale` defaults to 1/sqrt(D).
 */
export function multiHeadAttention(b: Builder, q: string, k: string, v: string, heads: number, kvHeads: number, headDim: number, bias: string, scale?: number): string {
  const g = b.g;
  if (kvHeads !== heads) {
    const rep = heads / kvHeads;
    if (!Number.isInteger(rep)) throw new ModelLoadError(`num_attention_heads ${heads} is not a multiple of num_key_value_heads ${kvHeads}`);
    const repeat = (t: string) => {
      const split = g.op("Reshape", [t, g.constInt([0, 0, kvHeads, 1, headDim])]);
      const shape = g.op("Concat", [g.op("Slice", [g.op("Shape", [split]), g.constInt([0]), g.constInt([2])]), g.constInt([kvHeads, rep, headDim])], { axis: 0 });
      return g.op("Reshape", [g.op("Expand", [split, shape]), g.constInt([0, 0, heads * headDim])]);
    };
    k = repeat(k);
    v = repeat(v);
  }
  const attrs: Record<string, number | { f: number }> = { num_heads: heads };
  if (scale !== undefined) attrs.scale = f(scale);
  return g.op("MultiHeadAttention", [q, k, v, "", "", bias], attrs, "ms");
}

/** Rotary position embedding (non-interleaved, rotate-half) on [B,S,N*D] by position_ids, through onnxruntime's RotaryEmbedding. */
export function rotary(b: Builder, x: string, positions: string, heads: number, headDim: number, cache: { cos: string; sin: string }, rotaryDim = headDim): string {
  return b.g.op("RotaryEmbedding", [x, positions, cache.cos, cache.sin], { num_heads: heads, rotary_embedding_dim: rotaryDim, interleaved: 0 }, "ms");
}

/** cos/sin caches [maxPositions, rotaryDim/2] for base theta (default rope: inv_freq = theta^(-2i/d)). */
export function rotaryCache(b: Builder, theta: number, rotaryDim: number, maxPositions: number): { cos: string; sin: string } {
  const half = rotaryDim / 2;
  const cos = new Float32Array(maxPositions * half);
  const sin = new Float32Array(maxPositions * half);
  for (let i = 0; i < half; i++) {
    // As transformers computes it: inv_freq in float32, then position * inv_freq in float32.
    const invFreq = Math.fround(1 / Math.fround(theta ** Math.fround((2 * i) / rotaryDim)));
    for (let p = 0; p < maxPositions; p++) {
      const angle = Math.fround(p * invFreq);
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
    }
  }
  return { cos: b.g.weight("rotary.cos", cos, [maxPositions, half]), sin: b.g.weight("rotary.sin", sin, [maxPositions, half]) };
}

/** RMSNorm over each head of [B,S,N*D] (Qwen3's q_norm / k_norm), back to [B,S,N*D]. */
export function headRmsNorm(b: Builder, x: string, n: string, heads: number, headDim: number, eps: number, offset = 0): string {
  const g = b.g;
  const split = g.op("Reshape", [x, g.constInt([0, 0, heads, headDim])]);
  return g.op("Reshape", [b.rmsNorm(split, n, eps, offset), g.constInt([0, 0, heads * headDim])]);
}

/** A gated MLP: down(act(gate(x)) * up(x)) (SwiGLU with silu, GeGLU with gelu). */
export function gatedMlp(b: Builder, x: string, names: { gate: string; up: string; down: string }, act: string): string {
  const [gate, up] = b.linears(x, [names.gate, names.up]);
  return b.linear(b.g.op("Mul", [b.activation(gate!, act), up!]), names.down);
}
