// ModelSession: the options every session is created with, and a session built from them.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { emptyPastFeed, isTextInput, ModelSession, positionIds, textFeeds } from "../../src/model/session";
import { sessionOptions } from "../../src/model/onnx";
import { fixture } from "../helpers";
import { denseGraph, headGraph } from "../../src/model/dense-graph";

describe("sessionOptions", () => {
  test("threads as configured, one inter-op thread, pool threads stop spinning when a run returns", () => {
    const o = sessionOptions("cpu", { device: "cpu", numThreads: 3 });
    expect(o.executionProviders).toEqual(["cpu"]);
    expect(o.intraOpNumThreads).toBe(3);
    expect(o.interOpNumThreads).toBe(1);
    expect(o.executionMode).toBe("sequential");
    // onnxruntime-node flattens `extra` into config entries: session.force_spinning_stop=1.
    expect(o.extra).toEqual({ session: { force_spinning_stop: "1" } });
    // The arena, without the per-shape memory pattern (bench/memory.ts: 29 MiB less after a 64 x 512 request).
    expect([o.enableCpuMemArena, o.enableMemPattern]).toEqual([true, false]);
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

describe("feeds of decoder exports", () => {
  const t = { batch: 2, seqLen: 4, inputIds: new Int32Array(8), attentionMask: Int32Array.from([0, 0, 1, 1, 1, 1, 1, 1]), tokenTypeIds: null };

  test("position ids count real tokens (left padding starts at 0 at the first real token; pads get 1)", () => {
    expect(Array.from(positionIds(t))).toEqual([1, 1, 0, 1, 0, 1, 2, 3]);
  });

  test("empty past_key_values from the declared shape; num_logits_to_keep is a scalar 1", () => {
    const specs = [
      { name: "past_key_values.0.key", type: "float32", shape: ["batch_size", 2, "past_sequence_length", 8] },
      { name: "past_key_values.0.value", type: "float16", shape: ["batch_size", 2, "past_sequence_length", 8] },
    ];
    const feeds = textFeeds(t, ["input_ids", "attention_mask", "position_ids", "past_key_values.0.key", "past_key_values.0.value", "num_logits_to_keep"], specs);
    expect(feeds["past_key_values.0.key"]!.dims).toEqual([2, 2, 0, 8]);
    expect(feeds["past_key_values.0.key"]!.data).toBeInstanceOf(Float32Array);
    expect(feeds["past_key_values.0.value"]!.data).toBeInstanceOf(Uint16Array);
    expect(feeds["num_logits_to_keep"]!.dims).toEqual([]);
    expect(Array.from(feeds["num_logits_to_keep"]!.data)).toEqual([1]);
    expect(() => emptyPastFeed({ name: "past_key_values.0.key", type: "int8", shape: ["b", 2, "p", 8] }, 1)).toThrow(/float32/);
  });

  test("task_id (Jina v3): the batch's task as a scalar (rank 1 where declared so); absent without a task", () => {
    const scalar = [{ name: "task_id", type: "int64", shape: [] }];
    expect(textFeeds({ ...t, taskId: 3 }, ["input_ids", "task_id"], scalar)["task_id"]).toEqual({ data: Int32Array.of(3), dims: [] });
    expect(textFeeds({ ...t, taskId: 0 }, ["task_id"], [{ name: "task_id", type: "int64", shape: [1] }])["task_id"]!.dims).toEqual([1]);
    expect(textFeeds(t, ["input_ids", "task_id"], scalar)["task_id"]).toBeUndefined();
  });

  test("the onnx-community Qwen3 signature runs with them (fixture qwen3-embed)", async () => {
    const s = await ModelSession.create(join(fixture("qwen3-embed"), "onnx", "model.onnx"), { device: "cpu", numThreads: 1 });
    try {
      expect(s.inputNames.filter((n) => n.startsWith("past_key_values.")).length).toBe(4);
      const out = await s.run({ ...t, inputIds: Int32Array.from([1400, 1400, 5, 6, 7, 8, 9, 10]) }, "last_hidden_state");
      expect(out.dims).toEqual([2, 4, 32]);
      expect(out.data.every(Number.isFinite)).toBe(true);
    } finally {
      await s.release();
    }
  });
});

describe("a session's head graph", () => {
  // Two Dense graphs: the model doubles x's features into 3, the head sums them into 1; the answer under the
  // model's output name is the head's.
  const model = denseGraph([{ inFeatures: 2, outFeatures: 3, weight: Float32Array.from([2, 0, 0, 2, 1, 1]), bias: null, activation: "identity", residual: null }]);
  const head = { input: "y", outputs: { y: "y" }, graph: denseGraph([{ inFeatures: 3, outFeatures: 1, weight: Float32Array.from([1, 1, 1]), bias: Float32Array.from([0.5]), activation: "identity", residual: null }]) };
  const x = { data: Float32Array.from([1, 2, 3, 4]), dims: [1, 2, 2] };

  test("the named output goes through the head after each run, also in a replacement worker", async () => {
    const s = await ModelSession.create(model, { device: "cpu", numThreads: 1 }, { label: "head test" }, head);
    try {
      // (1, 2) -> (2, 4, 3) -> 9.5; (3, 4) -> (6, 8, 7) -> 21.5
      let out = await s.runFeeds({ x }, "y");
      expect(out.dims).toEqual([1, 2, 1]);
      expect(Array.from(out.data)).toEqual([9.5, 21.5]);
      s.injectFault("exit");
      out = await s.runFeeds({ x }, "y");
      expect(s.status.restarts).toBe(1);
      expect(Array.from(out.data)).toEqual([9.5, 21.5]);
    } finally {
      await s.release();
    }
  });

  test("a head with outputs of its own (bge-m3's pickled heads): listed with the model's, fetched alone or beside the model's", async () => {
    const layer = (w: number[], bias: number, activation: "identity" | "relu") =>
      ({ inFeatures: 3, outFeatures: 1, weight: Float32Array.from(w), bias: Float32Array.of(bias), activation, residual: null });
    const two = { input: "y", outputs: { total: "sum", negative: "neg" }, graph: headGraph([{ name: "sum", layers: [layer([1, 1, 1], 0.5, "identity")] }, { name: "neg", layers: [layer([-1, 0, 0], 3, "relu")] }]) };
    const s = await ModelSession.create(model, { device: "cpu", numThreads: 1 }, { label: "two heads" }, two);
    try {
      expect(s.outputNames).toEqual(["y", "total", "negative"]);
      // (2, 4, 3) -> 9.5 and relu(-2 + 3) = 1; (6, 8, 7) -> 21.5 and relu(-6 + 3) = 0
      const [negative, y, total] = await s.runOutputs({ x }, ["negative", "y", "total"]);
      expect([negative!.name, y!.name, total!.name]).toEqual(["negative", "y", "total"]);
      expect(Array.from(negative!.data)).toEqual([1, 0]);
      expect(Array.from(y!.data)).toEqual([2, 4, 3, 6, 8, 7]);
      expect(Array.from(total!.data)).toEqual([9.5, 21.5]);
      expect(Array.from((await s.runFeeds({ x }, "total")).data)).toEqual([9.5, 21.5]);
      expect(Array.from((await s.runFeeds({ x }, "negative")).data)).toEqual([1, 0]);
      expect(Array.from((await s.runFeeds({ x }, "y")).data)).toEqual([2, 4, 3, 6, 8, 7]);
    } finally {
      await s.release();
    }
    const bad = { ...two, input: "hidden" };
    await expect(ModelSession.create(model, { device: "cpu", numThreads: 1 }, { label: "bad head" }, bad)).rejects.toThrow(/no output hidden for its head graph/);
  });

  test("without a head the output is the model's", async () => {
    const s = await ModelSession.create(model, { device: "cpu", numThreads: 1 }, { label: "no head" });
    try {
      expect(Array.from((await s.runFeeds({ x }, "y")).data)).toEqual([2, 4, 3, 6, 8, 7]);
    } finally {
      await s.release();
    }
  });
});

describe("a repository without a usable ONNX export", () => {
  test("inputs a session can be fed; others refuse the model at load", () => {
    for (const n of ["input_ids", "attention_mask", "token_type_ids", "position_ids", "past_key_values.3.value", "num_logits_to_keep"]) expect(isTextInput(n)).toBe(true);
    for (const n of ["task_id", "inputs_embeds", "past_key_values.0.conv", "pixel_values"]) expect(isTextInput(n)).toBe(false);
  });
});
