// DistilBERT (DistilBertModel, and DistilBertForMaskedLM's head for SPLADE-style sparse encoders): BERT's post-LayerNorm encoder without token types, with learned absolute positions
// from 0 and its own names (q_lin / k_lin / v_lin / out_lin, sa_layer_norm, ffn.lin1 / lin2, output_layer_norm).
// transformers builds every DistilBERT LayerNorm with eps 1e-12 whatever the config says, and reads the FFN's
// activation from config `activation`.
import { ModelLoadError } from "../../errors";
import { arangePositions, Builder, fusedSelfAttention, maskedLmHead, maskIndex, textInputs } from "./blocks";
import type { Architecture } from "./architecture";

const EPS = 1e-12;

/**
 * The position table: the stored one (a `sinusoidal_pos_embds` model stores its sinusoids as the weight, and
 * transformers uses the stored values), else, for `sinusoidal_pos_embds`, the table transformers initialises:
 * sin / cos of pos / 10000^(2*(j//2)/dim) on the even / odd columns.
 */
function positionTable(b: Builder, dim: number): string {
  if (b.has("embeddings.position_embeddings.weight")) return b.tensor("embeddings.position_embeddings.weight");
  if (b.config.sinusoidal_pos_embds !== true) throw new ModelLoadError("the weights have no embeddings.position_embeddings.weight (and the config does not ask for sinusoidal_pos_embds)");
  const n = b.num("max_position_embeddings");
  const table = new Float32Array(n * dim);
  for (let pos = 0; pos < n; pos++) {
    for (let j = 0; j < dim; j++) {
      const angle = pos / 10000 ** ((2 * Math.floor(j / 2)) / dim);
      table[pos * dim + j] = j % 2 === 0 ? Math.sin(angle) : Math.cos(angle);
    }
  }
  return b.g.weight(b.name("embeddings.position_embeddings.sinusoidal"), table, [n, dim]);
}

export const distilbert: Architecture = {
  architectures: ["DistilBertModel", "DistilBertForMaskedLM"],
  modelTypes: ["distilbert"],
  build(b) {
    const g = b.g;
    b.usePrefix("embeddings.word_embeddings.weight", ["distilbert."]);
    const alias = (key: string) => (typeof b.config[key] === "number" ? (b.config[key] as number) : undefined);
    const heads = b.num("n_heads", alias("num_attention_heads"));
    const layers = b.num("n_layers", alias("num_hidden_layers"));
    const dim = b.w.shape(b.name("embeddings.word_embeddings.weight"))[1]!;
    const act = String(b.config.activation ?? "gelu");
    const inputs = textInputs(g);

    const positions = arangePositions(g, inputs.ids);
    const table = b.tensor("embeddings.word_embeddings.weight");
    let h = g.op("Add", [g.op("Gather", [table, inputs.ids]), g.op("Gather", [positionTable(b, dim), positions])]);
    h = b.layerNorm(h, "embeddings.LayerNorm", EPS);

    const mask = maskIndex(g, inputs.mask);
    for (let i = 0; i < layers; i++) {
      const p = `transformer.layer.${i}`;
      const ctx = fusedSelfAttention(b, h, { q: `${p}.attention.q_lin`, k: `${p}.attention.k_lin`, v: `${p}.attention.v_lin` }, heads, mask);
      const attnOut = b.matmul(ctx, `${p}.attention.out_lin`);
      h = b.skipLayerNorm(attnOut, h, `${p}.sa_layer_norm`, EPS, b.tensor(`${p}.attention.out_lin.bias`));
      const up = b.matmul(h, `${p}.ffn.lin1`);
      const upBias = b.tensor(`${p}.ffn.lin1.bias`);
      const inter = act === "gelu" ? g.op("BiasGelu", [up, upBias], {}, "ms") : b.activation(g.op("Add", [up, upBias]), act);
      const down = b.matmul(inter, `${p}.ffn.lin2`);
      h = b.skipLayerNorm(down, h, `${p}.output_layer_norm`, EPS, b.tensor(`${p}.ffn.lin2.bias`));
    }
    if (!b.declares("DistilBertForMaskedLM")) return { hidden: h };
    const head = { dense: "vocab_transform", norm: "vocab_layer_norm", decoder: "vocab_projector", bias: ["vocab_projector.bias"] };
    return { hidden: h, logits: maskedLmHead(b, h, table, head, act, EPS), tokenLogits: true };
  },
};
