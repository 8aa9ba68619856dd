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
  /**
   * Largest share of padding tokens a batch may carry (0..1). On CPU every padded token costs its full share
   * (a 5% cap measured 0.84-0.93 of the limit in the benchmark, 10% 0.74-0.78), so an input that would pad the
   * batch past this waits for a batch of its own length.
   */
  maxPadding: number;
  /**
   * What one run costs beyond its tokens, counted in tokens: a batch of n inputs saves n - 1 runs, so it may
   * carry up to (n - 1) x this many padding tokens even past maxPadding. This is what lets short inputs batch:
   * a 12-token input alone runs at a third of the throughput of eight together.
   */
  runOverheadTokens: number;
}

export const DEFAULT_MAX_PADDING = 0.05;

/**
 * Measured with onnxruntime alone (2 cores, fp32): one run costs about 3 ms plus 0.11 ms per padded token on a
 * bge-small-shaped BERT and about 9 ms plus 0.38 ms per token on a bge-base-shaped one: 24-27 tokens' worth in
 * both (the fixed part is mostly streaming the weights, which scales with the model like the per-token part).
 */
export const DEFAULT_RUN_OVERHEAD_TOKENS = 24;

/** The range a calibrated run overhead is clamped to (a noisy fit must not stop or force batching). */
export const RUN_OVERHEAD_RANGE: readonly [number, number] = [4, 256];

/** One timed single-row run: its padded tokens and milliseconds. */
export interface RunTiming {
  tokens: number;
  ms: number;
}

export interface RunOverheadFit {
  /** Fixed cost of a run (ms), the intercept a of ms = a + c x tokens. */
  fixedMs: number;
  /** Cost per token (ms), the slope c. */
  msPerToken: number;
  /** a / c, rounded and clamped to RUN_OVERHEAD_RANGE. */
  tokens: number;
}

/**
 * Least-squares fit of ms = a + c x tokens over timed single-row runs; the run overhead is a / c tokens. null when
 * the timings cannot say: fewer than two distinct lengths, no positive cost per token, or no positive fixed cost
 * (a load spike during the longer runs tilts the line that way).
 */
export function fitRunOverhead(samples: readonly RunTiming[]): RunOverheadFit | null {
  const n = samples.length;
  if (n < 2) return null;
  const mx = samples.reduce((s, x) => s + x.tokens, 0) / n;
  const my = samples.reduce((s, x) => s + x.ms, 0) / n;
  let sxx = 0;
  let sxy = 0;
  for (const x of samples) {
    sxx += (x.tokens - mx) ** 2;
    sxy += (x.tokens - mx) * (x.ms - my);
  }
  if (sxx === 0) return null;
  const c = sxy / sxx;
  if (!(c > 0)) return null;
  const a = my - c * mx;
  if (!(a > 0)) return null;
  const [lo, hi] = RUN_OVERHEAD_RANGE;
  return { fixedMs: a, msPerToken: c, tokens: Math.min(hi, Math.max(lo, Math.round(a / c))) };
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
  let real = maxLen;
  // Whether n inputs holding `sum` real tokens, padded to `len`, stay within the padding cap, or carry no more
  // padding than the n - 1 runs the batch saves.
  const padOk = (n: number, len: number, sum: number) => n * len - sum <= Math.max(limits.maxPadding * n * len, limits.runOverheadTokens * (n - 1));
  while (count < limits.maxBatchSize) {
    const left = lo > 0 ? queue[order[lo - 1]!]!.length : -1;
    const right = hi < w - 1 ? queue[order[hi + 1]!]!.length : -1;
    // Padding each choice adds: a shorter input pads itself; a longer one pads everyone already in.
    const leftFits = left >= 0 && (count + 1) * maxLen <= limits.maxBatchTokens && padOk(count + 1, maxLen, real + left);
    const rightLen = Math.max(maxLen, right);
    const rightFits = right >= 0 && (count + 1) * rightLen <= limits.maxBatchTokens && padOk(count + 1, rightLen, real + right);
    const leftWaste = leftFits ? maxLen - left : Infinity;
    const rightWaste = rightFits ? (Math.max(maxLen, right) - maxLen) * count : Infinity;
    if (leftWaste === Infinity && rightWaste === Infinity) break;
    if (leftWaste <= rightWaste) {
      lo--;
      real += left;
    } else {
      hi++;
      maxLen = rightLen;
      real += right;
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
