import { describe, expect, test } from "bun:test";
import { fitRunOverhead, paddingOf, RUN_OVERHEAD_RANGE, selectBatch, windowFor } from "../../src/engine/batcher";

const q = (...lengths: number[]) => lengths.map((length) => ({ length }));
// Padding cap 1 (off) and no run-overhead allowance unless a test sets them.
const limits = (maxBatchSize: number, maxBatchTokens: number, window = 64, maxPadding = 1, runOverheadTokens = 0) => ({ maxBatchSize, maxBatchTokens, window, maxPadding, runOverheadTokens });

describe("selectBatch", () => {
  test("empty queue gives no batch", () => {
    expect(selectBatch([], limits(4, 100))).toEqual([]);
  });

  test("takes everything when it fits", () => {
    expect(selectBatch(q(5, 7, 6), limits(8, 1000))).toEqual([0, 1, 2]);
  });

  test("caps by batch size and always includes the oldest input", () => {
    const picked = selectBatch(q(50, 5, 5, 5, 5, 49, 48), limits(3, 10_000));
    expect(picked).toHaveLength(3);
    expect(picked).toContain(0);
    // Around the oldest (50), the nearest lengths are 49 and 48: less padding than the short ones.
    expect(picked.sort()).toEqual([0, 5, 6]);
  });

  test("groups similar lengths to keep padding small", () => {
    const queue = q(10, 100, 11, 101, 12, 99);
    const first = selectBatch(queue, limits(3, 10_000));
    expect(first).toEqual([0, 2, 4]);
    expect(paddingOf(first.map((i) => queue[i]!.length))).toBe(3);
  });

  test("respects the token budget: padded length x batch size", () => {
    const picked = selectBatch(q(30, 30, 30, 30), limits(32, 100));
    expect(picked).toEqual([0, 1, 2]);
    const mixed = q(10, 40, 10, 10);
    const m = selectBatch(mixed, limits(32, 45));
    // 10+10+10+10 = 4 x 10 = 40 fits; adding the 40-long input would make 5 x 40... it is left out.
    expect(m).toEqual([0, 2, 3]);
    const lengths = m.map((i) => mixed[i]!.length);
    expect(Math.max(...lengths) * lengths.length).toBeLessThanOrEqual(45);
  });

  test("an input longer than the budget runs alone", () => {
    expect(selectBatch(q(500, 3, 3), limits(8, 100))).toEqual([0]);
  });

  test("only the window is considered", () => {
    const queue = q(10, 90, 90, 90, 10);
    // The window (2) hides the later 10-long input.
    expect(selectBatch(queue, limits(2, 10_000, 2))).toEqual([0, 1]);
    expect(selectBatch(queue, limits(2, 10_000, 5))).toEqual([0, 4]);
  });

  test("no starvation: a long input at the head is served next even with many short ones behind", () => {
    const queue = q(200, ...Array(100).fill(3));
    expect(selectBatch(queue, limits(4, 100_000))).toContain(0);
  });

  test("the padding cap keeps inputs of very different lengths apart", () => {
    const queue = q(100, 5, 98, 6, 97);
    // Without a cap the five run together (lengths 5 and 6 padded to 100).
    expect(selectBatch(queue, limits(8, 10_000, 64, 1))).toEqual([0, 1, 2, 3, 4]);
    // With 5%, only the long ones share a batch; the short ones wait for their own.
    const capped = selectBatch(queue, limits(8, 10_000, 64, 0.05));
    expect(capped).toEqual([0, 2, 4]);
    const lengths = capped.map((i) => queue[i]!.length);
    expect(paddingOf(lengths) / (Math.max(...lengths) * lengths.length)).toBeLessThanOrEqual(0.05);
    expect(selectBatch(q(50, 100, 51), limits(8, 10_000, 64, 0.05))).toEqual([0, 2]);
    expect(selectBatch(q(5, 100, 6), limits(8, 10_000, 64, 0.05))).toEqual([0]);
  });

  test("short inputs batch past the padding cap while the padding stays under the runs it saves", () => {
    // 5 and 6: one padding token is 8% of the batch, over a 5% cap, but far less than a run's overhead.
    expect(selectBatch(q(5, 100, 6), limits(8, 10_000, 64, 0.05, 24))).toEqual([0, 2]);
    // Eight short inputs of 4-30 tokens: up to 7 x 24 = 168 padding tokens are worth it; they pad 8 x 30 - 120 = 120.
    const short = q(10, 4, 30, 12, 20, 8, 16, 20);
    expect(selectBatch(short, limits(8, 10_000, 64, 0.05, 24))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // Long inputs of different lengths still wait for their own: 100 and 200 would pad 100 tokens for one run saved.
    expect(selectBatch(q(100, 200, 101), limits(8, 10_000, 64, 0.05, 24))).toEqual([0, 2]);
    // The allowance is (n - 1) runs' worth: 60 and 50 pad 10 tokens (allowed up to 24); adding 20 would make 50
    // padding tokens in a batch of three, over the 48 its two saved runs allow.
    expect(selectBatch(q(60, 50, 20), limits(8, 10_000, 64, 0.05, 24))).toEqual([0, 1]);
    expect(selectBatch(q(60, 50, 22), limits(8, 10_000, 64, 0.05, 24))).toEqual([0, 1, 2]);
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
