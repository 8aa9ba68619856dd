// ModelSession: the options every session is created with, and a session built from them.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ModelSession, sessionOptions } from "../../src/model/session";
import { fixture } from "../helpers";

describe("sessionOptions", () => {
  test("threads as configured, one inter-op thread, pool threads stop spinning when a run returns", () => {
    const o = sessionOptions("cpu", { device: "cpu", numThreads: 3 });
    expect(o.executionProviders).toEqual(["cpu"]);
    expect(o.intraOpNumThreads).toBe(3);
    expect(o.interOpNumThreads).toBe(1);
    expect(o.executionMode).toBe("sequential");
    // onnxruntime-node flattens `extra` into config entries: session.force_spinning_stop=1.
    expect(o.extra).toEqual({ session: { force_spinning_stop: "1" } });
  });

  test("onnxruntime accepts them: a session loads and runs with the same numbers on repeated runs", async () => {
    const s = await ModelSession.create(join(fixture("bert-mean-norm"), "onnx", "model.onnx"), { device: "cpu", numThreads: 2 });
    try {
      const len = 6;
      const ids = Int32Array.from({ length: len }, (_, i) => 5 + i);
      const t = { batch: 1, seqLen: len, inputIds: ids, attentionMask: new Int32Array(len).fill(1), tokenTypeIds: null };
      const name = s.outputNames.includes("last_hidden_state") ? "last_hidden_state" : s.outputNames[0]!;
      const a = await s.run(t, name);
      const b = await s.run(t, name);
      expect(a.dims[0]).toBe(1);
      expect(a.dims[1]).toBe(len);
      expect(a.data.every(Number.isFinite)).toBe(true);
      expect(Array.from(b.data)).toEqual(Array.from(a.data));
    } finally {
      await s.release();
    }
  });
});
