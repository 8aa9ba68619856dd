// Dense text embedders: pooled (or the export's sentence_embedding), with the Dense modules applied after pooling,
// and their per-token states (/embed_all) on the same session where the export gives them.
import type { ModelLayout } from "../../model/layout";
import { readDenseLayers, type DenseLayer } from "../../model/dense";
import { TOKEN_STATE_OUTPUTS, tokenStatesOutput } from "../../model/onnx-graph";
import { embedReader } from "../../tasks/embed";
import { tokenStatesReader } from "../../tasks/token-states";
import type { TokenStates } from "../served";
import type { Family } from "./family";

/**
 * The Dense modules the server applies after pooling: none when the export has a sentence_embedding output (the
 * sentence-transformers pipeline is inside the graph), else every Dense module's weights, read from its folder.
 */
export function denseHead(layout: ModelLayout, session: { outputNames: readonly string[] }): DenseLayer[] {
  if (!layout.dense.length || session.outputNames.includes("sentence_embedding")) return [];
  return readDenseLayers(layout.dir, layout.dense);
}

export const embedFamily: Family = {
  name: "embed",
  serves: (layout) => layout.task === "embed",
  async build({ layout, session, base, engine, sessionBytes }) {
    const bytes = sessionBytes();
    // Per-token states come from the same session, on their own engine (their results are matrices).
    const tokens: TokenStates = tokenStatesOutput(session.outputNames)
      ? engine(tokenStatesReader)
      : `its ONNX export gives only pooled outputs (${session.outputNames.join(", ")}), no per-token ${TOKEN_STATE_OUTPUTS.join(" / ")}`;
    return { ...base, memoryBytes: bytes, sessionBytes: bytes, task: "embed", engine: engine(embedReader(layout.pooling, undefined, denseHead(layout, session))), media: null, tokens };
  },
};
