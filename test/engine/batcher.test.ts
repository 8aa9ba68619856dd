import { describe, expect, test } from "bun:test";
import {
  batchCost, budgetShape, budgetTokens, calibrationTrusted, chooseBudget, fitRunOverhead, keepClimbing, paddingOf, partitionByCost, RUN_OVERHEAD_RANGE, selectBatch,
  TOKEN_BUDGET_CLIMB, TOKEN_BUDGET_FIRST, TOKEN_BUDGET_ROW, TOKEN_BUDGET_START, TOKEN_BUDGET_TOLERANCE, windowFor, type BudgetTiming,
} from "../../src/engine/batcher";

const q = (...lengths: number[]) => lengths.map((length) => ({ length }));
// No run overhead unless a test sets one: then the cost of a batch is its padded tokens alone.
const limits = (maxBatchSize: number, maxBatchTokens: number, window = 64, runOverheadTokens = 0) => ({ maxBatchSize, maxBatchTokens, window, runOverheadTokens });

/** A seeded generator (mulberry32), so the random cases are the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Limits = ReturnType<typeof limits>;

/** The cheapest total cost over every way to split these inputs into feasible batches, by enumeration. */
function bruteForceCost(lengths: readonly number[], l: Limits): number {
  let best = Infinity;
  const groups: number[][] = [];
  const walk = (k: number) => {
    if (k === lengths.length) {
      let cost = 0;
      for (const g of groups) {
        const max = Math.max(...g.map((i) => lengths[i]!));
        if (g.length > l.maxBatchSize || (g.length > 1 && g.length * max > l.maxBatchTokens)) return;
        cost += batchCost(g.length, max, l.runOverheadTokens);
      }
      best = Math.min(best, cost);
      return;
    }
    for (const g of groups) {
      g.push(k);
      walk(k + 1);
      g.pop();
    }
    groups.push([k]);
    walk(k + 1);
    groups.pop();
  };
  walk(0);
  return best;
}

function partitionCost(sorted: readonly number[], l: Limits): number {
  return partitionByCost(sorted, l).reduce((s, g) => s + batchCost(g.end - g.start, sorted[g.end - 1]!, l.runOverheadTokens), 0);
}

describe("partitionByCost", () => {
  test("matches the cheapest of all partitions (brute force) on small random cases", () => {
    const next = rng(7);
    for (let c = 0; c < 300; c++) {
      const n = 1 + Math.floor(next() * 7);
      const lengths = Array.from({ length: n }, () => 1 + Math.floor(next() * (next() < 0.3 ? 20 : 260)));
      const l = limits(1 + Math.floor(next() * 5), 32 + Math.floor(next() * 600), 64, Math.floor(next() * 64));
      const sorted = [...lengths].sort((a, b) => a - b);
      const groups = partitionByCost(sorted, l);
      // A partition: contiguous, covering, feasible.
      expect(groups[0]!.start).toBe(0);
      expect(groups[groups.length - 1]!.end).toBe(n);
      groups.forEach((g, i) => {
        if (i > 0) expect(g.start).toBe(groups[i - 1]!.end);
        const rows = g.end - g.start;
        expect(rows).toBeLessThanOrEqual(l.maxBatchSize);
        if (rows > 1) expect(rows * sorted[g.end - 1]!).toBeLessThanOrEqual(l.maxBatchTokens);
      });
      expect(partitionCost(sorted, l)).toBe(bruteForceCost(lengths, l));
    }
  });

  test("the run overhead decides between padding and another run", () => {
    // 10 and 20 together pad 10 tokens; apart they pay one more run.
    expect(partitionByCost([10, 20], limits(8, 1000, 64, 0))).toEqual([{ start: 0, end: 1 }, { start: 1, end: 2 }]);
    expect(partitionByCost([10, 20], limits(8, 1000, 64, 9))).toEqual([{ start: 0, end: 1 }, { start: 1, end: 2 }]);
    expect(partitionByCost([10, 20], limits(8, 1000, 64, 10))).toEqual([{ start: 0, end: 2 }]);
    expect(partitionByCost([10, 20], limits(8, 1000, 64, 24))).toEqual([{ start: 0, end: 2 }]);
  });

  test("equal lengths fill batches up to the batch size and the budget", () => {
    expect(partitionByCost(Array(10).fill(30), limits(4, 10_000, 64, 24))).toEqual([{ start: 0, end: 4 }, { start: 4, end: 8 }, { start: 8, end: 10 }]);
    expect(partitionByCost(Array(7).fill(30), limits(32, 100, 64, 24)).map((g) => g.end - g.start)).toEqual([3, 3, 1]);
  });
});

describe("selectBatch", () => {
  test("empty queue gives no batch", () => {
    expect(selectBatch([], limits(4, 100))).toEqual([]);
  });

  test("takes everything when it fits and the run overhead outweighs the padding", () => {
    expect(selectBatch(q(5, 7, 6), limits(8, 1000, 64, 24))).toEqual([0, 1, 2]);
  });

  test("caps by batch size and always includes the oldest input", () => {
    const picked = selectBatch(q(50, 5, 5, 5, 5, 49, 48), limits(3, 10_000, 64, 24));
    expect(picked).toContain(0);
    // The oldest (50) goes with the nearest lengths, 49 and 48; the four short ones make their own batch.
    expect(picked).toEqual([0, 5, 6]);
  });

  test("groups similar lengths to keep padding small", () => {
    const queue = q(10, 100, 11, 101, 12, 99);
    const first = selectBatch(queue, limits(3, 10_000, 64, 24));
    expect(first).toEqual([0, 2, 4]);
    expect(paddingOf(first.map((i) => queue[i]!.length))).toBe(3);
  });

  test("respects the token budget: padded length x batch size", () => {
    expect(selectBatch(q(30, 30, 30, 30), limits(32, 100, 64, 24))).toHaveLength(3);
    const mixed = q(10, 40, 10, 10);
    const m = selectBatch(mixed, limits(32, 45, 64, 24));
    expect(m).toEqual([0, 2, 3]);
    const lengths = m.map((i) => mixed[i]!.length);
    expect(Math.max(...lengths) * lengths.length).toBeLessThanOrEqual(45);
  });

  test("an input longer than the budget runs alone", () => {
    expect(selectBatch(q(500, 3, 3), limits(8, 100, 64, 24))).toEqual([0]);
  });

  test("only the window is considered", () => {
    const queue = q(10, 12, 12, 12, 10);
    // The window (2) hides the later 10-long input.
    expect(selectBatch(queue, limits(2, 10_000, 2, 24))).toEqual([0, 1]);
    expect(selectBatch(queue, limits(2, 10_000, 5, 24))).toEqual([0, 4]);
  });

  test("inputs of very different lengths are kept apart; short ones batch while the padding costs less than a run", () => {
    // 100/98/97 pad 5 tokens together; adding 5 and 6 would pad ~190 to save two runs (48 tokens).
    expect(selectBatch(q(100, 5, 98, 6, 97), limits(8, 10_000, 64, 24))).toEqual([0, 2, 4]);
    expect(selectBatch(q(5, 100, 6), limits(8, 10_000, 64, 24))).toEqual([0, 2]);
    // Eight short inputs of 4-30 tokens: all together pad 120 tokens (cost 24 + 240); split at 12 | 16 they pad 60 in
    // two runs (24 + 48 + 24 + 120): the oldest (10) goes with 4, 8 and 12.
    const short = q(10, 4, 30, 12, 20, 8, 16, 20);
    expect(selectBatch(short, limits(8, 10_000, 64, 24))).toEqual([0, 1, 3, 5]);
    // With a larger run overhead (a GPU's launch cost, say) the eight run as one batch.
    expect(selectBatch(short, limits(8, 10_000, 64, 80))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(selectBatch(q(100, 200, 101), limits(8, 10_000, 64, 24))).toEqual([0, 2]);
  });

  test("no starvation: every cut takes the oldest input, so an input at queue position p runs within p + 1 cuts", () => {
    const next = rng(11);
    const l = limits(32, 512, 128, 24);
    type Waiting = { length: number; id: number; position: number; cuts: number };
    let queue: Waiting[] = [];
    let id = 0;
    const arrive = (k: number) => {
      for (let i = 0; i < k; i++) queue.push({ length: next() < 0.3 ? 4 + Math.floor(next() * 21) : 32 + Math.floor(next() * 225), id: id++, position: queue.length, cuts: 0 });
    };
    arrive(40);
    let worst = 0;
    for (let step = 0; step < 2000; step++) {
      if (queue.length === 0) arrive(1);
      const picked = selectBatch(queue, l);
      expect(picked[0]).toBe(0);
      for (const w of queue) w.cuts++;
      for (const i of picked) {
        const w = queue[i]!;
        expect(w.cuts).toBeLessThanOrEqual(w.position + 1);
        worst = Math.max(worst, w.cuts);
      }
      const taken = new Set(picked);
      queue = queue.filter((_, i) => !taken.has(i));
      // Random arrivals, sometimes a burst, sometimes none: the queue grows and drains.
      arrive(Math.floor(next() * (step % 100 < 50 ? 12 : 3)));
    }
    expect(worst).toBeGreaterThan(1);
  });

  test("window grows with batch size", () => {
    expect(windowFor(8)).toBe(64);
    expect(windowFor(32)).toBe(128);
  });
});

describe("fitRunOverhead", () => {
  test("recovers a and c of ms = a + c x tokens; the overhead is a / c tokens", () => {
    // 3 ms plus 0.11 ms per token: 27.3 tokens.
    const fit = fitRunOverhead([16, 64, 128, 512].map((tokens) => ({ tokens, ms: 3 + 0.11 * tokens })))!;
    expect(fit.fixedMs).toBeCloseTo(3, 9);
    expect(fit.msPerToken).toBeCloseTo(0.11, 9);
    expect(fit.tokens).toBe(27);
  });

  test("least squares over noisy timings", () => {
    // Residuals +0.5, -0.5, -0.5, +0.5 around 10 + 0.1 x tokens cancel in the fit.
    const fit = fitRunOverhead([{ tokens: 10, ms: 11.5 }, { tokens: 20, ms: 11.5 }, { tokens: 100, ms: 19.5 }, { tokens: 110, ms: 21.5 }])!;
    expect(fit.msPerToken).toBeCloseTo(0.1, 9);
    expect(fit.fixedMs).toBeCloseTo(10, 9);
    expect(fit.tokens).toBe(100);
  });

  test("clamped to the sane range", () => {
    const [lo, hi] = RUN_OVERHEAD_RANGE;
    expect(fitRunOverhead([{ tokens: 10, ms: 100 }, { tokens: 500, ms: 101 }])!.tokens).toBe(hi);
    expect(fitRunOverhead([{ tokens: 10, ms: 1.1 }, { tokens: 500, ms: 50.1 }])!.tokens).toBe(lo); // 0.1 / 0.1 = 1
  });

  test("no answer from one length, a single sample, no positive cost per token, or no positive fixed cost", () => {
    expect(fitRunOverhead([])).toBeNull();
    expect(fitRunOverhead([{ tokens: 64, ms: 5 }])).toBeNull();
    expect(fitRunOverhead([{ tokens: 64, ms: 5 }, { tokens: 64, ms: 6 }])).toBeNull();
    expect(fitRunOverhead([{ tokens: 16, ms: 9 }, { tokens: 512, ms: 8 }])).toBeNull();
    expect(fitRunOverhead([{ tokens: 10, ms: 1 }, { tokens: 500, ms: 50 }])).toBeNull(); // a = 0
    // Timed during a load spike on the bench model: the line fits a = -1.3 ms.
    expect(fitRunOverhead([{ tokens: 12, ms: 9.52 }, { tokens: 32, ms: 34.55 }, { tokens: 62, ms: 32.85 }, { tokens: 122, ms: 104.06 }])).toBeNull();
  });
});

describe("token-budget calibration", () => {
  test("budgetShape: rows of TOKEN_BUDGET_ROW tokens, then longer rows once the batch size is reached; null past the caps", () => {
    expect(budgetShape(TOKEN_BUDGET_START, 512, 32)).toEqual({ rows: 1, length: TOKEN_BUDGET_ROW });
    expect(budgetShape(512, 512, 32)).toEqual({ rows: 4, length: 128 });
    expect(budgetShape(8192, 512, 32)).toEqual({ rows: 32, length: 256 });
    // A short max length: more rows of it; the batch size and the max length cap the shape.
    expect(budgetShape(128, 48, 32)).toEqual({ rows: 3, length: 48 });
    expect(budgetShape(2048, 48, 32)).toEqual({ rows: 32, length: 48 });
    expect(budgetShape(4096, 48, 32)).toBeNull();
    expect(budgetShape(2048, 48, 32, 1536)).toBeNull();
    expect(budgetShape(512, 512, 1)).toEqual({ rows: 1, length: 512 });
    expect(budgetShape(1024, 512, 1)).toBeNull();
  });

  // A CPU-like curve (tokens/s peaks at a few hundred tokens per batch, as bench/shape.ts measured on 2 cores) and a
  // GPU-like one (a fixed cost per run that only large batches amortise).
  const cpu = (tokens: number) => tokens / (tokens <= 512 ? 3 + 0.11 * tokens : 3 + 0.11 * tokens * (1 + (tokens - 512) / 4096));
  const gpu = (tokens: number) => tokens / (5 + 0.001 * tokens);
  const climb = (rate: (tokens: number) => number): BudgetTiming[] => {
    const timed: BudgetTiming[] = [];
    for (let target = TOKEN_BUDGET_START; keepClimbing(timed); target *= 2) {
      const shape = budgetShape(target, 512, 32, timed.length ? budgetTokens(timed.at(-1)!) : 0);
      if (!shape) break;
      timed.push({ ...shape, ms: budgetTokens(shape) / rate(budgetTokens(shape)) });
    }
    return timed;
  };

  test("keepClimbing + chooseBudget: a CPU-like curve stops after the first sizes and keeps 512; a GPU-like one climbs to the caps", () => {
    const c = climb(cpu);
    expect(c.map(budgetTokens)).toEqual([128, 256, 512]);
    expect(budgetTokens(chooseBudget(c, 512)!)).toBe(512);
    const g = climb(gpu);
    expect(budgetTokens(g.at(-1)!)).toBe(32 * 512);
    expect(budgetTokens(chooseBudget(g, 16384)!)).toBe(32 * 512);
    // A GPU-like curve leaves a CPU-like constant behind: far more than TOKEN_BUDGET_CLIMB times its tokens/s.
    expect(budgetTokens(chooseBudget(g, 512)!)).toBe(32 * 512);
    expect(c.length).toBe(TOKEN_BUDGET_FIRST);
  });

  test("keepClimbing: fewer than the first sizes always climb; after, only a gain of TOKEN_BUDGET_CLIMB", () => {
    const t = (tokens: number, perMs: number): BudgetTiming => ({ rows: tokens / 128, length: 128, ms: tokens / perMs });
    expect(keepClimbing([])).toBe(true);
    expect(keepClimbing([t(128, 10), t(256, 5)])).toBe(TOKEN_BUDGET_FIRST > 2);
    expect(keepClimbing([t(128, 10), t(256, 10), t(512, 10 * TOKEN_BUDGET_CLIMB)])).toBe(true);
    expect(keepClimbing([t(128, 10), t(256, 10), t(512, 10 * TOKEN_BUDGET_CLIMB - 0.01)])).toBe(false);
  });

  test("chooseBudget: the size nearest the constant unless another is TOKEN_BUDGET_CLIMB times as fast; then the largest within the tolerance of the best", () => {
    const t = (tokens: number, perMs: number): BudgetTiming => ({ rows: tokens / 128, length: 128, ms: tokens / perMs });
    // Timing noise (5-10% between starts on a quiet machine) does not move the budget off the constant.
    expect(budgetTokens(chooseBudget([t(128, 8), t(256, 10), t(512, 9.2)], 512)!)).toBe(512);
    expect(budgetTokens(chooseBudget([t(128, 8), t(256, 9), t(512, 10), t(1024, 10.5)], 512)!)).toBe(512);
    // A clear gain does, to the largest size within the tolerance of the best.
    expect(budgetTokens(chooseBudget([t(128, 5), t(256, 10 * TOKEN_BUDGET_CLIMB), t(512, 10)], 512)!)).toBe(256);
    expect(budgetTokens(chooseBudget([t(128, 9), t(256, 10), t(512, 10), t(1024, 11), t(2048, 11 * TOKEN_BUDGET_TOLERANCE)], 512)!)).toBe(2048);
    expect(budgetTokens(chooseBudget([t(128, 9), t(256, 10), t(512, 10), t(1024, 11), t(2048, 11 * TOKEN_BUDGET_TOLERANCE - 0.01)], 512)!)).toBe(1024);
    // Nearest the constant on a log scale: 16384 with the climb stopped at 4096.
    expect(budgetTokens(chooseBudget([t(1024, 9), t(2048, 10), t(4096, 10.5)], 16384)!)).toBe(4096);
    expect(chooseBudget([], 512)).toBeNull();
    expect(budgetTokens(chooseBudget([t(128, 9), { rows: 2, length: 128, ms: Infinity }], 512)!)).toBe(128);
  });
});

describe("calibrationTrusted", () => {
  test("warm-up timings count while other processes use at most max(0.25, cores / 8) cores; no reading trusts them", () => {
    expect(calibrationTrusted(null, 2)).toBe(true);
    expect(calibrationTrusted(0, 2)).toBe(true);
    expect(calibrationTrusted(0.25, 2)).toBe(true);
    expect(calibrationTrusted(0.26, 2)).toBe(false);
    expect(calibrationTrusted(1, 2)).toBe(false);
    expect(calibrationTrusted(1, 8)).toBe(true);
    expect(calibrationTrusted(1.01, 8)).toBe(false);
    expect(calibrationTrusted(7.9, 64)).toBe(true);
    expect(calibrationTrusted(8.1, 64)).toBe(false);
  });
});
