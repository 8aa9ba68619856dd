// Runtime priming: the one-time onnxruntime and tokenizer state is set up before the first model is measured.
import { expect, test } from "bun:test";
import "../helpers";
import { primeRuntime } from "../../src/model/prime";
import { ModelSession } from "../../src/model/session";
import { TokenizerPool } from "../../src/tokenize/pool";
import { ModelLoadError } from "../../src/errors";

test("priming creates and releases a session of its in-memory graph and runs a tokenizer in every worker, once per process", async () => {
  const pool = new TokenizerPool(2);
  try {
    const first = primeRuntime(pool, "cpu");
    // A bad graph or tokenizer would reject here.
    await first;
    expect(primeRuntime(pool, "cpu")).toBe(first);
    // Its tokenizer is dropped again: nothing of it stays loaded.
    await expect(pool.encode("\u0000runtime-priming", ["prime"])).rejects.toThrow("is not loaded");
  } finally {
    pool.close();
  }
});

test("a session from graph bytes that are not ONNX fails to load with a message naming an in-memory graph", async () => {
  const err = await ModelSession.create(new Uint8Array([1, 2, 3, 4]), { device: "cpu", numThreads: 1 }).catch((e) => e);
  expect(err).toBeInstanceOf(ModelLoadError);
  expect((err as Error).message).toContain("in-memory graph");
});
