// ModelSession: the session runs in its own inference worker; the main thread stays free while it runs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ModelLoadError } from "../../src/errors";
import { halfToFloat, sessionOptions } from "../../src/model/onnx";
import { ModelSession, type BatchTensors } from "../../src/model/session";
import { fixture } from "../helpers";

const MODEL = join(fixture("bert-mean-norm"), "onnx", "model.onnx");

function batch(b: number, len: number): BatchTensors {
  const ids = new Int32Array(b * len);
  for (let i = 0; i < ids.length; i++) ids[i] = 5 + (i % 1000);
  return { batch: b, seqLen: len, inputIds: ids, attentionMask: new Int32Array(b * len).fill(1), tokenTypeIds: null };
}

describe("ModelSession in an inference worker", () => {
  let s: ModelSession;
  beforeAll(async () => {
    s = await ModelSession.create(MODEL, { device: "cpu", numThreads: 1 });
  });
  afterAll(async () => {
    await s.release();
  });

  test("reports provider and names, and runs a batch", async () => {
    expect(s.provider).toBe("cpu");
    expect(s.inputNames).toContain("input_ids");
    expect(s.outputNames.length).toBeGreaterThan(0);
    const out = await s.run(batch(2, 7), s.outputNames[0]!);
    expect(out.dims).toEqual([2, 7, 32]);
    expect(out.data).toBeInstanceOf(Float32Array);
    expect(out.data.length).toBe(2 * 7 * 32);
    expect(out.data.every(Number.isFinite)).toBe(true);
    // The same rows give the same numbers whatever else is in the batch.
    const one = await s.run(batch(1, 7), s.outputNames[0]!);
    for (let i = 0; i < 7 * 32; i++) expect(Math.abs(one.data[i]! - out.data[i]!)).toBeLessThan(1e-5);
  });

  test("the event loop keeps turning while a batch runs", async () => {
    // onnxruntime-node runs a session synchronously on its calling thread; were that the main thread, no timer
    // callback could fire between the start of a run and its result.
    let turns = 0;
    let done = false;
    const tick = () => {
      if (done) return;
      turns++;
      setImmediate(tick);
    };
    const runs = Promise.all(Array.from({ length: 8 }, () => s.run(batch(32, 128), s.outputNames[0]!)));
    setImmediate(tick);
    await runs;
    done = true;
    expect(turns).toBeGreaterThan(20);
  });

  test("concurrent runs each get their own result", async () => {
    const [a, b] = await Promise.all([s.run(batch(1, 3), s.outputNames[0]!), s.run(batch(3, 5), s.outputNames[0]!)]);
    expect(a.dims).toEqual([1, 3, 32]);
    expect(b.dims).toEqual([3, 5, 32]);
  });

  test("a feed the model declares and the caller lacks is a ModelLoadError; the session keeps working", async () => {
    const err = await s.runFeeds({}, s.outputNames[0]!).catch((e) => e);
    expect(err).toBeInstanceOf(ModelLoadError);
    expect(String(err.message)).toContain("input_ids");
    expect((await s.run(batch(1, 4), s.outputNames[0]!)).dims).toEqual([1, 4, 32]);
  });
});

test("a file onnxruntime cannot load is a ModelLoadError naming it", async () => {
  const err = await ModelSession.create(join(fixture("bert-mean-norm"), "config.json"), { device: "cpu", numThreads: 1 }).catch((e) => e);
  expect(err).toBeInstanceOf(ModelLoadError);
  expect(String(err.message)).toContain("config.json");
});

test("a released session refuses further runs", async () => {
  const s = await ModelSession.create(MODEL, { device: "cpu", numThreads: 1 });
  await s.release();
  await expect(s.run(batch(1, 4), "last_hidden_state")).rejects.toThrow(/released/);
});

test("float16 halves convert exactly", () => {
  // 1, -2, 0.5, 65504 (largest half), smallest subnormal, +Infinity
  const h = new Uint16Array([0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x7c00]);
  expect(Array.from(halfToFloat(h))).toEqual([1, -2, 0.5, 65504, 2 ** -24, Infinity]);
});

test("sessionOptions: threads as configured, one inter-op thread, pool threads stop spinning when a run returns", () => {
  const o = sessionOptions("cpu", { device: "cpu", numThreads: 3 });
  expect(o.executionProviders).toEqual(["cpu"]);
  expect(o.intraOpNumThreads).toBe(3);
  expect(o.interOpNumThreads).toBe(1);
  expect(o.executionMode).toBe("sequential");
  // onnxruntime-node flattens `extra` into config entries: session.force_spinning_stop=1.
  expect(o.extra).toEqual({ session: { force_spinning_stop: "1" } });
});
