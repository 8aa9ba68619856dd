import { describe, expect, test } from "bun:test";
import { Engine } from "../../src/engine/engine";
import { DEFAULT_REPLAY, replay, type ReplayOptions } from "../../bench/replay";

// Lengths spread like the benchmark's workload (short queries, passages up to ~256 tokens), from a fixed list.
const lengths = Array.from({ length: 300 }, (_, k) => (k % 10 < 3 ? 5 + ((k * 7) % 20) : 32 + ((k * 97) % 225)));
const options: ReplayOptions = { ...DEFAULT_REPLAY, requests: 600, lengths };

describe("replay (virtual clock)", () => {
  test("deterministic: the same options give the same batches, tokens and virtual times", async () => {
    const a = await replay(Engine, options);
    const b = await replay(Engine, options);
    expect(b).toEqual(a);
  });

  test("every request is answered once; real tokens are the requests' tokens; padding is what the batches added", async () => {
    const r = await replay(Engine, options);
    expect(r.requests).toBe(600);
    const sent = Array.from({ length: 600 }, (_, k) => lengths[k % lengths.length]!).reduce((s, l) => s + l, 0);
    expect(r.realTokens).toBe(sent);
    expect(r.paddedTokens).toBeGreaterThanOrEqual(r.realTokens);
    expect(r.meanBatch * r.batches).toBeCloseTo(600, 6);
    // Saturated: 32 clients keep the queue full enough to batch.
    expect(r.meanBatch).toBeGreaterThan(1.5);
  });

  test("one client at a time runs one input per batch with no padding", async () => {
    const r = await replay(Engine, { ...options, concurrency: 1, requests: 50 });
    expect(r.batches).toBe(50);
    expect(r.paddedTokens).toBe(r.realTokens);
  });
});
