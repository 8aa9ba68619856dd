// Batch selection: which queued inputs run together. Pure functions over lengths, so the policy is unit-tested
// without a model. A run costs about a fixed overhead plus its padded tokens (rows x longest row), so the
// window of queued inputs is split, sorted by length, into the groups that cost least in total (an optimal
// partition by that cost model, within the batch size and the token budget), and the next batch is the group
// that holds the oldest input: no input is passed over while it is the oldest (no starvation), and the inputs
// around it are chosen for what they cost, not by how close they arrived.

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
   * What one run costs beyond its tokens, counted in tokens (the fixed part a of ms = a + c x padded tokens,
   * divided by c). A batch of n inputs saves n - 1 runs, so it may carry that much padding and still cost less;
   * on CPU every padded token costs its full share. This is what lets short inputs batch: a 12-token input alone
   * runs at a third of the throughput of eight together.
   */
  runOverheadTokens: number;
}

/**
 * Measured with onnxruntime alone (2 cores, fp32): one run costs about 3 ms plus 0.11 ms per padded token on a
 * bge-small-shaped BERT and about 9 ms plus 0.38 ms per token on a bge-base-shaped one: 24-27 tokens' worth in
 * both (the fixed part is mostly streaming the weights, which scales with the model like the per-token part).
 */
export const DEFAULT_RUN_OVERHEAD_TOKENS = 24;

/** The range a calibrated run overhead is clamped to (a noisy fit must not stop or force batching). */
export const RUN_OVERHEAD_RANGE: readonly [number, number] = [4, 256];

/** One timed run: its padded tokens and milliseconds. */
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
 * Least-squares fit of ms = a + c x tokens over timed runs; the run overhead is a / c tokens. null when
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

/**
 * Token-budget calibration (warm-up, --max-batch-tokens 0): batches of identical rows at doubling sizes from
 * TOKEN_BUDGET_START padded tokens, timed. The first TOKEN_BUDGET_FIRST sizes are always timed; the climb goes on
 * while a doubling raised tokens/s by at least TOKEN_BUDGET_CLIMB. The budget stays at the timed size nearest the
 * provider's constant (512 on CPU, 16384 on GPU) unless another size ran at least TOKEN_BUDGET_CLIMB times its tokens/s:
 * then it is the largest size within TOKEN_BUDGET_TOLERANCE of the best (a near-tie goes to the larger batch, whose
 * arena is already grown). Timings on a quiet 2-core machine spread by 5-10% between starts (two starts kept 264 and
 * 1056 tokens without the constant to lean on), so only a clear gain moves the budget off the measured default. On
 * a CPU tokens/s rises to a few hundred tokens per batch (caches) and then falls, on a GPU or a many-core CPU it
 * keeps rising far longer, so the same model gets about 512 on 2 cores and thousands where more parallel work pays.
 * The climb stops early on purpose: every size timed grows the session's arena to hold it for good.
 */
export const TOKEN_BUDGET_START = 128;
export const TOKEN_BUDGET_FIRST = 3;
export const TOKEN_BUDGET_CLIMB = 1.1;
export const TOKEN_BUDGET_TOLERANCE = 0.97;
/** Row length the calibration prefers (shorter when the model's max length is): typical retrieval inputs. */
export const TOKEN_BUDGET_ROW = 128;

/** One timed batch of the token-budget calibration: `rows` identical rows of `length` tokens. */
export interface BudgetTiming {
  rows: number;
  length: number;
  ms: number;
}

export const budgetTokens = (t: { rows: number; length: number }): number => t.rows * t.length;
const tokensPerMs = (t: BudgetTiming): number => budgetTokens(t) / t.ms;

/**
 * The batch shape that makes `target` padded tokens: rows of TOKEN_BUDGET_ROW tokens (the max length when shorter),
 * more rows up to the batch size, then longer rows up to the max length. null when the shape cannot come within
 * three quarters of the target (the batch size and max length cap it) or does not exceed `previous` tokens.
 */
export function budgetShape(target: number, maxLength: number, maxBatchSize: number, previous = 0): { rows: number; length: number } | null {
  let length = Math.min(TOKEN_BUDGET_ROW, maxLength);
  const rows = Math.max(1, Math.min(maxBatchSize, Math.round(target / length)));
  if (rows === maxBatchSize) length = Math.min(maxLength, Math.max(length, Math.round(target / rows)));
  const tokens = rows * length;
  return tokens >= 0.75 * target && tokens > previous ? { rows, length } : null;
}

/** Whether to time the next doubling: fewer than TOKEN_BUDGET_FIRST timed, or the last one gained TOKEN_BUDGET_CLIMB. */
export function keepClimbing(timings: readonly BudgetTiming[]): boolean {
  if (timings.length < TOKEN_BUDGET_FIRST) return true;
  const [a, b] = [timings.at(-2)!, timings.at(-1)!];
  return tokensPerMs(b) >= TOKEN_BUDGET_CLIMB * tokensPerMs(a);
}

/**
 * The timed batch nearest `prior` tokens (the provider's constant) unless another ran TOKEN_BUDGET_CLIMB times its
 * tokens/s; then the largest within TOKEN_BUDGET_TOLERANCE of the best. null when nothing was timed.
 */
export function chooseBudget(timings: readonly BudgetTiming[], prior: number): BudgetTiming | null {
  const timed = timings.filter((t) => t.ms > 0 && Number.isFinite(t.ms));
  if (timed.length === 0) return null;
  const best = Math.max(...timed.map(tokensPerMs));
  const near = timed.reduce((a, b) => (Math.abs(Math.log(budgetTokens(b) / prior)) < Math.abs(Math.log(budgetTokens(a) / prior)) ? b : a));
  if (best < TOKEN_BUDGET_CLIMB * tokensPerMs(near)) return near;
  return timed.filter((t) => tokensPerMs(t) >= TOKEN_BUDGET_TOLERANCE * best).reduce((a, b) => (budgetTokens(b) > budgetTokens(a) ? b : a));
}

/**
 * Warm-up timings are used when other processes took at most CALIBRATION_OTHER_LOAD of the machine's cores (at
 * least CALIBRATION_OTHER_LOAD_MIN cores) while they ran; null (no /proc to tell) trusts them. On a 2-core machine
 * with a second job running (about 1 core), the budget calibration kept 264 tokens where a quiet start keeps 528 and
 * single-row timings doubled; 0.25 cores is what a quiet machine's daemons stay well below.
 */
export const CALIBRATION_OTHER_LOAD = 0.125;
export const CALIBRATION_OTHER_LOAD_MIN = 0.25;
export function calibrationTrusted(otherCores: number | null, cores: number): boolean {
  return otherCores === null || otherCores <= Math.max(CALIBRATION_OTHER_LOAD_MIN, CALIBRATION_OTHER_LOAD * cores);
}

export function windowFor(maxBatchSize: number): number {
  return Math.max(4 * maxBatchSize, 64);
}

/** What a batch of `rows` inputs padded to `maxLength` costs, in tokens: the run overhead plus its padded tokens. */
export function batchCost(rows: number, maxLength: number, runOverheadTokens: number): number {
  return runOverheadTokens + rows * maxLength;
}

/** A group of a partition: positions start..end-1 of the length-sorted inputs. */
export interface Group {
  start: number;
  end: number;
}

/**
 * The cheapest split of `sorted` (lengths, ascending) into batches: contiguous groups, each within the batch size
 * and the token budget (a single input longer than the budget forms a group of its own), minimising the total
 * batchCost. Contiguous groups of the sorted order lose nothing: in any partition, giving the group with the
 * longest input the longest inputs of its size changes no group's size and lowers no group's cost, and so on
 * down. Dynamic programming over where the first group ends, from the back: O(n x maxBatchSize). On equal cost the
 * earlier group is the larger (equal lengths fill whole batches from the oldest on, the remainder last).
 */
export function partitionByCost(sorted: readonly number[], limits: Omit<BatchLimits, "window">): Group[] {
  const n = sorted.length;
  // best[i]: the least cost of sorted[i..n-1]; to[i]: where the first group of that split ends.
  const best = new Float64Array(n + 1);
  const to = new Int32Array(n + 1);
  const maxRows = Math.max(1, limits.maxBatchSize);
  for (let i = n - 1; i >= 0; i--) {
    best[i] = Infinity;
    for (let j = i + 1; j <= n && j - i <= maxRows; j++) {
      const rows = j - i;
      const maxLength = sorted[j - 1]!;
      if (rows > 1 && rows * maxLength > limits.maxBatchTokens) break;
      const cost = batchCost(rows, maxLength, limits.runOverheadTokens) + best[j]!;
      if (cost <= best[i]!) {
        best[i] = cost;
        to[i] = j;
      }
    }
  }
  const groups: Group[] = [];
  for (let i = 0; i < n; i = to[i]!) groups.push({ start: i, end: to[i]! });
  return groups;
}

/**
 * Picks the next batch from a FIFO queue (index 0 is the oldest): the group holding the oldest input in the
 * cheapest partition of the window (partitionByCost). Returns the chosen queue indices, ascending. An input
 * longer than the token budget on its own still runs, alone.
 */
export function selectBatch(queue: readonly Sized[], limits: BatchLimits): number[] {
  if (queue.length === 0) return [];
  const w = Math.min(queue.length, Math.max(1, limits.window));
  // Window indices sorted by length; ties keep arrival order.
  const order = Array.from({ length: w }, (_, i) => i).sort((a, b) => queue[a]!.length - queue[b]!.length || a - b);
  const groups = partitionByCost(order.map((i) => queue[i]!.length), limits);
  const anchor = order.indexOf(0);
  const g = groups.find((x) => x.start <= anchor && anchor < x.end)!;
  return order.slice(g.start, g.end).sort((a, b) => a - b);
}

/** Padding tokens a batch of these lengths carries. */
export function paddingOf(lengths: readonly number[]): number {
  const max = Math.max(0, ...lengths);
  return lengths.reduce((sum, l) => sum + (max - l), 0);
}
