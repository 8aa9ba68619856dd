// BERT, RoBERTa and XLM-RoBERTa encoders (post-LayerNorm, absolute positions), their base models, their
// sequence-classification heads (BERT's pooler + classifier, RoBERTa's dense + tanh + out_proj), BERT's masked-LM
// head (SPLADE sparse encoders) and Stanford ColBERT's projection.
import { ModelLoadError } from "../../errors";
import { ACTIVATIONS, arangePositions, bertSublayers, Builder, embed, fusedSelfAttention, maskedLmHead, maskIndex, postNormSublayers, textInputs } from "./blocks";
import type { Architecture, Built } from "./architecture";

/** BERT-style embeddings, encoder layers and heads; `roberta`: positions counted from padding_idx + 1. */
function buildBertLike(b: Builder, roberta: boolean): { hidden: string; table: string; act: string; eps: number } {
  const g = b.g;
  b.usePrefix("embeddings.word_embeddings.weight", ["bert.", "roberta.", "model."]);
  const eps = b.num("layer_norm_eps", 1e-12);
  const heads = b.num("num_attention_heads");
  const layers = b.num("num_hidden_layers");
  const act = String(b.config.hidden_act ?? "gelu");
  if (b.config.position_embedding_type !== undefined && b.config.position_embedding_type !== "absolute") {
    throw new ModelLoadError(`position_embedding_type ${String(b.config.position_embedding_type)} is not built (only absolute)`);
  }
  const types = b.has("embeddings.token_type_embeddings.weight");
  const inputs = textInputs(g, { tokenTypes: types });

  let positions: string;
  if (roberta) {
    // create_position_ids_from_input_ids: padding_idx + cumsum(ids != pad) for real tokens, padding_idx for pads.
    const pad = b.num("pad_token_id", 1);
    const real = g.op("Cast", [g.op("Not", [g.op("Equal", [inputs.ids, g.constInt(pad)])])], { to: 7 });
    positions = g.op("Add", [g.op("Mul", [g.op("CumSum", [real, g.constInt(1)]), real]), g.constInt(pad)]);
  } else {
    positions = arangePositions(g, inputs.ids);
  }
  const table = b.tensor("embeddings.word_embeddings.weight");
  let h = g.op("Add", [g.op("Gather", [table, inputs.ids]), embed(b, positions, "embeddings.position_embeddings")]);
  if (types) h = g.op("Add", [h, embed(b, inputs.types!, "embeddings.token_type_embeddings")]);
  h = b.layerNorm(h, "embeddings.LayerNorm", eps);

  const mask = maskIndex(g, inputs.mask);
  for (let i = 0; i < layers; i++) {
    const p = `encoder.layer.${i}`;
    const ctx = fusedSelfAttention(b, h, { q: `${p}.attention.self.query`, k: `${p}.attention.self.key`, v: `${p}.attention.self.value` }, heads, mask);
    h = postNormSublayers(b, h, ctx, bertSublayers(p), act, eps);
  }
  return { hidden: h, table, act, eps };
}

/**
 * `--graph auto` builds these in preference to an export: on bge-small's shape the built graph ran 1.03x (1 thread)
 * and 1.09x (2 threads) the export's throughput within 2.4e-6, with 508 instead of 697 MiB resident
 * (bench/built-graph.ts). Only for configs this file builds: absolute positions, an activation the builder writes,
 * and no remote code (auto_map: its modeling file may differ from transformers' classes).
 */
function preferred(config: Record<string, unknown>): boolean {
  const positions = config.position_embedding_type;
  return config.auto_map === undefined && (positions === undefined || positions === "absolute") && (ACTIVATIONS as readonly string[]).includes(String(config.hidden_act ?? "gelu"));
}

/** The first token's state, [B, H]. */
function firstToken(b: Builder, h: string): string {
  const g = b.g;
  return g.op("Squeeze", [g.op("Slice", [h, g.constInt([0]), g.constInt([1]), g.constInt([1])]), g.constInt([1])]);
}

export const bert: Architecture = {
  architectures: ["BertModel", "BertForSequenceClassification", "BertForMaskedLM", "HF_ColBERT"],
  modelTypes: ["bert"],
  preferred,
  build(b) {
    const { hidden, table, act, eps } = buildBertLike(b, false);
    if (b.declares("HF_ColBERT")) {
      // Stanford ColBERT: BertModel under bert. and its projection `linear` (no bias) at the top.
      if (!b.w.has("linear.weight")) throw new ModelLoadError("an HF_ColBERT checkpoint needs its projection linear.weight beside the bert.* weights; these weights have none");
      return { hidden, contextual: b.linear(hidden, "linear", { top: true }) };
    }
    if (b.declares("BertForMaskedLM")) {
      const p = "cls.predictions";
      const head = { dense: `${p}.transform.dense`, norm: `${p}.transform.LayerNorm`, decoder: `${p}.decoder`, bias: [`${p}.bias`, `${p}.decoder.bias`] };
      return { hidden, logits: maskedLmHead(b, hidden, table, head, act, eps), tokenLogits: true };
    }
    if (!b.w.has("classifier.weight")) return { hidden };
    // BertForSequenceClassification: classifier(tanh(pooler(h[:, 0]))).
    const pooled = b.activation(b.linear(firstToken(b, hidden), "pooler.dense"), "tanh");
    return { hidden, logits: b.linear(pooled, "classifier", { top: true }) };
  },
};

export const roberta: Architecture = {
  architectures: ["RobertaModel", "XLMRobertaModel", "RobertaForSequenceClassification", "XLMRobertaForSequenceClassification"],
  modelTypes: ["roberta", "xlm-roberta"],
  preferred,
  build(b) {
    const { hidden } = buildBertLike(b, true);
    if (!b.w.has("classifier.out_proj.weight")) return { hidden };
    // RobertaClassificationHead: out_proj(tanh(dense(h[:, 0]))).
    const x = b.activation(b.linear(firstToken(b, hidden), "classifier.dense", { top: true }), "tanh");
    return { hidden, logits: b.linear(x, "classifier.out_proj", { top: true }) };
  },
};
