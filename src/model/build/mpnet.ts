// MPNet (MPNetModel): a BERT-shaped post-LayerNorm encoder without token types, positions counted from padding_idx
// as RoBERTa's, and a T5-style relative position bias (bidirectional buckets) computed once, shared by every layer
// and added to the scaled attention scores.
import { ModelLoadError } from "../../errors";
import { arangePositions, bertSublayers, Builder, embed, fusedSelfAttention, maskIndex, postNormSublayers, textInputs } from "./blocks";
import type { Architecture } from "./architecture";
import { ElemType } from "./graph";

/** MPNetEmbeddings.padding_idx: transformers fixes it at 1, whatever config pad_token_id says. */
const PADDING_IDX = 1;
/** MPNetEncoder.compute_position_bias calls relative_position_bucket with its defaults, whatever the config says. */
const NUM_BUCKETS = 32;
const MAX_DISTANCE = 128;

/**
 * MPNetEncoder.relative_position_bucket for n = query - key position: half the buckets per direction (keys after
 * the query in the upper half), exact below a quarter, logarithmic up to MAX_DISTANCE, the last bucket after. The
 * logarithm as torch computes it, in float32.
 */
export function relativePositionBucket(n: number): number {
  const half = NUM_BUCKETS / 2;
  const maxExact = half / 2;
  let ret = n < 0 ? half : 0;
  const a = Math.abs(n);
  if (a < maxExact) return ret + a;
  const fr = Math.fround;
  const scaled = fr(fr(fr(Math.log(fr(a / maxExact))) / fr(Math.log(MAX_DISTANCE / maxExact))) * (half - maxExact));
  ret += Math.min(maxExact + Math.trunc(scaled), half - 1);
  return ret;
}

/**
 * The additive bias [1, heads, S, S]: for query i and key j, relative_attention_bias[bucket(i - j)]. Every distance
 * past MAX_DISTANCE falls in the last bucket, so i - j is clipped to +-MAX_DISTANCE and indexes a table of the
 * 2 * MAX_DISTANCE + 1 bias rows, written at build time.
 */
function relativeBias(b: Builder, like: string, heads: number): string {
  const g = b.g;
  const name = "encoder.relative_attention_bias.weight";
  const [buckets, n] = b.w.shape(b.name(name)) as [number, number];
  if (n !== heads) throw new ModelLoadError(`${name} has ${n} heads, num_attention_heads is ${heads}`);
  if (buckets < NUM_BUCKETS) throw new ModelLoadError(`${name} has ${buckets} buckets; MPNet's relative positions use ${NUM_BUCKETS}`);
  const weight = b.w.float(b.name(name));
  const rows = 2 * MAX_DISTANCE + 1;
  const table = new Float32Array(rows * heads);
  for (let r = 0; r < rows; r++) {
    const bucket = relativePositionBucket(r - MAX_DISTANCE);
    table.set(weight.subarray(bucket * heads, (bucket + 1) * heads), r * heads);
  }
  const byDistance = g.weight(b.name("encoder.relative_attention_bias.by_distance"), table, [rows, heads]);

  const pos = g.op("Squeeze", [arangePositions(g, like), g.constInt([0])]); // [S]
  const diff = g.op("Sub", [g.op("Unsqueeze", [pos, g.constInt([1])]), g.op("Unsqueeze", [pos, g.constInt([0])])]); // i - j
  const index = g.op("Add", [g.op("Clip", [diff, g.constInt(-MAX_DISTANCE), g.constInt(MAX_DISTANCE)]), g.constInt(MAX_DISTANCE)]);
  const values = g.op("Gather", [byDistance, index]); // [S, S, heads]
  return g.op("Unsqueeze", [g.op("Transpose", [values], { perm: [2, 0, 1] }), g.constInt([0])]);
}

export const mpnet: Architecture = {
  architectures: ["MPNetModel"],
  modelTypes: ["mpnet"],
  build(b) {
    const g = b.g;
    b.usePrefix("embeddings.word_embeddings.weight", ["mpnet."]);
    const eps = b.num("layer_norm_eps", 1e-12);
    const heads = b.num("num_attention_heads");
    const layers = b.num("num_hidden_layers");
    const act = String(b.config.hidden_act ?? "gelu");
    const inputs = textInputs(g);

    // create_position_ids_from_input_ids: padding_idx + cumsum(ids != pad) for real tokens, padding_idx for pads.
    const real = g.op("Cast", [g.op("Not", [g.op("Equal", [inputs.ids, g.constInt(PADDING_IDX)])])], { to: ElemType.int64 });
    const positions = g.op("Add", [g.op("Mul", [g.op("CumSum", [real, g.constInt(1)]), real]), g.constInt(PADDING_IDX)]);
    let h = g.op("Add", [embed(b, inputs.ids, "embeddings.word_embeddings"), embed(b, positions, "embeddings.position_embeddings")]);
    h = b.layerNorm(h, "embeddings.LayerNorm", eps);

    const mask = maskIndex(g, inputs.mask);
    const bias = relativeBias(b, inputs.ids, heads);
    for (let i = 0; i < layers; i++) {
      const p = `encoder.layer.${i}`;
      const a = `${p}.attention.attn`;
      const ctx = fusedSelfAttention(b, h, { q: `${a}.q`, k: `${a}.k`, v: `${a}.v` }, heads, mask, bias);
      h = postNormSublayers(b, h, ctx, { ...bertSublayers(p), out: `${a}.o`, outNorm: `${p}.attention.LayerNorm` }, act, eps);
    }
    return { hidden: h };
  },
};
