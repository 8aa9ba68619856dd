// bge-m3-style hybrid encoders: which outputs serve dense, lexical and multi-vector results, told apart by the
// export's output names and the pickled heads beside it.
import { ModelLoadError } from "../errors";
import { TOKEN_STATE_OUTPUTS, tokenStatesOutput } from "./onnx-graph";

/**
 * bge-m3 (hybrid): dense, lexical weights and multi-vectors from one run. Either aapot/bge-m3-onnx's export (one graph
 * with outputs dense_vecs, sparse_vecs, colbert_vecs) or BAAI/bge-m3's layout: an encoder export giving the token
 * states (token_embeddings, or last_hidden_state) with the heads beside it as torch.save'd sparse_linear.pt /
 * colbert_linear.pt, which the server reads (model/torch-state-dict.ts) and runs as a head graph after the encoder.
 */
export interface HybridLayout {
  format: "heads" | "hidden";
  /** dense_vecs ([B, H]), or the token states (pooled by the model's pooling, CLS for bge-m3). */
  denseOutput: string;
  /** sparse_vecs [B, T, 1] (relu(sparse_linear(h))), or the head graph's; null when not served. */
  sparseOutput: string | null;
  /** colbert_vecs [B, T-1, H] (colbert_linear(h[:, 1:])), or the head graph's [B, T, C]; null when not served. */
  colbertOutput: string | null;
  /** BAAI's layout: the pickled heads' files, applied to the token states in the inference worker. */
  pickledHeads: { sparse: string | null; colbert: string | null };
  /** Why sparse or multi-vector outputs are not served, for the 400 a request for them gets. */
  unavailable: string | null;
}

/** BAAI's bge-m3 heads as pickled torch files (FlagEmbedding saves and loads them with torch.save / torch.load). */
export const PICKLED_M3_HEADS = ["sparse_linear.pt", "colbert_linear.pt"] as const;
/** The names the pickled heads' graph answers under (session head outputs, beside the encoder's). */
export const M3_HEAD_OUTPUTS = { sparse: "sparse_linear", colbert: "colbert_linear" } as const;

/**
 * Whether a model is a bge-m3-style hybrid encoder: its ONNX has aapot's dense_vecs output (sparse_vecs and
 * colbert_vecs served when present too), or its folder holds BAAI's pickled heads next to an encoder export (dense
 * from the pooled token states, lexical weights and multi-vectors through the heads). Pure: the output names are
 * read by the caller.
 */
export function hybridLayout(outputNames: readonly string[], files: readonly string[]): HybridLayout | null {
  if (outputNames.includes("dense_vecs")) {
    const sparseOutput = outputNames.includes("sparse_vecs") ? "sparse_vecs" : null;
    const colbertOutput = outputNames.includes("colbert_vecs") ? "colbert_vecs" : null;
    const lacking = [sparseOutput ? null : "sparse_vecs", colbertOutput ? null : "colbert_vecs"].filter((x) => x !== null);
    return {
      format: "heads",
      denseOutput: "dense_vecs",
      sparseOutput,
      colbertOutput,
      pickledHeads: { sparse: null, colbert: null },
      unavailable: lacking.length ? `its ONNX export has no ${lacking.join(" or ")} output` : null,
    };
  }
  const pickles = PICKLED_M3_HEADS.filter((f) => files.includes(f));
  if (!pickles.length) return null;
  // BAAI/bge-m3's onnx/model.onnx (sentence-transformers' export) gives token_embeddings and sentence_embedding.
  const states = tokenStatesOutput(outputNames);
  if (!states) {
    throw new ModelLoadError(`a bge-m3 checkpoint (${pickles.join(", ")}) needs an ONNX export with a ${TOKEN_STATE_OUTPUTS.join(", ")} or dense_vecs output; this one has ${outputNames.join(", ")}`);
  }
  const sparse = files.includes("sparse_linear.pt") ? "sparse_linear.pt" : null;
  const colbert = files.includes("colbert_linear.pt") ? "colbert_linear.pt" : null;
  return {
    format: "hidden",
    denseOutput: states,
    sparseOutput: sparse ? M3_HEAD_OUTPUTS.sparse : null,
    colbertOutput: colbert ? M3_HEAD_OUTPUTS.colbert : null,
    pickledHeads: { sparse, colbert },
    unavailable: sparse && colbert ? null : `its folder has no ${sparse ? "colbert_linear.pt" : "sparse_linear.pt"} beside the encoder`,
  };
}

/**
 * A bge-m3 encoder without a pooling config (Xenova/bge-m3 ships config.json, tokenizer and onnx/ only): BAAI/bge-m3's
 * XLMRobertaModel with 8194 positions (8192 tokens + the padding offset), and no Jina task adapters (jina-embeddings-v3
 * shares the encoder shape and mean-pools). Models built on bge-m3 (e.g. Snowflake arctic-embed-l-v2.0) pool CLS too.
 */
export function looksLikeBgeM3(config: Record<string, unknown>): boolean {
  const arch = Array.isArray(config.architectures) ? String(config.architectures[0] ?? "") : "";
  return arch === "XLMRobertaModel" && config.max_position_embeddings === 8194 && config.lora_adaptations === undefined;
}
