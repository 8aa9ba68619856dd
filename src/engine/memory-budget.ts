// How many padded tokens a batch may hold: the providers' defaults, and the bounds memory sets (activations per
// token, an LLM reranker's full-vocabulary logits, --memory-budget-mb).

import { ModelLoadError } from "../errors";
import { KEEP_LOGITS_INPUTS } from "../model/logits-graph";

/**
 * Default token budgets per batch when --max-batch-tokens is 0 (auto). CPU: measured with onnxruntime alone on
 * bge-small- and bge-base-shaped BERTs (2 cores), tokens/s peaks at 400-800 padded tokens per batch at every input
 * length and falls 10-25% by 2048; in the benchmark 512 ran ~11% more tokens/s than 2048 (bench/README.md).
 */
export const CPU_BATCH_TOKENS = 512;
export const GPU_BATCH_TOKENS = 16384;

/**
 * A floor for activation memory per token from the architecture: float32 hidden states, attention projections
 * and the feed-forward expansion of one layer alive at once, with onnxruntime's arena rounding (x2).
 */
export function estimateActivationBytesPerToken(config: Record<string, unknown>): number {
  const hidden = Number(config.hidden_size ?? config.d_model ?? config.n_embd ?? 768) || 768;
  const intermediate = Number(config.intermediate_size ?? config.n_inner ?? 4 * hidden) || 4 * hidden;
  return 4 * (6 * hidden + 2 * intermediate) * 2;
}

/**
 * What one padded token adds to a batch through an LLM reranker's `logits` output when the export returns every
 * position's full-vocabulary logits ([batch, seq, vocab], read as float32): vocab_size x 4 bytes (606,676 for
 * Qwen3-Reranker's 151,669 tokens). 0 when the export takes num_logits_to_keep / logits_to_keep (fed 1, the output is
 * [batch, 1, vocab] whatever the length) or when the model is not scored from a causal LM's logits.
 */
export function fullLogitsBytesPerToken(config: Record<string, unknown>, inputNames: readonly string[], causalLm: boolean): number {
  if (!causalLm || inputNames.some((n) => KEEP_LOGITS_INPUTS.includes(n))) return 0;
  const vocab = Number(config.vocab_size ?? (config.text_config as Record<string, unknown> | undefined)?.vocab_size);
  return Number.isFinite(vocab) && vocab > 0 ? vocab * 4 : 0;
}

/**
 * Without --memory-budget-mb, one batch's full-vocabulary logits are kept within this: 1 GiB, 1,769 padded tokens of
 * Qwen3-Reranker (where the GPU default budget of 16,384 tokens would make a 9.9 GB logits tensor, and one
 * 40,960-token input 24.8 GB).
 */
export const FULL_LOGITS_MAX_BYTES = 1024 * 1048576;

/**
 * The batch token budget of an export that returns full-vocabulary logits: the configured budget, cut so one batch's
 * logits fit `maxBytes` (at least one token). An input longer than the result still runs alone (the batcher never
 * splits an input), so its logits can pass `maxBytes`: `longestInputBytes` says by how much.
 */
export function fullLogitsTokenBudget(bytesPerToken: number, maxBatchTokens: number, maxLength: number, maxBytes: number = FULL_LOGITS_MAX_BYTES): { tokens: number; cut: boolean; longestInputBytes: number } {
  const fit = Math.max(1, Math.floor(maxBytes / bytesPerToken));
  return { tokens: Math.min(maxBatchTokens, fit), cut: fit < maxBatchTokens, longestInputBytes: maxLength * bytesPerToken };
}

/** The most padded tokens per batch that keep a model within its memory budget; throws when not even one fits. */
export function tokenBudgetWithin(budgetMb: number, sessionBytes: number, bytesPerToken: number, maxLength: number, model: string): number {
  const tokens = Math.floor((budgetMb * 1048576 - sessionBytes) / bytesPerToken);
  if (tokens < maxLength) {
    const needMb = Math.ceil((sessionBytes + maxLength * bytesPerToken) / 1048576);
    throw new ModelLoadError(`--memory-budget-mb ${budgetMb} is too small for ${model}: one full-length input needs about ${needMb} MB`);
  }
  return tokens;
}
