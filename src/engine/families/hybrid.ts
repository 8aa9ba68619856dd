// bge-m3-style hybrid encoders: dense, lexical weights and multi-vectors from one run. BAAI's layout runs its
// pickled sparse / ColBERT heads in the inference worker, on the token states.
import { readPickledHeads } from "../../model/dense";
import { hybridBatches, hybridRunner, pickledHeadsHead, unusedTokenIds, type HybridBatch, type HybridInput, type HybridResult } from "../../tasks/hybrid";
import { Engine } from "../engine";
import type { Family } from "./family";

export const hybridFamily: Family = {
  name: "hybrid",
  serves: (layout) => layout.task === "hybrid",
  async prepare({ layout }) {
    const pickled = layout.hybrid?.format === "hidden" ? readPickledHeads(layout.dir, layout.hybrid.pickledHeads, layout.hiddenSize) : null;
    return { head: pickled ? pickledHeadsHead(layout.hybrid!, pickled) : undefined };
  },
  async build({ layout, key, encoder, session, padId, base, limits, metrics, each, sessionBytes }) {
    const bytes = sessionBytes();
    const hybrid = { layout: layout.hybrid!, unused: unusedTokenIds(layout.tokenizerConfig, (t) => encoder.tokenId(t)) };
    const runner = hybridRunner(session, hybrid.layout, layout.pooling, hybrid.unused);
    const engine = new Engine<HybridResult, HybridInput, HybridBatch>(key, each(runner), hybridBatches(padId, layout.paddingSide), limits, metrics);
    return { ...base, memoryBytes: bytes, sessionBytes: bytes, task: "hybrid", engine, hybrid };
  },
  warmUp: {
    // Every output asked for, so warm-up runs what the heaviest request runs.
    inputs: async (m, texts) => (await m.encode(texts)).map((e) => ({ ...e, sparse: true, multiVector: true })),
  },
};
