// The inference worker behind ModelSession: what the session declares, and faults injected into the worker (it
// dies, throws, hangs): the batch is retried once on a replacement, a second loss is a WorkerFailed, and the
// session comes back on the next call.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { WorkerFailed } from "../../src/errors";
import { ModelSession, textFeeds, type BatchTensors } from "../../src/model/session";
import { fixture } from "../helpers";

const MODEL = join(fixture("bert-mean-norm"), "onnx", "model.onnx");

function batch(len: number): BatchTensors {
  const ids = Int32Array.from({ length: len }, (_, i) => 5 + i);
  return { batch: 1, seqLen: len, inputIds: ids, attentionMask: new Int32Array(len).fill(1), tokenTypeIds: null };
}

async function withSession(timeoutMs: number, body: (s: ModelSession, faults: string[]) => Promise<void>): Promise<void> {
  const faults: string[] = [];
  const s = await ModelSession.create(MODEL, { device: "cpu", numThreads: 1 }, { label: "t", timeoutMs, onFault: (r) => faults.push(r) });
  try {
    await body(s, faults);
  } finally {
    await s.release();
  }
}

describe("ModelSession in an inference worker", () => {
  test("reports the inputs as the model declares them: names, element types, dims", async () => {
    await withSession(0, async (s) => {
      expect(s.inputNames).toEqual(s.inputSpecs.map((i) => i.name));
      expect(s.inputNames).toContain("input_ids");
      const ids = s.inputSpecs.find((i) => i.name === "input_ids")!;
      expect(ids.type).toBe("int64");
      expect(ids.shape.length).toBe(2);
      // Dynamic axes come back as their symbolic names.
      expect(typeof ids.shape[1]).toBe("string");
      expect(s.status).toMatchObject({ state: "ready", restarts: 0, lastFault: null });
    });
  });

  test("runOutputs returns every asked output of one run, each as a run of that output alone gives it", async () => {
    await withSession(0, async (s) => {
      const outs = await s.runOutputs(textFeeds(batch(4), s.inputNames), s.outputNames);
      expect(outs.map((o) => o.name)).toEqual([...s.outputNames]);
      for (const o of outs) expect(Array.from(o.data)).toEqual(Array.from((await s.run(batch(4), o.name)).data));
      if (outs.length > 1) expect(outs[0]!.data.buffer).not.toBe(outs[1]!.data.buffer);
    });
  });

  for (const kind of ["exit", "throw"] as const) {
    test(`a worker that dies (${kind}) mid-run is replaced and the batch is retried on the new one`, async () => {
      await withSession(0, async (s, faults) => {
        const name = s.outputNames[0]!;
        const want = await s.run(batch(6), name);
        s.injectFault(kind);
        const got = await s.run(batch(6), name);
        expect(Array.from(got.data)).toEqual(Array.from(want.data));
        expect(faults.length).toBe(1);
        expect(faults[0]).toContain("exited");
        expect(s.status.state).toBe("ready");
        expect(s.status.restarts).toBe(1);
        if (kind === "throw") expect(s.status.lastFault).toContain("injected fault");
      });
    });
  }

  test("a worker that hangs past the timeout is replaced; the batch is answered by the replacement", async () => {
    // 1 s: under a loaded CI machine the replacement's own creation and run must fit well inside the timeout.
    await withSession(1000, async (s, faults) => {
      const name = s.outputNames[0]!;
      const want = await s.run(batch(5), name);
      s.injectFault("hang");
      // The main thread stays free while the worker is stuck: timers keep firing on time.
      let ticks = 0;
      const timer = setInterval(() => ticks++, 20);
      const t0 = performance.now();
      const got = await s.run(batch(5), name);
      clearInterval(timer);
      expect(performance.now() - t0).toBeGreaterThanOrEqual(950);
      expect(ticks).toBeGreaterThanOrEqual(10);
      expect(Array.from(got.data)).toEqual(Array.from(want.data));
      expect(faults).toHaveLength(1);
      expect(faults[0]).toContain("hung");
    });
  });

  test("a batch lost twice fails with WorkerFailed; a replacement that cannot start leaves the session failed until the next call tries again", async () => {
    await withSession(0, async (s) => {
      const name = s.outputNames[0]!;
      const want = await s.run(batch(3), name);
      // The run, the replacement's creation, and the second replacement's creation all die.
      s.injectFault("exit", 3);
      const err = await s.run(batch(3), name).catch((e) => e);
      expect(err).toBeInstanceOf(WorkerFailed);
      expect(s.status.state).toBe("failed");
      expect(s.status.restarts).toBe(2);
      const again = await s.run(batch(3), name);
      expect(Array.from(again.data)).toEqual(Array.from(want.data));
      expect(s.status.state).toBe("ready");
      expect(s.status.restarts).toBe(3);
    });
  });

  test("a failed session comes back by itself, without a call (a model no traffic reaches must not stay broken)", async () => {
    await withSession(0, async (s) => {
      const name = s.outputNames[0]!;
      s.injectFault("exit", 3);
      expect(await s.run(batch(3), name).catch((e) => e)).toBeInstanceOf(WorkerFailed);
      expect(s.status.state).toBe("failed");
      const until = performance.now() + 5000;
      while (s.status.state !== "ready" && performance.now() < until) await Bun.sleep(50);
      expect(s.status.state).toBe("ready");
      expect(s.status.restarts).toBe(3);
      expect((await s.run(batch(3), name)).data.every(Number.isFinite)).toBe(true);
    });
  });

  test("release while a run is stuck ends the worker and fails the run with WorkerFailed", async () => {
    const s = await ModelSession.create(MODEL, { device: "cpu", numThreads: 1 }, { timeoutMs: 0 });
    s.injectFault("hang");
    const pending = s.run(batch(3), s.outputNames[0]!).catch((e) => e);
    await Bun.sleep(50);
    await s.release();
    expect(await pending).toBeInstanceOf(WorkerFailed);
    expect(s.status.state).toBe("released");
  });

  test("two instances: runs started in the same tick go to different workers, so one stuck run leaves the other answering", async () => {
    const s = await ModelSession.create(MODEL, { device: "cpu", numThreads: 1 }, { timeoutMs: 0 }, undefined, 2);
    let stuck: Promise<unknown> = Promise.resolve();
    try {
      expect(s.instances).toBe(2);
      expect(s.instanceStatus).toMatchObject([{ state: "ready", restarts: 0, lastFault: null }, { state: "ready", restarts: 0, lastFault: null }]);
      const name = s.outputNames[0]!;
      const want = await s.run(batch(5), name);
      s.injectFault("hang");
      stuck = s.run(batch(5), name).catch((e) => e);
      // No await in between: the second run must not be given to the instance the first one just took.
      const free = await s.run(batch(5), name);
      expect(Array.from(free.data)).toEqual(Array.from(want.data));
    } finally {
      await s.release();
    }
    expect(await stuck).toBeInstanceOf(WorkerFailed);
  });
});
