// Numbers read out of config.json and tokenizer_config.json, with the conventions their writers use.

/** Positions usable by tokens: RoBERTa-family models offset positions by pad_token_id + 1. */
export function positionLimit(config: Record<string, unknown>): number | null {
  const maxPos = Number(config.max_position_embeddings);
  if (!Number.isFinite(maxPos) || maxPos <= 0) return null;
  const type = String(config.model_type ?? "");
  if (["roberta", "xlm-roberta", "camembert", "mpnet", "longformer", "ibert"].includes(type)) {
    const pad = Number(config.pad_token_id ?? 1);
    return maxPos - (Number.isFinite(pad) ? pad : 1) - 1;
  }
  return maxPos;
}

/** A length from a config file, or null when absent, not positive, or a placeholder for "no limit". */
export function sane(n: unknown): number | null {
  const v = Number(n);
  // Tokenizer configs use 1e30 for "no limit".
  return Number.isFinite(v) && v > 0 && v < 1_000_000 ? Math.floor(v) : null;
}
