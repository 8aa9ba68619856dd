// DeBERTa-v2 / v3 encoders (DebertaV2Model) and their sequence-classification head (ContextPooler + classifier):
// disentangled attention, content->position (c2p) and position->content (p2c) terms over log-bucketed relative
// positions, written with standard ONNX ops so every step mirrors transformers' float32 arithmetic.
import { ModelLoadError } from "../../errors";
import { arangePositions, bertSublayers, embed, postNormSublayers, textInputs, type Builder } from "./blocks";
import type { Architecture, Built } from "./architecture";
import { ElemType } from "./graph";

const FLOAT32_MIN = -3.4028234663852886e38;

/** config.pos_att_type as a list (older configs write "p2c|c2p"); refuses terms other than c2p / p2c. */
function posAttTypes(config: Record<string, unknown>): string[] {
  const raw = config.pos_att_type;
  const list = raw === undefined || raw === null ? [] : typeof raw === "string" ? raw.toLowerCase().split("|").map((x) => x.trim()) : Array.isArray(raw) ? raw.map(String) : null;
  if (!list || list.some((t) => t !== "c2p" && t !== "p2c")) throw new ModelLoadError(`pos_att_type ${JSON.stringify(raw)} is not built (only c2p and p2c)`);
  return list;
}

/** make_log_bucket_position for one relative position, in transformers' float32 arithmetic. */
function logBucket(r: number, buckets: number, maxPosition: number): number {
  const f = Math.fround;
  const mid = Math.floor(buckets / 2);
  const abs = r < mid && r > -mid ? mid - 1 : Math.abs(r);
  if (abs <= mid) return r;
  return (Math.ceil(f(f(f(Math.log(f(abs / mid))) / f(Math.log(f((maxPosition - 1) / mid)))) * (mid - 1))) + mid) * Math.sign(r);
}

/**
 * Relative positions i - j as an int64 [S, S] tensor, log-bucketed when buckets and maxPosition are set: looked up in
 * a table over [-maxPosition, maxPosition] (further positions bucket past the embedding span, so clamp the same).
 */
function relativePositions(b: Builder, like: string, buckets: number, maxPosition: number): string {
  const g = b.g;
  const pos = g.op("Squeeze", [arangePositions(g, like), g.constInt([0])]); // [S]
  const rel = g.op("Sub", [g.op("Unsqueeze", [pos, g.constInt([1])]), g.op("Unsqueeze", [pos, g.constInt([0])])]);
  if (!(buckets > 0 && maxPosition > 0)) return rel;
  const mid = Math.floor(buckets / 2);
  if (mid < 1 || maxPosition - 1 <= mid) throw new ModelLoadError(`max_relative_positions ${maxPosition} with position_buckets ${buckets} is not built (needs max_relative_positions - 1 > position_buckets / 2)`);
  const table = Array.from({ length: 2 * maxPosition + 1 }, (_, i) => logBucket(i - maxPosition, buckets, maxPosition));
  const at = g.op("Add", [g.op("Clip", [rel, g.constInt(-maxPosition), g.constInt(maxPosition)]), g.constInt(maxPosition)]);
  return g.op("Gather", [g.constInt(table), at], { axis: 0 });
}

/** [B, S, N*D] -> [B, N, S, D] (or, `keysLast`, [B, N, D, S]). */
function heads(b: Builder, x: string, n: number, keysLast = false): string {
  const g = b.g;
  return g.op("Transpose", [g.op("Reshape", [x, g.constInt([0, 0, n, -1])])], { perm: keysLast ? [0, 2, 3, 1] : [0, 2, 1, 3] });
}

interface Rel {
  /** LayerNorm'd relative embeddings [1, 2A, H]. */
  emb: string;
  /** [B, N, S, S] gather indices for c2p and p2c. */
  c2p: string;
  p2c: string;
}

/** One DisentangledSelfAttention: context [B, S, N*D]. `allowed`: [B, 1, S, S] bool. */
function attention(b: Builder, h: string, p: string, n: number, allowed: string, types: string[], shareKey: boolean, rel: Rel | null): string {
  const g = b.g;
  const headDim = b.w.shape(b.name(`${p}.query_proj.weight`))[0]! / n;
  const scale = g.constFloat(Math.fround(Math.sqrt(headDim * (1 + types.length))));
  // The shared-key relative projections reuse the query / key Linears (their weights written once by the builder).
  const linear = (x: string, name: string) => b.linear(x, name);
  const q = heads(b, linear(h, `${p}.query_proj`), n);
  const kProj = linear(h, `${p}.key_proj`);
  const v = heads(b, linear(h, `${p}.value_proj`), n);
  // bmm(q, k^T / scale)
  let scores = g.op("MatMul", [q, g.op("Div", [heads(b, kProj, n, true), scale])]);
  if (rel) {
    let score: string | null = null;
    if (types.includes("c2p")) {
      const posKey = heads(b, linear(rel.emb, shareKey ? `${p}.key_proj` : `${p}.pos_key_proj`), n, true); // [1,N,D,2A]
      const c2p = g.op("GatherElements", [g.op("MatMul", [q, posKey]), rel.c2p], { axis: -1 });
      score = g.op("Div", [c2p, scale]);
    }
    if (types.includes("p2c")) {
      const posQuery = heads(b, linear(rel.emb, shareKey ? `${p}.query_proj` : `${p}.pos_query_proj`), n, true);
      const p2cAtt = g.op("GatherElements", [g.op("MatMul", [heads(b, kProj, n), posQuery]), rel.p2c], { axis: -1 });
      const p2c = g.op("Div", [g.op("Transpose", [p2cAtt], { perm: [0, 1, 3, 2] }), scale]);
      score = score ? g.op("Add", [score, p2c]) : p2c;
    }
    if (score) scores = g.op("Add", [scores, score]);
  }
  // masked_fill(~mask, finfo.min) then softmax: padded keys get weight 0, a padded query row is uniform.
  const probs = g.op("Softmax", [g.op("Where", [allowed, scores, g.constFloat(FLOAT32_MIN)])], { axis: -1 });
  const ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], { perm: [0, 2, 1, 3] });
  return g.op("Reshape", [ctx, g.constInt([0, 0, -1])]);
}

function buildDeberta(b: Builder): Built {
  const g = b.g;
  const c = b.config;
  b.usePrefix("embeddings.word_embeddings.weight", ["deberta."]);
  if (b.num("conv_kernel_size", 0) > 0) throw new ModelLoadError("conv_kernel_size is not built (DeBERTa's ConvLayer)");
  const eps = b.num("layer_norm_eps", 1e-7);
  const n = b.num("num_attention_heads");
  const layers = b.num("num_hidden_layers");
  const act = String(c.hidden_act ?? "gelu");
  const types = posAttTypes(c);
  const relative = c.relative_attention === true;
  const shareKey = c.share_att_key === true;
  const normRel = String(c.norm_rel_ebd ?? "none").toLowerCase().split("|").map((x) => x.trim());
  if (normRel.some((x) => x !== "none" && x !== "layer_norm")) throw new ModelLoadError(`norm_rel_ebd ${String(c.norm_rel_ebd)} is not built (only layer_norm or none)`);
  const tokenTypes = b.num("type_vocab_size", 0) > 0;
  const inputs = textInputs(g, { tokenTypes });
  const mask = inputs.mask;

  // Embeddings: words (+ absolute positions, + token types), embed_proj, LayerNorm, then zeroed at padding.
  let h = embed(b, inputs.ids, "embeddings.word_embeddings");
  if (c.position_biased_input !== false) h = g.op("Add", [h, embed(b, arangePositions(g, inputs.ids), "embeddings.position_embeddings")]);
  if (tokenTypes) h = g.op("Add", [h, embed(b, inputs.types!, "embeddings.token_type_embeddings")]);
  if (b.has("embeddings.embed_proj.weight")) h = b.linear(h, "embeddings.embed_proj");
  h = b.layerNorm(h, "embeddings.LayerNorm", eps);
  h = g.op("Mul", [h, g.op("Cast", [g.op("Unsqueeze", [mask, g.constInt([2])])], { to: ElemType.float })]);

  // allowed[b, 1, i, j] = mask[b, i] && mask[b, j] (get_attention_mask).
  const m = g.op("Not", [g.op("Equal", [mask, g.constInt(0)])]);
  const allowed = g.op("And", [g.op("Unsqueeze", [m, g.constInt([1, 3])]), g.op("Unsqueeze", [m, g.constInt([1, 2])])]);

  let rel: Rel | null = null;
  if (relative) {
    let maxRel = b.num("max_relative_positions", -1);
    if (maxRel < 1) maxRel = b.num("max_position_embeddings");
    const buckets = b.num("position_buckets", -1);
    const span = buckets > 0 ? buckets : maxRel;
    let emb = g.op("Unsqueeze", [b.tensor("encoder.rel_embeddings.weight"), g.constInt([0])]);
    emb = g.op("Slice", [emb, g.constInt([0]), g.constInt([span * 2]), g.constInt([1])]);
    if (normRel.includes("layer_norm")) emb = b.layerNorm(emb, "encoder.LayerNorm", eps);
    const relPos = relativePositions(b, inputs.ids, buckets, maxRel);
    // [B, N, S, S]: index i, j into the 2A relative embeddings; p2c gathers row j (the key), column i.
    const shape = g.op("Concat", [g.op("Shape", [mask], { end: 1 }), g.constInt([n]), g.op("Shape", [relPos])], { axis: 0 });
    const index = (r: string) => g.op("Expand", [g.op("Clip", [g.op("Add", [r, g.constInt(span)]), g.constInt(0), g.constInt(span * 2 - 1)]), shape]);
    rel = { emb, c2p: index(relPos), p2c: index(g.op("Neg", [relPos])) };
  }

  for (let i = 0; i < layers; i++) {
    const p = `encoder.layer.${i}`;
    const ctx = attention(b, h, `${p}.attention.self`, n, allowed, types, shareKey, rel);
    h = postNormSublayers(b, h, ctx, bertSublayers(p), act, eps);
  }
  return { hidden: h };
}

export const deberta: Architecture = {
  architectures: ["DebertaV2Model", "DebertaV2ForSequenceClassification"],
  modelTypes: ["deberta-v2"],
  build(b) {
    const { hidden } = buildDeberta(b);
    if (!b.w.has("classifier.weight")) return { hidden };
    // ContextPooler: act(dense(h[:, 0])), then classifier.
    const g = b.g;
    const first = g.op("Squeeze", [g.op("Slice", [hidden, g.constInt([0]), g.constInt([1]), g.constInt([1])]), g.constInt([1])]);
    const pooled = b.activation(b.linear(first, "pooler.dense", { top: true }), String(b.config.pooler_hidden_act ?? "gelu"));
    return { hidden, logits: b.linear(pooled, "classifier", { top: true }) };
  },
};
