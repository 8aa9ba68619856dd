// SPLADE sparse encoders, and inference-free ones whose queries take static per-token weights without a model run
// (a sentence-transformers Router's SparseStaticEmbedding, or the older OpenSearch layout's idf.json).
import { join } from "node:path";
import { ModelLoadError } from "../../errors";
import type { ModelLayout } from "../../model/layout";
import { readSafetensors } from "../../model/safetensors";
import { idfTable, specialTokenIds, spladeReader, staticSparse } from "../../tasks/sparse";
import { Encoder } from "../../tokenize/encode";
import type { SparseQuery } from "../served";
import type { Family } from "./family";

/**
 * SparseStaticEmbedding (or the older layout's idf.json): the query tokenizer (no special tokens, cut to its max
 * length) and the weight table.
 */
async function sparseQueryOf(layout: ModelLayout, idfMissingWeight: number): Promise<SparseQuery | null> {
  const q = layout.sparse?.query;
  if (!q) return null;
  const encoder = await Encoder.create(q.tokenizerJson, q.tokenizerConfig, q.maxLength);
  const table = q.idf ? idfTable(q.idf, (t) => encoder.tokenId(t), encoder.vocabSize, idfMissingWeight) : staticWeights(layout.dir, q.path);
  return {
    async encode(texts) {
      const ids = await Promise.all(texts.map(async (t) => (await encoder.tokens(t, false)).slice(0, q.maxLength).map((x) => x.id)));
      return { vectors: ids.map((x) => staticSparse(x, table)), tokens: ids.map((x) => x.length) };
    },
  };
}

/** A SparseStaticEmbedding module's per-token weights: its model.safetensors `weight`. */
function staticWeights(dir: string, path: string): Float32Array {
  const file = join(dir, path, "model.safetensors");
  let weight;
  try {
    weight = readSafetensors(file).get("weight");
  } catch (e) {
    throw new ModelLoadError(`the query module ${path} of this inference-free sparse model needs its weights in ${path}/model.safetensors: ${(e as Error).message}`);
  }
  if (!weight || weight.shape.length !== 1) throw new ModelLoadError(`${path}/model.safetensors has no 1-dimensional \`weight\` (the per-token query weights)`);
  return weight.data;
}

export const sparseFamily: Family = {
  name: "sparse",
  serves: (layout) => layout.task === "sparse",
  async build({ config: c, layout, encoder, base, engine, sessionBytes }) {
    const bytes = sessionBytes();
    // The older OpenSearch layout's documents leave out the special tokens, as its model card does.
    const drop = layout.sparse!.dropSpecialTokens ? specialTokenIds(layout.tokenizerConfig, (t) => encoder.tokenId(t)) : new Set<number>();
    return { ...base, memoryBytes: bytes, sessionBytes: bytes, task: "sparse", engine: engine(spladeReader(layout.sparse!, drop)), sparseQuery: await sparseQueryOf(layout, c.idfMissingWeight) };
  },
};
