// Batch selection: which queued inputs run together. Pure functions over lengths, so the policy is unit-tested
// without a model. The oldest input is always in the next batch (no starvation); around it, inputs of similar
// length are taken from a bounded window so padding stays small; the batch is capped by count and by the token
// budget (padded length x batch size).

export interface Sized {
  /** Tokens in this input, special tokens included. */
  length: number;
}

export interface BatchLimits {
  maxBatchSize: number;
  maxBatchTokens: number;
  /** How many of the oldest inputs are considered when sorting by length. */
  window: number;
}

export function windowFor(maxBatchSize: number): number {
  return Math.max(4 * maxBatchSize, 64);
}

/**
 * Picks the next batch from a FIFO queue (index 0 is the oldest). Returns the chosen queue indices, oldest first.
 * An input longer than the token budget on its own still runs, alone.
 */
export function selectBatch(queue: readonly Sized[], limits: BatchLimits): number[] {
  if (queue.length === 0) return [];
  const w = Math.min(queue.length, Math.max(1, limits.window));
  // Window indices sorted by length; ties keep arrival order.
  const order = Array.from({ length: w }, (_, i) => i).sort((a, b) => queue[a]!.length - queue[b]!.length || a - b);
  const anchor = order.indexOf(0);
  let lo = anchor;
  let hi = anchor;
  let maxLen = queue[0]!.length;
  let count = 1;
  while (count < limits.maxBatchSize) {
    const left = lo > 0 ? queue[order[lo - 1]!]!.length : -1;
    const right = hi < w - 1 ? queue[order[hi + 1]!]!.length : -1;
    // Padding each choice adds: a shorter input pads itself; a longer one pads everyone already in.
    const leftFits = left >= 0 && (count + 1) * maxLen <= limits.maxBatchTokens;
    const rightFits = right >= 0 && (count + 1) * Math.max(maxLen, right) <= limits.maxBatchTokens;
    const leftWaste = leftFits ? maxLen - left : Infinity;
    const rightWaste = rightFits ? (Math.max(maxLen, right) - maxLen) * count : Infinity;
    if (leftWaste === Infinity && rightWaste === Infinity) break;
    if (leftWaste <= rightWaste) {
      lo--;
    } else {
      hi++;
      maxLen = Math.max(maxLen, right);
    }
    count++;
  }
  return order.slice(lo, hi + 1).sort((a, b) => a - b);
}

/** Padding tokens a batch of these lengths carries. */
export function paddingOf(lengths: readonly number[]): number {
  const max = Math.max(0, ...lengths);
  return lengths.reduce((sum, l) => sum + (max - l), 0);
}
