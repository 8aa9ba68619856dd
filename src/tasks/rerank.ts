// Reranking with cross-encoders: one logit per (query, document) pair, sigmoid unless raw scores are asked for.
import type { OutputTensor } from "../model/session";
import { pickOutput, type TaskReader } from "./task";

export function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

export const rerankReader: TaskReader<number> = {
  outputName: (names) => pickOutput(names, ["logits"]),
  read(out: OutputTensor, lengths) {
    const n = out.dims.length > 1 ? out.dims[out.dims.length - 1]! : 1;
    const scores = new Array<number>(lengths.length);
    // A single-logit head; a 2-logit head (some exports) scores the positive class.
    for (let b = 0; b < lengths.length; b++) scores[b] = n === 1 ? out.data[b]! : out.data[b * n + n - 1]! - out.data[b * n]!;
    return scores;
  },
};

export interface RerankItem {
  index: number;
  score: number;
}

/** Sorted by score (descending, stable by index), cut to topN. */
export function rankResults(scores: readonly number[], topN: number | undefined, raw: boolean): RerankItem[] {
  const items = scores.map((s, index) => ({ index, score: raw ? s : sigmoid(s) }));
  items.sort((a, b) => b.score - a.score || a.index - b.index);
  return topN === undefined ? items : items.slice(0, topN);
}
