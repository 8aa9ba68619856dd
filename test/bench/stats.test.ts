import { describe, expect, test } from "bun:test";
import { medianInterval, percentiles } from "../../bench/stats";

describe("medianInterval", () => {
  test("brackets the median of the order statistics at n/2 -+ 1.96 sqrt(n)/2", () => {
    // 1..400 shuffled: ranks 200 -+ 19.6 -> the 180th and the 221st values.
    const xs = Array.from({ length: 400 }, (_, i) => i + 1).sort((a, b) => ((a * 7919) % 401) - ((b * 7919) % 401));
    const { lo, hi } = medianInterval(xs);
    expect(lo).toBe(180);
    expect(hi).toBe(221);
    expect(percentiles(xs).p50).toBeGreaterThan(lo);
    expect(percentiles(xs).p50).toBeLessThan(hi);
  });

  test("covers the true median in about 95% of samples", () => {
    // Seeded exponential samples (median ln 2): the interval should miss in roughly 5% of 2000 trials.
    let state = 12345;
    const rand = () => ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) + 0.5) / 2 ** 32;
    let misses = 0;
    const trials = 2000;
    for (let t = 0; t < trials; t++) {
      const xs = Array.from({ length: 200 }, () => -Math.log(rand()));
      const { lo, hi } = medianInterval(xs);
      if (!(lo <= Math.LN2 && Math.LN2 <= hi)) misses++;
    }
    expect(misses / trials).toBeGreaterThan(0.02);
    expect(misses / trials).toBeLessThan(0.08);
  });

  test("too few samples give no interval; non-finite samples are ignored", () => {
    expect(Number.isNaN(medianInterval([1, 2, 3]).lo)).toBe(true);
    const { lo, hi } = medianInterval([...Array.from({ length: 100 }, (_, i) => i), NaN, Infinity]);
    expect(lo).toBeLessThan(50);
    expect(hi).toBeGreaterThan(49);
  });
});
