// Qwen3 decoders: Qwen3Model (embedders: the last hidden state after the final norm, pooled by the server at the last
// token), Qwen3ForSequenceClassification (the score head at each row's last non-pad token: -seq-cls rerankers) and
// Qwen3ForCausalLM (LLM rerankers: full-vocabulary logits [B, S, V] from an lm_head MatMul, which the rerank family
// cuts to the last position and the yes/no columns at load). Pre-RMSNorm layers, per-head q_norm / k_norm before
// rotary, grouped-query attention with a causal (optionally sliding-window) mask, SwiGLU.
import { ModelLoadError } from "../../errors";
import { attentionBias, Builder, gatedMlp, headRmsNorm, multiHeadAttention, rotary, rotaryCache, textInputs } from "./blocks";
import type { Architecture, Built } from "./architecture";

/**
 * The base of a default (unscaled, full-dimension) rope: `params` is a rope_parameters / rope_scaling object (named
 * `key` in messages) or absent; its rope_theta wins over `theta` (the older top-level key), then `fallback`.
 */
export function defaultRopeTheta(params: unknown, key: string, theta: unknown, fallback: number): number {
  if (params !== undefined && params !== null) {
    if (typeof params !== "object") throw new ModelLoadError(`config.json ${key} is not an object`);
    const p = params as Record<string, unknown>;
    const type = p.rope_type ?? p.type ?? "default";
    if (type !== "default") throw new ModelLoadError(`config.json ${key}.rope_type ${String(type)} is not built (only the default rope)`);
    if (p.partial_rotary_factor !== undefined && p.partial_rotary_factor !== 1) throw new ModelLoadError(`config.json ${key}.partial_rotary_factor ${String(p.partial_rotary_factor)} is not built (only 1)`);
    if (typeof p.rope_theta === "number") return p.rope_theta;
  }
  return typeof theta === "number" ? theta : fallback;
}

/** The decoder stack: embeddings, layers and the final norm, [B, S, H]. Inputs: input_ids, attention_mask, position_ids. */
function buildQwen3(b: Builder): { hidden: string; ids: string; table: string } {
  const g = b.g;
  const c = b.config;
  b.usePrefix("embed_tokens.weight", ["model."]);
  const heads = b.num("num_attention_heads");
  // head_dim and the key/value heads as the weights have them (Qwen3Config's defaults are not hidden_size / heads).
  const headDim = b.w.shape(b.name("layers.0.self_attn.q_norm.weight"))[0]!;
  const kvHeads = b.w.shape(b.name("layers.0.self_attn.k_proj.weight"))[0]! / headDim;
  const layers = b.num("num_hidden_layers");
  const eps = b.num("rms_norm_eps", 1e-6);
  const act = String(c.hidden_act ?? "silu");
  if (c.partial_rotary_factor !== undefined && c.partial_rotary_factor !== 1) throw new ModelLoadError(`config.json partial_rotary_factor ${String(c.partial_rotary_factor)} is not built (only 1)`);
  defaultRopeTheta(c.rope_scaling, "rope_scaling", undefined, 0);
  const theta = defaultRopeTheta(c.rope_parameters, "rope_parameters", c.rope_theta, 10000);
  // As Qwen3Config: sliding windows only with use_sliding_window, on the layers layer_types names (else from
  // max_window_layers on); a causal window of W keeps the keys with q - W < k <= q.
  const window = c.use_sliding_window === true && c.sliding_window !== null ? b.num("sliding_window", 4096) : null;
  const types = Array.isArray(c.layer_types) ? c.layer_types.map(String) : null;
  const sliding = (i: number) => window !== null && (types ? types[i] === "sliding_attention" : i >= b.num("max_window_layers", 28));

  const inputs = textInputs(g, { positions: true });
  const table = b.tensor("embed_tokens.weight");
  let h = g.op("Gather", [table, inputs.ids]);
  const cache = rotaryCache(b, theta, headDim, b.num("max_position_embeddings", 32768));
  const fullBias = attentionBias(g, inputs.mask, { causal: true });
  const slidingBias = window !== null ? attentionBias(g, inputs.mask, { causal: true, window: window - 1 }) : fullBias;
  for (let i = 0; i < layers; i++) {
    const p = `layers.${i}`;
    const x = b.rmsNorm(h, `${p}.input_layernorm`, eps);
    let [q, k, v] = b.linears(x, [`${p}.self_attn.q_proj`, `${p}.self_attn.k_proj`, `${p}.self_attn.v_proj`]) as [string, string, string];
    q = rotary(b, headRmsNorm(b, q, `${p}.self_attn.q_norm`, heads, headDim, eps), inputs.positions!, heads, headDim, cache);
    k = rotary(b, headRmsNorm(b, k, `${p}.self_attn.k_norm`, kvHeads, headDim, eps), inputs.positions!, kvHeads, headDim, cache);
    const ctx = multiHeadAttention(b, q, k, v, heads, kvHeads, headDim, sliding(i) ? slidingBias : fullBias, 1 / Math.sqrt(headDim));
    h = g.op("Add", [h, b.linear(ctx, `${p}.self_attn.o_proj`)]);
    const y = gatedMlp(b, b.rmsNorm(h, `${p}.post_attention_layernorm`, eps), { gate: `${p}.mlp.gate_proj`, up: `${p}.mlp.up_proj`, down: `${p}.mlp.down_proj` }, act);
    h = g.op("Add", [h, y]);
  }
  return { hidden: b.rmsNorm(h, "norm", eps), ids: inputs.ids, table };
}

/**
 * Each row's state at its last token that is not pad_token_id, [B, H], as transformers pools a sequence classifier:
 * argmax(arange(S) * (ids != pad)); without a pad_token_id, the last position (left padding).
 */
function lastNonPad(b: Builder, h: string, ids: string): string {
  const g = b.g;
  const pad = b.config.pad_token_id;
  if (typeof pad !== "number") return g.op("Squeeze", [g.op("Slice", [h, g.constInt([-1]), g.constInt([2147483647]), g.constInt([1])]), g.constInt([1])]);
  const seq = g.op("Gather", [g.op("Shape", [ids]), g.constInt(1)], { axis: 0 });
  const range = g.op("Range", [g.constInt(0), seq, g.constInt(1)]);
  const real = g.op("Cast", [g.op("Not", [g.op("Equal", [ids, g.constInt(pad)])])], { to: 7 });
  const last = g.op("ArgMax", [g.op("Mul", [real, range])], { axis: 1, keepdims: 1 }); // [B, 1]
  return g.op("GatherND", [h, last], { batch_dims: 1 });
}

export const qwen3: Architecture = {
  architectures: ["Qwen3Model", "Qwen3ForSequenceClassification", "Qwen3ForCausalLM"],
  modelTypes: ["qwen3"],
  build(b): Built {
    const { hidden, ids, table } = buildQwen3(b);
    if (b.declares("Qwen3ForSequenceClassification")) return { hidden, logits: b.linear(lastNonPad(b, hidden, ids), "score", { top: true }) };
    if (!b.declares("Qwen3ForCausalLM")) return { hidden };
    // The lm_head: its own weight, or the embedding table when tied (transposed in the graph, stored once).
    const tied = b.config.tie_word_embeddings === true || !b.w.has("lm_head.weight");
    const head = tied ? b.g.op("Transpose", [table], { perm: [1, 0] }) : b.tensor("lm_head.weight", { transpose: true, top: true });
    return { hidden, logits: b.g.op("MatMul", [hidden, head]), tokenLogits: true };
  },
};
