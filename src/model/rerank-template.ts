// Decoder (LLM) rerankers: the prompt a pair is read in, and which decoders are served that way.
import { ModelLoadError } from "../errors";
import type { Task } from "./model-task";

/**
 * The prompt an LLM reranker reads a pair in (Qwen3-Reranker's model card): prefix, then
 * "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}", then suffix; the score is read at the last
 * position (yes/no logits of a causal LM, or the one logit of a -seq-cls conversion).
 */
export interface RerankTemplate {
  prefix: string;
  suffix: string;
  instruction: string;
  /** Causal LMs: the tokens whose logits are compared at the last position; null for -seq-cls conversions. */
  yesToken: string | null;
  noToken: string | null;
}

/**
 * LLM rerankers' default max length: the Qwen3-Reranker model card's scoring code truncates each prompt to
 * max_length = 8192 tokens, while its config.json allows 40,960 positions and its tokenizer_config says 131,072 (the
 * card's prose says 32k context). The server scores as the card's code does; --max-length raises it up to the
 * model's positions.
 */
export const LLM_RERANK_MAX_LENGTH = 8192;

export const QWEN3_RERANK_TEMPLATE: RerankTemplate = {
  prefix:
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. " +
    'Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n',
  suffix: "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
  instruction: "Given a web search query, retrieve relevant passages that answer the query",
  yesToken: "yes",
  noToken: "no",
};

const CHAT_DECODERS = new Set(["qwen2", "qwen3"]);

/**
 * Decoder rerankers: a *ForCausalLM export is served as a Qwen3-Reranker-style LLM reranker (yes/no logits), a
 * decoder *ForSequenceClassification with one label (a -seq-cls conversion) with the same prompt. Both need the
 * Qwen chat tokens; a causal LM without them is refused (its logits are not an embedding or a score).
 */
export function rerankTemplateOf(config: Record<string, unknown>, tokenizerJson: unknown, task: Task): RerankTemplate | null {
  const arch = Array.isArray(config.architectures) ? String(config.architectures[0] ?? "") : "";
  const type = String(config.model_type ?? "");
  const causal = arch.endsWith("ForCausalLM");
  if (!causal && !(task === "rerank" && CHAT_DECODERS.has(type))) return null;
  const tokens = new Set<string>();
  const tj = tokenizerJson as { model?: { vocab?: unknown }; added_tokens?: Array<{ content?: string }> } | null;
  for (const t of tj?.added_tokens ?? []) if (typeof t.content === "string") tokens.add(t.content);
  const vocab = tj?.model?.vocab;
  const has = (t: string) => tokens.has(t) || (!!vocab && typeof vocab === "object" && !Array.isArray(vocab) && t in (vocab as object));
  const needed = ["<|im_start|>", "<|im_end|>", ...(causal ? ["yes", "no"] : [])];
  const missing = needed.filter((t) => !has(t));
  if (!CHAT_DECODERS.has(type) || missing.length) {
    if (!causal) return null;
    throw new ModelLoadError(
      `${arch} is a causal language model; it is served only as a Qwen3-Reranker-style LLM reranker (model_type qwen2/qwen3 with ` +
        `<|im_start|>, <|im_end|>, yes and no tokens)` + (missing.length ? `, and its tokenizer lacks ${missing.join(", ")}` : `, not ${type}`),
    );
  }
  return causal ? QWEN3_RERANK_TEMPLATE : { ...QWEN3_RERANK_TEMPLATE, yesToken: null, noToken: null };
}
