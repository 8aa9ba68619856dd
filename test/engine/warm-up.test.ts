// Warm-up: the rule that weighs calibrated session instances against their memory.
import { describe, expect, test } from "bun:test";
import { chooseInstances } from "../../src/engine/warm-up";

describe("chooseInstances: calibrated instances must pay for their memory", () => {
  const MB = 1048576;
  const base = { n: 2, threads: 1, allThreads: 2, oneTokensPerSecond: 1000, oneBytes: 150 * MB, manyBytes: 280 * MB, roomBytes: Infinity };

  test("kept only when they time at least as many times faster as they take memory", () => {
    // 280 / 150 = 1.87x the memory.
    expect(chooseInstances({ ...base, manyTokensPerSecond: 1860 }).keep).toBe(false);
    expect(chooseInstances({ ...base, manyTokensPerSecond: 1880 }).keep).toBe(true);
    const kept = chooseInstances({ ...base, manyTokensPerSecond: 2000 });
    expect(kept.reason).toBe("2 x 1 thread timed 2.00x as fast as 1 x 2 threads (2000 against 1000 tokens/s) for 1.87x the memory (280 MB against 150 MB); at least 1.87x: 2 instances");
    expect(chooseInstances({ ...base, manyTokensPerSecond: 1300 }).reason).toBe(
      "2 x 1 thread timed 1.30x as fast as 1 x 2 threads (1300 against 1000 tokens/s) for 1.87x the memory (280 MB against 150 MB); instances are kept from 1.87x: one session",
    );
  });

  test("a gain inside the timing noise is never enough, even when the instances take little more memory", () => {
    const cheap = { ...base, manyBytes: 155 * MB };
    expect(chooseInstances({ ...cheap, manyTokensPerSecond: 1090 }).keep).toBe(false);
    expect(chooseInstances({ ...cheap, manyTokensPerSecond: 1100 }).keep).toBe(true);
  });

  test("instances that do not fit what --max-models-memory-mb leaves are not kept, however fast", () => {
    const r = chooseInstances({ ...base, manyTokensPerSecond: 5000, roomBytes: 250 * MB });
    expect(r.keep).toBe(false);
    expect(r.reason).toMatch(/, over the 250 MB --max-models-memory-mb leaves it: one session$/);
  });
});
