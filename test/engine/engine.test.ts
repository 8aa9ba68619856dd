import { describe, expect, test } from "bun:test";
import { Engine } from "../../src/engine/engine";
import type { Runner } from "../../src/tasks/runner";
import { Cancelled, InferenceFailed, Overloaded, Unavailable } from "../../src/errors";
import type { BatchTensors } from "../../src/model/session";
import type { Encoded } from "../../src/tokenize/encode";

const enc = (...ids: number[]): Encoded => ({ ids: Int32Array.from(ids), typeIds: null });
const ofLength = (n: number, v = 7): Encoded => enc(...Array(n).fill(v));

/** A runner that records batches and answers each row with the sum of its ids; it can be held open. */
function recordingRunner() {
  const batches: BatchTensors[] = [];
  let gate: Promise<void> | null = null;
  let open: (() => void) | null = null;
  const runner: Runner<number> = {
    async run(t) {
      batches.push(t);
      if (gate) await gate;
      const out: number[] = [];
      for (let b = 0; b < t.batch; b++) {
        let s = 0;
        for (let i = 0; i < t.seqLen; i++) if (t.attentionMask[b * t.seqLen + i]) s += t.inputIds[b * t.seqLen + i]!;
        out.push(s);
      }
      return out;
    },
  };
  return {
    runner,
    batches,
    hold() { gate = new Promise((r) => (open = r)); },
    release() { gate = null; open?.(); },
  };
}

const limits = { maxBatchSize: 4, maxBatchTokens: 1000, maxQueueSize: 100 };

describe("Engine", () => {
  test("refuses work while loading, answers in order once started", async () => {
    const r = recordingRunner();
    const e = new Engine("m", r.runner, 0, limits);
    await expect(e.submit([enc(1)])).rejects.toBeInstanceOf(Unavailable);
    e.start();
    const res = await e.submit([enc(1, 2), enc(3), enc(4, 4, 4)]);
    expect(res.results).toEqual([3, 3, 12]);
  });

  test("merges concurrent requests into shared batches", async () => {
    const r = recordingRunner();
    const e = new Engine("m", r.runner, 0, { ...limits, maxBatchSize: 8 });
    e.start();
    r.hold();
    const first = e.submit([enc(1)]);
    // While the first batch is held, eight single-input requests queue up.
    const rest = Array.from({ length: 8 }, (_, i) => e.submit([enc(i + 10)]));
    r.release();
    await first;
    const results = await Promise.all(rest);
    expect(results.map((x) => x.results[0])).toEqual([10, 11, 12, 13, 14, 15, 16, 17]);
    // One batch for the first request, then the eight together (the prepared batch is topped up).
    expect(r.batches.map((b) => b.batch)).toEqual([1, 8]);
  });

  test("inputs of different task adapters (Jina v3 task_id) never share a batch; each batch carries its task", async () => {
    const r = recordingRunner();
    const e = new Engine("m", r.runner, 0, { ...limits, maxBatchSize: 8 });
    e.start();
    r.hold();
    const first = e.submit([{ ...enc(1), taskId: 0 }]);
    const tasked = (id: number, taskId: number): Encoded => ({ ...enc(id), taskId });
    // Queued while the first batch is held: tasks 1, 0, 1, 2, 0 interleaved in one request and alone.
    const mixed = e.submit([tasked(10, 1), tasked(11, 0), tasked(12, 1)]);
    const alone = [e.submit([tasked(13, 2)]), e.submit([tasked(14, 0)])];
    r.release();
    await first;
    expect((await mixed).results).toEqual([10, 11, 12]);
    expect((await Promise.all(alone)).map((x) => x.results[0])).toEqual([13, 14]);
    for (const b of r.batches) expect(b.taskId).toBeDefined();
    const rows = r.batches.map((b) => ({ task: b.taskId, ids: Array.from(b.inputIds) }));
    // The oldest input's task goes first; each batch holds one task.
    expect(rows).toEqual([{ task: 0, ids: [1] }, { task: 1, ids: [10, 12] }, { task: 0, ids: [11, 14] }, { task: 2, ids: [13] }]);
  });

  test("batches obey the token budget", async () => {
    const r = recordingRunner();
    const e = new Engine("m", r.runner, 0, { maxBatchSize: 32, maxBatchTokens: 20, maxQueueSize: 100 });
    e.start();
    r.hold();
    const hold = e.submit([enc(1)]);
    const all = e.submit(Array.from({ length: 10 }, () => ofLength(5)));
    r.release();
    await hold;
    await all;
    for (const b of r.batches) expect(b.batch * b.seqLen).toBeLessThanOrEqual(20);
    expect(r.batches.slice(1).reduce((s, b) => s + b.batch, 0)).toBe(10);
  });

  test("queue limit: a request that does not fit gets Overloaded, accepted work is kept", async () => {
    const r = recordingRunner();
    const e = new Engine("m", r.runner, 0, { maxBatchSize: 2, maxBatchTokens: 1000, maxQueueSize: 5 });
    e.start();
    r.hold();
    const running = e.submit([enc(1)]);
    const accepted = e.submit([enc(2), enc(3), enc(4)]);
    const refused = e.submit([enc(5), enc(6), enc(7), enc(8), enc(9), enc(10)]);
    await expect(refused).rejects.toBeInstanceOf(Overloaded);
    const err = await refused.catch((x) => x);
    expect(err.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    r.release();
    expect((await running).results).toEqual([1]);
    expect((await accepted).results).toEqual([2, 3, 4]);
  });

  test("cancellation drops queued inputs of that request only", async () => {
    const r = recordingRunner();
    const e = new Engine("m", r.runner, 0, { maxBatchSize: 1, maxBatchTokens: 1000, maxQueueSize: 100 });
    e.start();
    r.hold();
    const running = e.submit([enc(1)]);
    const ctrl = new AbortController();
    const cancelled = e.submit([enc(50), enc(51), enc(52)], ctrl.signal);
    const kept = e.submit([enc(2)]);
    ctrl.abort();
    await expect(cancelled).rejects.toBeInstanceOf(Cancelled);
    r.release();
    await running;
    expect((await kept).results).toEqual([2]);
    // Rows 50..52 never reached the runner (the prepared one, if any, was dropped on top-up).
    const seen = r.batches.flatMap((b) => Array.from(b.inputIds));
    expect(seen).not.toContain(51);
    expect(seen).not.toContain(52);
    expect(e.queued).toBe(0);
  });

  test("an already aborted signal never queues", async () => {
    const r = recordingRunner();
    const e = new Engine("m", r.runner, 0, limits);
    e.start();
    const ctrl = new AbortController();
    ctrl.abort();
    await expect(e.submit([enc(1)], ctrl.signal)).rejects.toBeInstanceOf(Cancelled);
  });

  test("a failing batch fails its requests only; the engine keeps serving; three in a row mark it broken", async () => {
    let fail = 0;
    const runner: Runner<number> = {
      async run(t) {
        if (fail-- > 0) throw new Error("boom");
        return Array(t.batch).fill(1);
      },
    };
    const e = new Engine("m", runner, 0, limits);
    e.start();
    fail = 1;
    await expect(e.submit([enc(1)])).rejects.toBeInstanceOf(InferenceFailed);
    expect((await e.submit([enc(1)])).results).toEqual([1]);
    fail = 3;
    for (let i = 0; i < 3; i++) await expect(e.submit([enc(1)])).rejects.toBeInstanceOf(InferenceFailed);
    expect(e.state).toBe("broken");
    expect(e.lastError).toBe("boom");
    expect((await e.submit([enc(1)])).results).toEqual([1]);
    expect(e.state).toBe("ready");
  });

  test("idle resolves once queued work is done", async () => {
    const r = recordingRunner();
    const e = new Engine("m", r.runner, 0, { ...limits, maxBatchSize: 1 });
    e.start();
    r.hold();
    const a = e.submit([enc(1)]);
    const b = e.submit([enc(2)]);
    let idle = false;
    const waiting = e.idle().then(() => (idle = true));
    await Bun.sleep(5);
    expect(idle).toBe(false);
    r.release();
    expect((await a).results).toEqual([1]);
    expect((await b).results).toEqual([2]);
    await waiting;
    expect(e.queued).toBe(0);
  });

  test("reports queue and inference time", async () => {
    const r = recordingRunner();
    const e = new Engine("m", r.runner, 0, limits);
    e.start();
    const res = await e.submit([enc(1), enc(2)]);
    expect(res.queueMs).toBeGreaterThanOrEqual(0);
    expect(res.inferenceMs).toBeGreaterThanOrEqual(0);
  });

  test("batches are cut when a runner frees, from everything queued by then", async () => {
    const r = recordingRunner();
    const e = new Engine("m", r.runner, 0, { maxBatchSize: 8, maxBatchTokens: 1000, maxQueueSize: 100, runOverheadTokens: 24 });
    e.start();
    r.hold();
    const first = e.submit([ofLength(3)]);
    // Arriving one by one while the first batch runs: a batch cut ahead would have held only the first of them.
    const rest = [e.submit([ofLength(50)]), e.submit([ofLength(4)]), e.submit([ofLength(51)]), e.submit([ofLength(5)])];
    r.release();
    await first;
    await Promise.all(rest);
    // By length: the oldest (50) with 51; then 4 with 5.
    expect(r.batches.map((b) => [b.batch, b.seqLen])).toEqual([[1, 3], [2, 51], [2, 5]]);
  });

  test("several runners (session instances): each free one takes the next batch, and all of them are used", async () => {
    const a = recordingRunner();
    const b = recordingRunner();
    const e = new Engine("m", [a.runner, b.runner], 0, { maxBatchSize: 1, maxBatchTokens: 1000, maxQueueSize: 100 });
    expect(e.instances).toBe(2);
    e.start();
    a.hold();
    b.hold();
    const jobs = [1, 2, 3, 4].map((v) => e.submit([enc(v)]));
    // Two batches run at once, one per runner; the other two wait for a runner to free.
    expect(a.batches).toHaveLength(1);
    expect(b.batches).toHaveLength(1);
    expect(e.queued).toBe(2);
    b.release();
    await jobs[1];
    await Bun.sleep(0);
    // The runner that freed took the rest one after another; the held one still has its first batch.
    expect(b.batches.length).toBe(3);
    expect(a.batches).toHaveLength(1);
    a.release();
    expect((await Promise.all(jobs)).map((x) => x.results[0])).toEqual([1, 2, 3, 4]);
  });

  test("setInstances: the runner is dispatched to that many times at once; refused while a batch runs", async () => {
    const r = recordingRunner();
    const e = new Engine("m", r.runner, 0, { maxBatchSize: 1, maxBatchTokens: 1000, maxQueueSize: 100 });
    e.start();
    e.setInstances(3);
    expect(e.instances).toBe(3);
    r.hold();
    const jobs = [1, 2, 3, 4].map((v) => e.submit([enc(v)]));
    // Three batches in flight on the one runner (a session picking a free instance for each), the fourth queued.
    expect(r.batches).toHaveLength(3);
    expect(e.queued).toBe(1);
    expect(() => e.setInstances(1)).toThrow(/while a batch runs/);
    r.release();
    expect((await Promise.all(jobs)).map((x) => x.results[0])).toEqual([1, 2, 3, 4]);
    e.setInstances(1);
    expect(e.instances).toBe(1);
  });
});
