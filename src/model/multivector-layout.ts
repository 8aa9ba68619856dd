// ColBERT (late-interaction) encoders: their settings from PyLate's or a Stanford export's files.
import { ModelLoadError } from "../errors";
import type { StModule } from "./st-modules";

/**
 * Late-interaction (ColBERT) encoding: PyLate folders (config_sentence_transformers.json + 1_Dense) and
 * Stanford / fastembed-style exports (config.json HF_ColBERT, artifact.metadata, projection inside the graph).
 */
export interface MultiVectorLayout {
  format: "pylate" | "stanford";
  /** Token inserted after the first token of a query / document; null: none. */
  queryPrefix: string | null;
  documentPrefix: string | null;
  /** Total tokens of a query (expanded to it) and most tokens of a document, prefix included. */
  queryLength: number;
  documentLength: number;
  queryExpansion: boolean;
  attendToExpansion: boolean;
  /** Words whose token ids are dropped from documents' vectors. */
  skiplistWords: string[];
  /** Path of the Dense projection module applied after the encoder (PyLate); null when the graph projects. */
  densePath: string | null;
}

const PUNCTUATION = Array.from("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~");

/**
 * Whether a model is a ColBERT encoder, and its settings: PyLate's keys in config_sentence_transformers.json
 * (query_prefix, document_prefix, query_length, document_length, do_query_expansion, attend_to_expansion_tokens,
 * skiplist_words) with PyLate's defaults, or a Stanford HF_ColBERT config.json with artifact.metadata
 * (query_token_id, doc_token_id, query_maxlen, doc_maxlen, attend_to_mask_tokens).
 */
export function multiVectorLayout(
  config: Record<string, unknown>,
  stMeta: Record<string, unknown> | null,
  metadata: Record<string, unknown> | null,
  modules: readonly StModule[],
  positions: number | null,
): MultiVectorLayout | null {
  const arch = Array.isArray(config.architectures) ? String(config.architectures[0] ?? "") : "";
  const pylate = stMeta !== null && (stMeta.model_type === "ColBERT" || typeof stMeta.query_prefix === "string" || typeof stMeta.query_length === "number");
  const stanford = arch === "HF_ColBERT" || metadata !== null;
  if (!pylate && !stanford) return null;
  const num = (v: unknown, d: number) => (typeof v === "number" && Number.isInteger(v) && v > 0 ? v : d);
  const prefix = (v: unknown, d: string) => (typeof v === "string" ? (v === "" ? null : v) : d);
  const cap = (n: number) => (positions !== null ? Math.min(n, positions) : n);
  if (pylate) {
    const dense = modules.filter((m) => m.kind === "Dense");
    if (dense.length > 1) throw new ModelLoadError("a ColBERT model with more than one Dense module is not supported");
    if (dense.length === 0) throw new ModelLoadError("a PyLate ColBERT folder without its 1_Dense projection module cannot be served");
    const words = Array.isArray(stMeta!.skiplist_words) ? stMeta!.skiplist_words.map(String) : PUNCTUATION;
    return {
      format: "pylate",
      queryPrefix: prefix(stMeta!.query_prefix, "[Q] "),
      documentPrefix: prefix(stMeta!.document_prefix, "[D] "),
      queryLength: cap(num(stMeta!.query_length, 32)),
      documentLength: cap(num(stMeta!.document_length, 180)),
      queryExpansion: stMeta!.do_query_expansion !== false,
      attendToExpansion: stMeta!.do_query_expansion !== false && stMeta!.attend_to_expansion_tokens === true,
      skiplistWords: words,
      densePath: dense[0]!.path,
    };
  }
  const md = metadata ?? {};
  return {
    format: "stanford",
    queryPrefix: prefix(md.query_token_id, "[unused0]"),
    documentPrefix: prefix(md.doc_token_id, "[unused1]"),
    queryLength: cap(num(md.query_maxlen, 32)),
    documentLength: cap(num(md.doc_maxlen, positions ?? 512)),
    queryExpansion: true,
    attendToExpansion: md.attend_to_mask_tokens === true,
    skiplistWords: PUNCTUATION,
    densePath: null,
  };
}
