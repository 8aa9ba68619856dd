// Gemma3TextModel (EmbeddingGemma): embeddings scaled by sqrt(hidden_size), RMSNorms scaling by (1 + weight) before
// and after both attention and MLP, per-head q_norm / k_norm before rotary (its own base on sliding-window layers),
// grouped-query attention scaled by query_pre_attn_scalar^-0.5 (bidirectional with use_bidirectional_attention, else
// causal), GeGLU. Output: the last hidden state after the final norm; pooling and the Dense modules are the server's.
import { ModelLoadError } from "../../errors";
import { attentionBias, gatedMlp, headRmsNorm, multiHeadAttention, rotary, rotaryCache, textInputs, type Builder } from "./blocks";
import type { Architecture, Built } from "./architecture";
import { defaultRopeTheta } from "./qwen3";

function buildGemma3(b: Builder): Built {
  const g = b.g;
  const c = b.config;
  b.usePrefix("embed_tokens.weight", ["model."]);
  const hiddenSize = b.num("hidden_size");
  const heads = b.num("num_attention_heads");
  // head_dim and the key/value heads as the weights have them (Gemma3TextConfig's defaults are 256 and 4).
  const headDim = b.w.shape(b.name("layers.0.self_attn.q_norm.weight"))[0]!;
  const kvHeads = b.w.shape(b.name("layers.0.self_attn.k_proj.weight"))[0]! / headDim;
  const layers = b.num("num_hidden_layers");
  const eps = b.num("rms_norm_eps", 1e-6);
  const act = String(c.hidden_activation ?? c.hidden_act ?? "gelu_pytorch_tanh");
  const scale = b.num("query_pre_attn_scalar", 256) ** -0.5;
  if (c.attn_logit_softcapping !== undefined && c.attn_logit_softcapping !== null) {
    throw new ModelLoadError(`config.json attn_logit_softcapping ${String(c.attn_logit_softcapping)} is not built (onnxruntime's attention has no softcap)`);
  }
  const bidirectional = c.use_bidirectional_attention === true;

  // Rope bases: rope_parameters per layer type (transformers 5), else rope_theta / rope_local_base_freq; rope_scaling
  // (older configs) applies to the full-attention layers.
  defaultRopeTheta(c.rope_scaling, "rope_scaling", undefined, 0);
  const rp = (c.rope_parameters ?? null) as Record<string, unknown> | null;
  const nested = !!rp && typeof rp === "object" && ("full_attention" in rp || "sliding_attention" in rp);
  const fullTheta = defaultRopeTheta(nested ? rp!.full_attention : rp, nested ? "rope_parameters.full_attention" : "rope_parameters", c.rope_theta, 1_000_000);
  const localTheta = defaultRopeTheta(nested ? rp!.sliding_attention : null, "rope_parameters.sliding_attention", c.rope_local_base_freq, 10_000);

  // Layer types: layer_types, else every sliding_window_pattern-th layer full (Gemma3TextConfig).
  const pattern = b.num("sliding_window_pattern", 6);
  const types = Array.isArray(c.layer_types) ? c.layer_types.map(String) : Array.from({ length: layers }, (_, i) => ((i + 1) % pattern ? "sliding_attention" : "full_attention"));
  for (const t of types) if (t !== "full_attention" && t !== "sliding_attention") throw new ModelLoadError(`config.json layer_types has ${t} (only full_attention and sliding_attention are built)`);

  const inputs = textInputs(g);
  // Positions 0..S-1 (RotaryEmbedding's offset form): rotary is relative, and padded keys are masked.
  const positions = g.constInt([0]);
  const maxPositions = b.num("max_position_embeddings", 131_072);
  // Each layer type's cache, written only when a layer of that type uses it.
  const caches: Partial<Record<string, { cos: string; sin: string }>> = {};
  const cacheOf = (t: string) => (caches[t] ??= rotaryCache(b, t === "sliding_attention" ? localTheta : fullTheta, headDim, maxPositions));
  const biases: Record<string, string> = { full_attention: attentionBias(g, inputs.mask, { causal: !bidirectional }) };
  if (types.includes("sliding_attention")) {
    const window = c.sliding_window === null ? 0 : b.num("sliding_window", 4096);
    if (window < 1) throw new ModelLoadError("config.json has sliding_attention layers but no sliding_window");
    // transformers: bidirectional, the window is window // 2 + 1 exclusive (|q - k| <= window // 2); causal, the keys
    // with q - window < k <= q.
    biases.sliding_attention = bidirectional ? attentionBias(g, inputs.mask, { window: Math.floor(window / 2) }) : attentionBias(g, inputs.mask, { causal: true, window: window - 1 });
  }

  // Gemma3TextScaledWordEmbedding: the table times sqrt(hidden_size) (a float32 constant here), folded into the weights.
  let h = g.op("Gather", [b.tensor("embed_tokens.weight", { scale: Math.fround(Math.sqrt(hiddenSize)) }), inputs.ids]);
  const norm = (x: string, n: string) => b.rmsNorm(x, n, eps, 1);
  for (let i = 0; i < layers; i++) {
    const p = `layers.${i}`;
    const type = types[i] as "full_attention" | "sliding_attention";
    const x = norm(h, `${p}.input_layernorm`);
    let [q, k, v] = b.linears(x, [`${p}.self_attn.q_proj`, `${p}.self_attn.k_proj`, `${p}.self_attn.v_proj`]) as [string, string, string];
    q = rotary(b, headRmsNorm(b, q, `${p}.self_attn.q_norm`, heads, headDim, eps, 1), positions, heads, headDim, cacheOf(type));
    k = rotary(b, headRmsNorm(b, k, `${p}.self_attn.k_norm`, kvHeads, headDim, eps, 1), positions, kvHeads, headDim, cacheOf(type));
    const ctx = multiHeadAttention(b, q, k, v, heads, kvHeads, headDim, biases[type]!, scale);
    h = g.op("Add", [h, norm(b.linear(ctx, `${p}.self_attn.o_proj`), `${p}.post_attention_layernorm`)]);
    const y = gatedMlp(b, norm(h, `${p}.pre_feedforward_layernorm`), { gate: `${p}.mlp.gate_proj`, up: `${p}.mlp.up_proj`, down: `${p}.mlp.down_proj` }, act);
    h = g.op("Add", [h, norm(y, `${p}.post_feedforward_layernorm`)]);
  }
  return { hidden: norm(h, "norm") };
}

export const gemma3: Architecture = {
  architectures: ["Gemma3TextModel"],
  modelTypes: ["gemma3_text"],
  build: buildGemma3,
};
