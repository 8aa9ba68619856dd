// How the limit cuts the sorted pool by a token budget (pure; no model is loaded).
import { describe, expect, test } from "bun:test";
import { batchingLabel, tokenBudgetBatches } from "../../bench/limit";
import type { WorkloadText } from "../../bench/workload";

/** A sorted pool with lengths spread like the workload (seeded, so the test is the same every run). */
function pool(n: number): WorkloadText[] {
  let x = 7;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2147483648) / 2147483648);
  const lengths = Array.from({ length: n }, () => 5 + Math.floor(rand() * rand() * 300));
  return lengths.sort((a, b) => a - b).map((len, i) => ({ text: `t${i}`, ids: new Int32Array(len) }));
}

const padded = (b: WorkloadText[]) => b.length * Math.max(...b.map((t) => t.ids.length));

describe("limit: batches cut by a token budget", () => {
  const sorted = pool(2048);

  test("with a large sample every input is covered once, in order, and each batch fits the budget", () => {
    for (const budget of [256, 512, 1024]) {
      const batches = tokenBudgetBatches(sorted, budget, 1e9);
      expect(batches.flat()).toEqual(sorted);
      for (const b of batches) {
        // A batch is full: one more neighbour would have broken the budget.
        expect(padded(b) <= budget || b.length === 1).toBe(true);
      }
      for (let i = 0; i + 1 < batches.length; i++) {
        const next = batches[i + 1]![0]!.ids.length;
        expect((batches[i]!.length + 1) * next).toBeGreaterThan(budget);
      }
    }
  });

  test("an input longer than the budget runs alone", () => {
    const long = [...sorted.slice(0, 3), { text: "long", ids: new Int32Array(600) }];
    const batches = tokenBudgetBatches(long, 512, 1e9);
    expect(batches[batches.length - 1]!.map((t) => t.text)).toEqual(["long"]);
  });

  test("a sample takes evenly spaced batches holding about the requested number of inputs", () => {
    const all = tokenBudgetBatches(sorted, 512, 1e9);
    const sample = tokenBudgetBatches(sorted, 512, 256);
    const inputs = sample.reduce((s, b) => s + b.length, 0);
    expect(inputs).toBeGreaterThan(128);
    expect(inputs).toBeLessThan(512);
    // Spread over the whole length range: the short end and the long end are both represented.
    expect(sample[0]![0]!.ids.length).toBeLessThan(all[Math.floor(all.length / 4)]![0]!.ids.length);
    expect(sample[sample.length - 1]![0]!.ids.length).toBeGreaterThan(all[Math.floor((3 * all.length) / 4)]![0]!.ids.length);
    for (const b of sample) expect(all).toContainEqual(b);
  });

  test("labels", () => {
    expect(batchingLabel({ batchSize: 4, batchTokens: 0 })).toBe("4 inputs");
    expect(batchingLabel({ batchSize: 1, batchTokens: 0 })).toBe("1 input");
    expect(batchingLabel({ batchSize: 0, batchTokens: 512 })).toBe("<= 512 tokens");
  });
});
