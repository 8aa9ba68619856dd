// ModernBERT encoders (ModernBertModel): pre-LayerNorm layers without biases, rotary positions (one theta for the
// global layers, another for the local sliding-window ones), GeGLU MLP, a final norm.
import { ModelLoadError } from "../../errors";
import { attentionBias, Builder, embed, maskPositions, multiHeadAttention, rotary, rotaryCache, textInputs } from "./blocks";
import type { Architecture, Built } from "./architecture";

type LayerType = "full_attention" | "sliding_attention";

/** Each layer's type: config.json layer_types, else every global_attn_every_n_layers-th layer global (from 0). */
function layerTypes(b: Builder, layers: number): LayerType[] {
  const given = b.config.layer_types;
  if (Array.isArray(given)) {
    if (given.length !== layers) throw new ModelLoadError(`layer_types has ${given.length} entries for ${layers} layers`);
    for (const t of given) if (t !== "full_attention" && t !== "sliding_attention") throw new ModelLoadError(`layer_types entry ${String(t)} is not built (full_attention, sliding_attention)`);
    return given as LayerType[];
  }
  const every = b.num("global_attn_every_n_layers", 3);
  return Array.from({ length: layers }, (_, i) => (i % every ? "sliding_attention" : "full_attention"));
}

/** The rope theta of a layer type: rope_parameters[type].rope_theta, else global_rope_theta / local_rope_theta. */
function ropeTheta(b: Builder, type: LayerType): number {
  if (b.config.rope_scaling != null) throw new ModelLoadError("rope_scaling is not built for ModernBERT (default rotary only)");
  const all = b.config.rope_parameters as Record<string, unknown> | undefined;
  const params = (all?.[type] ?? {}) as Record<string, unknown>;
  const kind = params.rope_type ?? params.type ?? "default";
  if (kind !== "default") throw new ModelLoadError(`rope_parameters.${type}.rope_type ${String(kind)} is not built (default only)`);
  if (typeof params.rope_theta === "number") return params.rope_theta;
  return type === "full_attention" ? b.num("global_rope_theta", 160_000) : b.num("local_rope_theta", 10_000);
}

function buildModernBert(b: Builder): Built {
  const g = b.g;
  b.usePrefix("embeddings.tok_embeddings.weight", ["model."]);
  const eps = b.num("norm_eps", 1e-5);
  const heads = b.num("num_attention_heads");
  const layers = b.num("num_hidden_layers");
  const hidden = b.num("hidden_size");
  const headDim = hidden / heads;
  if (!Number.isInteger(headDim)) throw new ModelLoadError(`hidden_size ${hidden} is not a multiple of num_attention_heads ${heads}`);
  const act = String(b.config.hidden_activation ?? "gelu");
  const maxPositions = b.num("max_position_embeddings", 8192);
  const types = layerTypes(b, layers);
  // sliding layers attend keys within local_attention / 2 positions either side
  const window = Math.floor(b.num("local_attention", 128) / 2);

  const inputs = textInputs(g);
  const positions = maskPositions(g, inputs.mask);
  const caches = new Map<LayerType, { cos: string; sin: string }>();
  const biases = new Map<LayerType, string>();
  for (const t of new Set(types)) {
    caches.set(t, rotaryCache(b, ropeTheta(b, t), headDim, maxPositions));
    biases.set(t, attentionBias(g, inputs.mask, t === "sliding_attention" ? { window } : {}));
  }

  // LayerNorm(x (+ bias) + skip) and the sum itself (the residual stream); Add + LayerNormalization, as Builder.skipLayerNorm
  const addNorm = (x: string, skip: string, n: string, bias?: string) => {
    const sum = g.op("Add", [bias ? g.op("Add", [x, bias]) : x, skip]);
    return [b.layerNorm(sum, n, eps), sum] as const;
  };
  const project = (x: string, n: string) => [b.matmul(x, `${n}`), b.has(`${n}.bias`) ? b.tensor(`${n}.bias`) : undefined] as const;

  let h = b.layerNorm(embed(b, inputs.ids, "embeddings.tok_embeddings"), "embeddings.norm", eps);
  // layer 0 has no attn_norm (the embeddings norm precedes it); each later one is fused with the residual add before it
  let x = b.has("layers.0.attn_norm.weight") ? b.layerNorm(h, "layers.0.attn_norm", eps) : h;
  for (let i = 0; i < layers; i++) {
    const p = `layers.${i}`;
    const t = types[i]!;
    const [q, k, v] = g.opN("Split", [b.linear(x, `${p}.attn.Wqkv`), g.constInt([hidden, hidden, hidden])], 3, { axis: -1 });
    const cache = caches.get(t)!;
    const ctx = multiHeadAttention(b, rotary(b, q!, positions, heads, headDim, cache), rotary(b, k!, positions, heads, headDim, cache), v!, heads, heads, headDim, biases.get(t)!);
    const [out, outBias] = project(ctx, `${p}.attn.Wo`);
    [x, h] = addNorm(out, h, `${p}.mlp_norm`, outBias);
    // GeGLU: Wi's output halves are (input, gate): act(input) * gate
    const inner = b.w.shape(b.name(`${p}.mlp.Wi.weight`))[0]! / 2;
    const [up, gate] = g.opN("Split", [b.linear(x, `${p}.mlp.Wi`), g.constInt([inner, inner])], 2, { axis: -1 });
    const [down, downBias] = project(g.op("Mul", [b.activation(up!, act), gate!]), `${p}.mlp.Wo`);
    [x, h] = addNorm(down, h, i + 1 < layers ? `layers.${i + 1}.attn_norm` : "final_norm", downBias);
  }
  return { hidden: x };
}

export const modernbert: Architecture = {
  architectures: ["ModernBertModel"],
  modelTypes: ["modernbert"],
  build: buildModernBert,
};
