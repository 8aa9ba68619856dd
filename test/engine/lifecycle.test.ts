// The model lifecycle with fake models: shared loads, the load timeout, LRU eviction within the memory budget, the
// budget's 503, idle unloading, load failures.
import { describe, expect, test } from "bun:test";
import "../helpers";
import type { ModelConfig } from "../../src/config";
import { MemoryBudgetExceeded, ModelLoadFailed, ModelLoading } from "../../src/errors";
import { EVICTION_GRACE_MS, Lease, Lifecycle, ModelSlot } from "../../src/engine/lifecycle";
import type { ModelLayout } from "../../src/model/layout";
import { Metrics } from "../../src/metrics";

interface Fake {
  memoryBytes: number;
  busy: boolean;
  released: boolean;
}

const MB = 1048576;

function slot(name: string, weightMb: number, extra: Partial<ModelConfig> = {}): ModelSlot<Fake> {
  const config = { servedModelName: name, load: "on-demand", idleUnloadSeconds: 0, ...extra } as ModelConfig;
  return new ModelSlot<Fake>(config, { weightBytes: weightMb * MB } as ModelLayout, `scope-${name}`);
}

function setup(
  names: Array<[string, number]>,
  opts: { budgetMb?: number; timeoutMs?: number; loadMs?: number; measuredMb?: (name: string) => number; fail?: string | (() => boolean); retryMs?: number } = {},
) {
  const slots = new Map<string, ModelSlot<Fake>>();
  for (const [n, w] of names) slots.set(n, slot(n, w));
  const builds: string[] = [];
  const metrics = new Metrics();
  const lifecycle = new Lifecycle<Fake>(
    slots,
    {
      build: async (s) => {
        builds.push(s.name);
        await Bun.sleep(opts.loadMs ?? 5);
        if (typeof opts.fail === "function" ? opts.fail() : opts.fail === s.name) throw new Error(`cannot load ${s.name}`);
        return { memoryBytes: (opts.measuredMb?.(s.name) ?? s.layout.weightBytes / MB) * MB, busy: false, released: false };
      },
      isIdle: (m) => !m.busy,
      drained: async () => {},
      release: async (m) => {
        m.released = true;
      },
    },
    { maxModelsMemoryBytes: (opts.budgetMb ?? 0) * MB, loadTimeoutMs: opts.timeoutMs ?? 5000, loadRetryMs: opts.retryMs ?? 0 },
    metrics,
  );
  return { slots, builds, lifecycle, metrics, get: (n: string) => slots.get(n)! };
}

describe("Lifecycle", () => {
  test("concurrent requests share one load; the state goes unloaded -> loading -> ready", async () => {
    const { lifecycle, builds, get, metrics } = setup([["a", 10]], { loadMs: 30 });
    const a = get("a");
    expect(a.state).toBe("unloaded");
    const all = Promise.all(Array.from({ length: 8 }, () => lifecycle.acquire(a)));
    expect(a.state).toBe("loading");
    const models = await all;
    expect(new Set(models).size).toBe(1);
    expect(builds).toEqual(["a"]);
    expect(a.state).toBe("ready");
    expect(a.loadSeconds).toBeGreaterThan(0);
    expect(a.lastUsed).toBeGreaterThan(0);
    expect(metrics.modelLoads.get({ model: "a" })).toBe(1);
  });

  test("a request waits at most the load timeout: 503 model_loading with Retry-After; the load goes on", async () => {
    const { lifecycle, get } = setup([["a", 10]], { loadMs: 200, timeoutMs: 50 });
    const err = await lifecycle.acquire(get("a")).catch((e) => e);
    expect(err).toBeInstanceOf(ModelLoading);
    expect(err.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(err.message).toContain('model "a" is still loading');
    // The load goes on after the refusal: wait for it (bounded) rather than for a fixed time.
    for (const until = Date.now() + 10000; get("a").state !== "ready" && Date.now() < until;) await Bun.sleep(10);
    expect(get("a").state).toBe("ready");
  });

  test("the memory budget unloads the least recently used idle model first", async () => {
    const { lifecycle, get, metrics } = setup([["a", 40], ["b", 40], ["c", 40]], { budgetMb: 100 });
    const a = await lifecycle.acquire(get("a"));
    await Bun.sleep(5);
    await lifecycle.acquire(get("b"));
    await Bun.sleep(EVICTION_GRACE_MS + 20);
    get("b").lastUsed = Date.now() - EVICTION_GRACE_MS - 10; // b used after a, both past the grace
    await lifecycle.acquire(get("c"));
    expect(get("a").state).toBe("unloaded");
    expect(a.released).toBe(true);
    expect(get("b").state).toBe("ready");
    expect(get("c").state).toBe("ready");
    expect(metrics.modelEvictions.get({ model: "a" })).toBe(1);
    expect(metrics.modelUnloads.get({ model: "a", reason: "evicted" })).toBe(1);
    // Reloading a uses its measured memory and evicts b, now the least recently used.
    await Bun.sleep(EVICTION_GRACE_MS + 20);
    await lifecycle.acquire(get("a"));
    expect(get("b").state).toBe("unloaded");
  });

  test("no idle model to unload: 503 naming the budget and what is loaded", async () => {
    const { lifecycle, get } = setup([["a", 60], ["b", 60]], { budgetMb: 100 });
    const a = await lifecycle.acquire(get("a"));
    a.busy = true;
    const err = await lifecycle.acquire(get("b")).catch((e) => e);
    expect(err).toBeInstanceOf(MemoryBudgetExceeded);
    expect(err.message).toContain("--max-models-memory-mb 100");
    expect(err.message).toContain("a (60 MB, busy)");
    expect(err.message).toContain('loading model "b" needs about 60 MB');
    expect(get("b").state).toBe("unloaded");
    expect(get("a").state).toBe("ready");
    const alone = setup([["big", 200]], { budgetMb: 100 });
    const tooBig = await alone.lifecycle.acquire(alone.get("big")).catch((e) => e);
    expect(tooBig).toBeInstanceOf(MemoryBudgetExceeded);
    expect(tooBig.message).toContain("more than --max-models-memory-mb 100");
  });

  test("a load that measures more than expected trims other idle models afterwards", async () => {
    const { lifecycle, get } = setup([["a", 10], ["b", 10]], { budgetMb: 100, measuredMb: (n) => (n === "a" ? 60 : 50) });
    await lifecycle.acquire(get("a"));
    await Bun.sleep(EVICTION_GRACE_MS + 20);
    await lifecycle.acquire(get("b"));
    expect(get("a").state).toBe("unloaded");
    expect(get("b").state).toBe("ready");
  });

  test("idle models are unloaded after their --idle-unload-seconds; a new request loads them again", async () => {
    const slots = new Map([["a", slot("a", 1, { idleUnloadSeconds: 1 })], ["b", slot("b", 1)]]);
    const metrics = new Metrics();
    const lifecycle = new Lifecycle<Fake>(slots, {
      build: async () => ({ memoryBytes: MB, busy: false, released: false }),
      isIdle: (m) => !m.busy,
      drained: async () => {},
      release: async (m) => void (m.released = true),
    }, { maxModelsMemoryBytes: 0, loadTimeoutMs: 1000, loadRetryMs: 0 }, metrics);
    await lifecycle.acquire(slots.get("a")!);
    await lifecycle.acquire(slots.get("b")!);
    lifecycle.startSweeper();
    try {
      // Until the sweeper has unloaded it (bounded), not a fixed time: a loaded machine delays the timer.
      for (const until = Date.now() + 10000; slots.get("a")!.state !== "unloaded" && Date.now() < until;) await Bun.sleep(20);
      expect(slots.get("a")!.state).toBe("unloaded");
      expect(slots.get("b")!.state).toBe("ready");
      expect(metrics.modelUnloads.get({ model: "a", reason: "idle" })).toBe(1);
      await lifecycle.acquire(slots.get("a")!);
      expect(slots.get("a")!.state).toBe("ready");
      expect(metrics.modelLoads.get({ model: "a" })).toBe(2);
    } finally {
      lifecycle.stop();
    }
  });

  test("a failed load answers 503 model_load_failed with Retry-After; no new try until the backoff has passed, then doubling", async () => {
    let failing = true;
    // Waits with hundreds of milliseconds either side of each backoff's end: a loaded machine stalls this long.
    const { lifecycle, get, builds, metrics } = setup([["a", 1]], { fail: () => failing, retryMs: 600 });
    const err = await lifecycle.acquire(get("a")).catch((e) => e);
    expect(err).toBeInstanceOf(ModelLoadFailed);
    expect(err.code).toBe("model_load_failed");
    expect(err.message).toContain("cannot load a");
    expect(err.retryAfterSeconds).toBe(1);
    expect(get("a").state).toBe("broken");
    expect(get("a").loadError).toContain("cannot load a");
    expect(metrics.modelLoadFailures.get({ model: "a" })).toBe(1);
    // A burst within the backoff: every request refused at once with the load's error, no load started.
    const burst = await Promise.all(Array.from({ length: 20 }, () => lifecycle.acquire(get("a")).catch((e) => e)));
    for (const e of burst) {
      expect(e).toBeInstanceOf(ModelLoadFailed);
      expect(e.message).toContain("cannot load a");
      expect(e.message).toContain("--model-load-retry-seconds");
      expect(e.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    }
    expect(builds).toEqual(["a"]);
    // After the backoff the next request tries again (and fails: the next wait doubles).
    await Bun.sleep(650);
    await lifecycle.acquire(get("a")).catch(() => {});
    expect(builds).toEqual(["a", "a"]);
    expect(get("a").failures).toBe(2);
    const wait = get("a").retryAt - Date.now();
    expect(wait).toBeGreaterThan(900);
    expect(wait).toBeLessThanOrEqual(1200);
    await Bun.sleep(400);
    await lifecycle.acquire(get("a")).catch(() => {});
    expect(builds).toEqual(["a", "a"]);
    // An operator's load (POST /models/{name}/load) is not held back; a success clears the failures.
    failing = false;
    lifecycle.retryNow(get("a"));
    await lifecycle.acquire(get("a"));
    expect(builds).toEqual(["a", "a", "a"]);
    expect([get("a").state, get("a").failures, get("a").retryAt, get("a").loadError]).toEqual(["ready", 0, 0, null]);
  });

  test("with no backoff (--model-load-retry-seconds 0) each request tries the load again", async () => {
    const { lifecycle, get, builds } = setup([["a", 1]], { fail: () => true, retryMs: 0 });
    for (let i = 0; i < 3; i++) expect(await lifecycle.acquire(get("a")).catch((e) => e)).toBeInstanceOf(ModelLoadFailed);
    expect(builds).toEqual(["a", "a", "a"]);
  });


  test("a model a request holds is never evicted: the other load gets 503 naming it in use; after the request it is", async () => {
    const { lifecycle, get } = setup([["a", 60], ["b", 60]], { budgetMb: 100 });
    const lease = new Lease();
    const a = await lifecycle.acquire(get("a"), lease);
    // Past the grace, engine idle (the request is, say, fetching an image or reading the cache): still held.
    await Bun.sleep(EVICTION_GRACE_MS + 20);
    expect(get("a").leases).toBe(1);
    const err = await lifecycle.acquire(get("b")).catch((e) => e);
    expect(err).toBeInstanceOf(MemoryBudgetExceeded);
    expect(err.message).toContain("a (60 MB, in use by 1 request)");
    expect(a.released).toBe(false);
    expect(get("a").state).toBe("ready");
    // The same request looking a up again gets the model it holds, and holds it once.
    expect(await lifecycle.acquire(get("a"), lease)).toBe(a);
    expect(get("a").leases).toBe(1);
    lease.release();
    expect(get("a").leases).toBe(0);
    await Bun.sleep(EVICTION_GRACE_MS + 20);
    await lifecycle.acquire(get("b"));
    expect(a.released).toBe(true);
    expect(get("a").state).toBe("unloaded");
  });

  test("an idle unload skips a held model; an admin unload waits for its requests, which keep their model", async () => {
    const slots = new Map([["a", slot("a", 1, { idleUnloadSeconds: 1 })]]);
    const lifecycle = new Lifecycle<Fake>(slots, {
      build: async () => ({ memoryBytes: MB, busy: false, released: false }),
      isIdle: (m) => !m.busy,
      drained: async () => {},
      release: async (m) => void (m.released = true),
    }, { maxModelsMemoryBytes: 0, loadTimeoutMs: 5000, loadRetryMs: 0 }, null);
    const a = slots.get("a")!;
    const lease = new Lease();
    const first = await lifecycle.acquire(a, lease);
    lifecycle.startSweeper();
    try {
      // Held for well past its idle time: the sweeper leaves it.
      await Bun.sleep(1800);
      expect(a.state).toBe("ready");
      expect(first.released).toBe(false);
      // An admin unload waits for the request; the request's own lookups still get its model meanwhile.
      const unloading = lifecycle.unload(a, "admin");
      await Bun.sleep(100);
      expect(first.released).toBe(false);
      expect(await lifecycle.acquire(a, lease)).toBe(first);
      lease.release();
      await unloading;
      expect(first.released).toBe(true);
      // A fresh request loads it again.
      const second = await lifecycle.acquire(a);
      expect(second).not.toBe(first);
    } finally {
      lifecycle.stop();
    }
  });

  test("unload releases the model; a request during the unload waits for it and loads again", async () => {
    const { lifecycle, get, builds } = setup([["a", 1]]);
    const first = await lifecycle.acquire(get("a"));
    const unloading = lifecycle.unload(get("a"), "admin");
    const again = lifecycle.acquire(get("a"));
    await unloading;
    expect(first.released).toBe(true);
    const second = await again;
    expect(second).not.toBe(first);
    expect(builds).toEqual(["a", "a"]);
  });

  test("before a first load, a model with --instances N is expected to take its weights N times (each instance holds them)", async () => {
    const slots = new Map([["two", slot("two", 30, { instances: 2 })], ["one", slot("one", 30, { instances: 0 })]]);
    expect(slots.get("two")!.expectedBytes).toBe(60 * MB);
    expect(slots.get("one")!.expectedBytes).toBe(30 * MB);
    const lifecycle = new Lifecycle<Fake>(
      slots,
      { build: async (s) => ({ memoryBytes: s.expectedBytes, busy: false, released: false }), isIdle: () => true, drained: async () => {}, release: async () => {} },
      { maxModelsMemoryBytes: 50 * MB, loadTimeoutMs: 5000, loadRetryMs: 0 },
      null,
    );
    await expect(lifecycle.acquire(slots.get("two")!)).rejects.toThrow(/model "two" needs about 60 MB, more than --max-models-memory-mb 50 allows/);
    await lifecycle.acquire(slots.get("one")!);
  });

  test("roomFor: what the budget leaves a model beside the other loaded models (Infinity without a budget)", async () => {
    const { lifecycle, get } = setup([["a", 30], ["b", 10]], { budgetMb: 100 });
    await lifecycle.acquire(get("a"));
    expect(lifecycle.roomFor("b")).toBe(70 * MB);
    expect(lifecycle.roomFor("a")).toBe(100 * MB);
    expect(setup([["a", 30]]).lifecycle.roomFor("a")).toBe(Infinity);
  });
});
