import { describe, expect, test } from "bun:test";
import { Engine } from "../../src/engine/engine";
import { featureBatches, type FeatureBatch } from "../../src/tasks/batch-input";
import type { Runner } from "../../src/tasks/runner";

describe("featureBatches", () => {
  test("stacks fixed-shape tensors; each costs one unit of the budget", () => {
    const b = featureBatches([2, 3]);
    expect(b.lengthOf(new Float32Array(6))).toBe(1);
    const { tensors, padded } = b.assemble([Float32Array.from([1, 2, 3, 4, 5, 6]), Float32Array.from([7, 8, 9, 10, 11, 12])]);
    expect(tensors.dims).toEqual([2, 2, 3]);
    expect(Array.from(tensors.data)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(padded).toBe(2);
    expect(() => b.assemble([new Float32Array(5)])).toThrow("2x3");
  });

  test("an engine over feature batches merges requests up to the batch size, results in order", async () => {
    const batches: number[] = [];
    const runner: Runner<number, FeatureBatch> = {
      async run(t) {
        batches.push(t.dims[0]!);
        return Array.from({ length: t.dims[0]! }, (_, i) => t.data[i * 2]!);
      },
    };
    const e = new Engine<number, Float32Array, FeatureBatch>("m", runner, featureBatches([2]), { maxBatchSize: 3, maxBatchTokens: 3, maxQueueSize: 100 });
    e.start();
    const x = (v: number) => Float32Array.from([v, 0]);
    const [a, b] = await Promise.all([e.submit([x(1), x(2)]), e.submit([x(3), x(4), x(5)])]);
    expect(a.results).toEqual([1, 2]);
    expect(b.results).toEqual([3, 4, 5]);
    expect(Math.max(...batches)).toBeLessThanOrEqual(3);
    expect(batches.reduce((s, n) => s + n, 0)).toBe(5);
  });
});
