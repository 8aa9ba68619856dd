// The interface every task offers the engine: which output to read and how to turn one batch's output into one
// result per input. Pre-processing (what to tokenize) lives in the same task file, used by the routes.
import type { OutputTensor } from "../model/session";

export interface TaskReader<R> {
  /** Picks the session output this task reads. */
  outputName(outputNames: readonly string[]): string;
  /**
   * One result per batch row; lengths are the real (unpadded) token counts of the rows, starts the position of
   * each row's first real token (0 unless the model pads on the left).
   */
  read(out: OutputTensor, lengths: ArrayLike<number>, starts?: ArrayLike<number>): R[];
}

/** Rows of a [batch, n] logits output. */
export function logitRows(out: OutputTensor): Float32Array[] {
  const [batch, n] = [out.dims[0]!, out.dims.length > 1 ? out.dims[out.dims.length - 1]! : 1];
  const rows: Float32Array[] = new Array(batch);
  for (let b = 0; b < batch; b++) rows[b] = out.data.slice(b * n, (b + 1) * n);
  return rows;
}

export function pickOutput(outputNames: readonly string[], preferred: readonly string[]): string {
  for (const p of preferred) if (outputNames.includes(p)) return p;
  return outputNames[0]!;
}
