// ColBERT (late-interaction) encoders: queries and documents as one vector per token, a prefix token inserted after
// tokenizing; PyLate's Dense projection runs in the inference worker right after the model.
import { resolve } from "node:path";
import { readDenseLayers, type DenseLayer } from "../../model/dense";
import { onnxOutputNames } from "../../model/onnx-graph";
import { colbertHead, colbertInput, colbertTokens, multiVectorBatches, multiVectorRunner, multiVectorTokenizeLength, type MultiVector, type MultiVectorBatch, type MultiVectorInput } from "../../tasks/multivector";
import { Engine } from "../engine";
import type { ColbertModel, ServedModel } from "../served";
import type { Family, FamilyPlan } from "./family";

interface ColbertPlan extends FamilyPlan {
  /** PyLate's 1_Dense layers (the worker's head); none where a Stanford-style graph projects inside. */
  dense: DenseLayer[];
}

export const colbertFamily: Family<ColbertPlan, Extract<ServedModel, { colbert: ColbertModel }>> = {
  name: "colbert",
  serves: (layout) => layout.task === "multivector" && !layout.colpali,
  // ColBERT inserts a prefix token after tokenizing: the tokenizer truncates one token shorter.
  tokenizeLength: (layout) => multiVectorTokenizeLength(layout.multivector!),
  async prepare({ layout }) {
    const dense = layout.multivector?.densePath != null ? readDenseLayers(layout.dir, layout.dense) : [];
    return { dense, head: dense.length ? colbertHead(onnxOutputNames(resolve(layout.dir, layout.onnxFile)), dense) : undefined };
  },
  async build({ layout, key, encoder, plan, session, padId, base, limits, metrics, each, sessionBytes }) {
    const bytes = sessionBytes();
    const cfg = layout.multivector!;
    const dense = plan.dense;
    const tokens = colbertTokens(cfg, (t) => encoder.tokenId(t), encoder.singleSpecials, layout.tokenizerConfig);
    const engine = new Engine<MultiVector, MultiVectorInput, MultiVectorBatch>(key, each(multiVectorRunner(session)), multiVectorBatches(padId), limits, metrics);
    return {
      ...base, memoryBytes: bytes, sessionBytes: bytes, task: "multivector", engine,
      colbert: { layout: cfg, tokens, dim: dense.length ? dense[dense.length - 1]!.outFeatures : null }, colpali: null,
    };
  },
  warmUp: {
    inputs: async (m, texts) => (await m.encode(texts)).map((e) => colbertInput(e, "document", m.colbert.layout, m.colbert.tokens)),
  },
};
