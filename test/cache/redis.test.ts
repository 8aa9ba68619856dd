import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import "../helpers";
import { ResultCache, VECTOR_CODEC } from "../../src/cache/cache";
import { RedisStore } from "../../src/cache/redis";
import { Metrics } from "../../src/metrics";
import { startRedis, type TestRedis } from "../redis-server";

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

describe("RedisStore", () => {
  test("stores and reads binary values; two clients share them", async () => {
    const a = new RedisStore(redis.url, 2000);
    const b = new RedisStore(redis.url, 2000);
    const value = Uint8Array.of(0, 255, 10, 13, 0, 128, 7, 7);
    await a.set([["infinity:test:bin", value]]);
    const [got, missing] = await b.get(["infinity:test:bin", "infinity:test:none"]);
    expect(Array.from(got!)).toEqual(Array.from(value));
    expect(missing).toBeNull();
    a.close();
    b.close();
  });

  test("a Redis that goes away degrades to computing, and the cache comes back with it", async () => {
    const own = await startRedis();
    const metrics = new Metrics();
    const cache = new ResultCache(new RedisStore(own.url, 1000), metrics);
    let computed = 0;
    const compute = async (missing: number[]) => {
      computed += missing.length;
      return { results: missing.map((i) => Float32Array.of(i)), tokens: missing.map(() => 3), queueMs: 0, inferenceMs: 0 };
    };
    await cache.through("m", ["x"], VECTOR_CODEC, compute);
    expect((await cache.through("m", ["x"], VECTOR_CODEC, compute)).hits).toBe(1);
    await own.stop();
    const down = await cache.through("m", ["x", "y"], VECTOR_CODEC, compute);
    expect(down.results.map((r) => r[0])).toEqual([0, 1]);
    expect(down.hits).toBe(0);
    expect(metrics.cacheErrors.get({ op: "get" })).toBe(1);
    const back = await startRedis(own.port);
    try {
      // Past the retry window the cache reconnects on its own.
      (cache as unknown as { downUntil: number }).downUntil = Date.now() - 1;
      expect((await cache.through("m", ["z"], VECTOR_CODEC, compute)).hits).toBe(0);
      expect((await cache.through("m", ["z"], VECTOR_CODEC, compute)).hits).toBe(1);
    } finally {
      await cache.close();
      await back.stop();
    }
  });
});
