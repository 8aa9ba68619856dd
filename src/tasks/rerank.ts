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

/**
 * LLM rerankers (Qwen3-Reranker): the logits of "yes" and "no" at each row's last real token; the score is their
 * difference, whose sigmoid is softmax([no, yes])[yes]. Reads full-vocabulary logits [batch, seq, vocab] or, with
 * num_logits_to_keep, [batch, 1, vocab].
 */
export function yesNoReader(yes: number, no: number): TaskReader<number> {
  return {
    outputName: (names) => pickOutput(names, ["logits"]),
    read(out: OutputTensor, lengths, starts) {
      if (out.dims.length !== 3) throw new Error(`an LLM reranker's logits must be [batch, seq, vocab], got [${out.dims.join(", ")}]`);
      const [, seq, vocab] = out.dims as [number, number, number];
      const scores = new Array<number>(lengths.length);
      for (let b = 0; b < lengths.length; b++) {
        const last = seq === 1 ? 0 : (starts?.[b] ?? 0) + lengths[b]! - 1;
        const o = (b * seq + last) * vocab;
        scores[b] = out.data[o + yes]! - out.data[o + no]!;
      }
      return scores;
    },
  };
}

/** The text a decoder reranker reads one pair in, inside its template's prefix and suffix. */
export function llmRerankText(query: string, document: string, instruction: string): string {
  return `<Instruct>: ${instruction}\n<Query>: ${query}\n<Document>: ${document}`;
}

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
