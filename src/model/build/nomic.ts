// NomicBERT encoders (NomicBertModel, nomic-ai/nomic-embed-text-v1 / v1.5, remote code modeling_hf_nomic_bert.py):
// post-LayerNorm BERT layers with a fused Wqkv, rotary positions (rotary_emb_fraction of each head, rotate-half or
// interleaved) and a gated MLP (fc11 * act(fc12), then fc2), or absolute positions and a GELU MLP.
import { ModelLoadError } from "../../errors";
import { attentionBias, Builder, embed, maskPositions, multiHeadAttention, rotaryCache, textInputs } from "./blocks";
import type { Architecture, Built } from "./architecture";
import { bert } from "./bert";

/** Config keys of variants this file does not build, each with the value it does build. */
const REFUSED: [string, (v: unknown) => boolean, string][] = [
  ["prenorm", (v) => v === true, "false (post-norm)"],
  ["rotary_emb_scale_base", (v) => v != null, "null (no xPos scaling)"],
  ["rotary_scaling_factor", (v) => v != null, "null (no dynamic NTK rotary)"],
  ["rotary_head_dim", (v) => v === true, "false"],
  ["moe_every_n_layers", (v) => typeof v === "number" && v > 0, "0 (no mixture of experts)"],
  ["norm_mlp", (v) => v === true, "false"],
];

function buildNomic(b: Builder): Built {
  const g = b.g;
  const c = b.config;
  for (const [key, refused, built] of REFUSED) {
    if (refused(c[key])) throw new ModelLoadError(`NomicBERT ${key} ${JSON.stringify(c[key])} is not built (only ${built})`);
  }
  b.usePrefix("emb_ln.weight", ["bert.", "model."]);
  const hidden = b.num("n_embd");
  const heads = b.num("n_head");
  const layers = b.num("n_layer");
  const eps = b.num("layer_norm_epsilon", 1e-5);
  const headDim = hidden / heads;
  if (c.num_heads_kv != null && c.num_heads_kv !== heads) throw new ModelLoadError(`NomicBERT num_heads_kv ${String(c.num_heads_kv)} is not built (only n_head)`);
  const rotaryDim = headDim * b.num("rotary_emb_fraction", 0);
  if (!Number.isInteger(rotaryDim) || rotaryDim % 2) throw new ModelLoadError(`rotary_emb_fraction gives a rotary dimension ${rotaryDim}, not an even integer`);
  const act = String(c.activation_function ?? "gelu_new");
  const gated = ["swiglu", "geglu", "glu"].includes(act);
  if (!gated && !["gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh"].includes(act)) throw new ModelLoadError(`NomicBERT activation_function ${act} is not built`);

  const types = b.has("embeddings.token_type_embeddings.weight");
  const inputs = textInputs(g, { tokenTypes: types });
  const positions = maskPositions(g, inputs.mask);
  let h = embed(b, inputs.ids, "embeddings.word_embeddings");
  if (types) h = g.op("Add", [h, embed(b, inputs.types!, "embeddings.token_type_embeddings")]);
  if (rotaryDim === 0) h = g.op("Add", [h, embed(b, positions, "embeddings.position_embeddings")]);
  h = b.layerNorm(h, "emb_ln", eps);

  const bias = attentionBias(g, inputs.mask);
  // from_pretrained makes n_positions 2048 when it is not positive and the model is rotary
  const maxPositions = b.num("n_positions", 0) > 0 ? b.num("n_positions") : 2048;
  const cache = rotaryDim ? rotaryCache(b, b.num("rotary_emb_base", 10_000), rotaryDim, maxPositions) : null;
  const rotate = (x: string) =>
    g.op("RotaryEmbedding", [x, positions, cache!.cos, cache!.sin], { num_heads: heads, rotary_embedding_dim: rotaryDim, interleaved: c.rotary_emb_interleaved ? 1 : 0 }, "ms");
  // Linear without its bias, the bias (when there is one) added with the residual (Builder.skipLayerNorm)
  const project = (x: string, n: string) => ({ y: b.matmul(x, `${n}`), bias: b.has(`${n}.bias`) ? b.tensor(`${n}.bias`) : undefined });

  for (let i = 0; i < layers; i++) {
    const p = `encoder.layers.${i}`;
    let [q, k, v] = g.opN("Split", [b.linear(h, `${p}.attn.Wqkv`), g.constInt([hidden, hidden, hidden])], 3, { axis: -1 });
    if (cache) [q, k] = [rotate(q!), rotate(k!)];
    const attn = project(multiHeadAttention(b, q!, k!, v!, heads, heads, headDim, bias), `${p}.attn.out_proj`);
    h = b.skipLayerNorm(attn.y, h, `${p}.norm1`, eps, attn.bias);
    let inner: string;
    if (gated) {
      // y = fc11(x) * act(fc12(x)); glu's act is sigmoid, geglu's exact GELU
      const [y, gate] = b.linears(h, [`${p}.mlp.fc11`, `${p}.mlp.fc12`]);
      inner = g.op("Mul", [y!, act === "glu" ? g.op("Sigmoid", [gate!]) : b.activation(gate!, act === "swiglu" ? "silu" : "gelu")]);
    } else {
      // the remote code applies F.gelu (exact) whatever the gelu variant's name
      inner = b.activation(b.linear(h, `${p}.mlp.fc1`), "gelu");
    }
    const mlp = project(inner, `${p}.mlp.fc2`);
    h = b.skipLayerNorm(mlp.y, h, `${p}.norm2`, eps, mlp.bias);
  }
  return { hidden: h };
}

export const nomic: Architecture = {
  architectures: ["NomicBertModel"],
  modelTypes: ["nomic_bert"],
  build(b) {
    // A BertModel's weights saved under a nomic_bert config.json (test/fixtures/models/nomic-embed is one): built as BERT
    if (!b.w.has("emb_ln.weight") && b.w.has("encoder.layer.0.attention.self.query.weight")) {
      const c = b.config;
      return bert.build(new Builder(b.g, b.w, { ...c, num_attention_heads: c.n_head, num_hidden_layers: c.n_layer, layer_norm_eps: c.layer_norm_epsilon, hidden_act: "gelu" }, b.quant));
    }
    return buildNomic(b);
  },
};
