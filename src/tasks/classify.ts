// Sequence classification: logits per label, softmax over the labels (sigmoid for a single label).
import type { OutputTensor } from "../model/session";
import { sigmoid } from "./rerank";
import { logitRows, pickOutput, type TaskReader } from "./task";

export const classifyReader: TaskReader<Float32Array> = {
  outputName: (names) => pickOutput(names, ["logits"]),
  read: (out: OutputTensor) => logitRows(out),
};

export function softmax(logits: ArrayLike<number>): number[] {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i]!);
  const exps = Array.from(logits, (x) => Math.exp(x - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / sum);
}

export interface LabelScore {
  label: string;
  score: number;
}

/** Every label with its score, best first. */
export function labelScores(logits: ArrayLike<number>, labels: readonly string[], raw: boolean): LabelScore[] {
  const scores = raw ? Array.from(logits) : logits.length === 1 ? [sigmoid(logits[0]!)] : softmax(logits);
  return scores.map((score, i) => ({ label: labels[i] ?? `LABEL_${i}`, score })).sort((a, b) => b.score - a.score);
}
