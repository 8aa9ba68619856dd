// The load-time rewrite of an LLM reranker's graph so its lm_head reads the last position only (model/logits-graph.ts):
// on the onnx-community-shaped fixture (full-vocabulary logits [batch, seq, vocab], past_key_values inputs) the
// rewritten graph's [batch, 1, vocab] equals the full graph's last column, batched with left padding, for the float32
// file and the float16 one whose weights lie in external data; graphs it cannot cut are kept, with the reason.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { lastPositionGraph, planLastPosition, type GraphSummary } from "../../src/model/logits-graph";
import { createOrtSession, runOnce } from "../../src/model/onnx";
import type { Feed } from "../../src/model/session";
import { fixture } from "../helpers";

const onnxFile = (name: string) => join(fixture("qwen3-rerank"), "onnx", name);

/** Left-padded random rows of the given lengths, with the feeds the server builds (positions, empty past). */
function feeds(inputs: readonly { name: string; type: string; shape: readonly (number | string)[] }[], lengths: number[], seed: number): Record<string, Feed> {
  const batch = lengths.length;
  const seq = Math.max(...lengths);
  const ids = new Int32Array(batch * seq).fill(1400);
  const mask = new Int32Array(batch * seq);
  const positions = new Int32Array(batch * seq).fill(1);
  let x = seed;
  lengths.forEach((n, b) => {
    for (let t = 0; t < n; t++) {
      x = (x * 1103515245 + 12345) % 2147483648;
      const i = b * seq + seq - n + t;
      ids[i] = x % 1400;
      mask[i] = 1;
      positions[i] = t;
    }
  });
  const out: Record<string, Feed> = {
    input_ids: { data: ids, dims: [batch, seq] },
    attention_mask: { data: mask, dims: [batch, seq] },
    position_ids: { data: positions, dims: [batch, seq] },
  };
  for (const input of inputs) {
    if (!input.name.startsWith("past_key_values.")) continue;
    const dims = input.shape.map((d, i) => (i === 0 ? batch : typeof d === "number" ? d : 0));
    out[input.name] = { data: input.type === "float16" ? new Uint16Array(0) : new Float32Array(0), dims };
  }
  return out;
}

describe("the lm_head reads the last position only", () => {
  for (const file of ["model.onnx", "model_fp16.onnx"]) {
    for (const columns of [undefined, [1404, 1403], [1403]]) {
      const what = columns ? `vocabulary columns ${columns.join(", ")}: [batch, 1, ${columns.length}]` : "[batch, 1, vocab]";
      test(`${file}, ${what}: equal to the full graph's last position (<= 1e-6), left-padded batches up to 512 tokens`, async () => {
        const rewritten = lastPositionGraph(onnxFile(file), "logits", columns);
        if (!("path" in rewritten)) throw new Error(`not rewritten: ${JSON.stringify(rewritten)}`);
        expect(rewritten.head).toBe("/model/lm_head/MatMul");
        expect(rewritten.columns).toEqual(columns ?? null);
        try {
          const full = await createOrtSession(onnxFile(file), { device: "cpu", numThreads: 1 });
          const last = await createOrtSession(rewritten.path, { device: "cpu", numThreads: 1, externalDataDir: rewritten.externalDataDir });
          expect(last.inputs).toEqual(full.inputs);
          for (const [i, lengths] of [[7], [40, 12, 33], [224, 5], [512, 300, 1, 64]].entries()) {
            const f = feeds(full.inputs, lengths, i + 1);
            const [a] = await runOnce(full, f, ["logits"]);
            const [b] = await runOnce(last, f, ["logits"]);
            const [batch, seq, vocab] = a!.dims as [number, number, number];
            const picked = columns ?? Array.from({ length: vocab }, (_, v) => v);
            expect(b!.dims).toEqual([batch, 1, picked.length]);
            let diff = 0;
            for (let r = 0; r < batch; r++) {
              picked.forEach((v, k) => {
                diff = Math.max(diff, Math.abs(a!.data[(r * seq + seq - 1) * vocab + v]! - b!.data[r * picked.length + k]!));
              });
            }
            expect(diff).toBeLessThanOrEqual(1e-6);
          }
          await full.session.release();
          await last.session.release();
        } finally {
          rewritten.remove();
        }
        expect(existsSync(dirname(rewritten.path))).toBe(false);
      });
    }
  }

  test("external data (model_fp16.onnx_data) is read from the source folder: without externalDataDir the rewritten graph does not load; remove() deletes only the temporary folder", async () => {
    const rewritten = lastPositionGraph(onnxFile("model_fp16.onnx"));
    if (!("path" in rewritten)) throw new Error("not rewritten");
    const dir = dirname(rewritten.path);
    expect(readdirSync(dir)).toEqual(["model_fp16.onnx"]);
    expect(rewritten.externalDataDir).toBe(dirname(onnxFile("model_fp16.onnx")));
    await expect(createOrtSession(rewritten.path, { device: "cpu", numThreads: 1 })).rejects.toThrow("onnxruntime could not load");
    rewritten.remove();
    expect(existsSync(dir)).toBe(false);
    expect(existsSync(onnxFile("model_fp16.onnx_data"))).toBe(true);
  });

  test("kept as it is, with the reason: int8 (dynamic quantization scales over every position), an export with num_logits_to_keep, a missing file", () => {
    expect(lastPositionGraph(onnxFile("model_quantized.onnx"))).toEqual({
      reason: 'logits comes from a Mul node "/model/lm_head/MatMul_quant_output_scale_mul", not from an lm_head MatMul',
    });
    expect(lastPositionGraph(join(fixture("qwen3-rerank-keep"), "onnx", "model.onnx"))).toEqual({ kept: "num_logits_to_keep" });
    expect((lastPositionGraph(onnxFile("absent.onnx")) as { reason: string }).reason).toContain("cannot open");
  });
});

describe("planLastPosition: where the Slice goes, or why not", () => {
  const node = (opType: string, inputs: string[], output: string, domain = "") => ({ index: 0, opType, domain, name: output, inputs, outputs: [output], start: 0, end: 0 });
  const graph = (nodes: ReturnType<typeof node>[], extra: Partial<GraphSummary> = {}): GraphSummary => ({
    opset: 17, nodes, initializers: new Set(["W", "Wq", "embed"]), inputs: ["input_ids"], outputs: ["logits"], outputRecords: new Map(), graph: { tagStart: 0, from: 0, to: 0 }, size: 0, ...extra,
  });
  const norm = node("Mul", ["x", "gamma"], "hidden");

  test("MatMul with a constant weight (an initializer, or the tied embedding transposed), then Cast / Identity", () => {
    expect(planLastPosition(graph([norm, node("MatMul", ["hidden", "W"], "logits")]), "logits")).toMatchObject({ hidden: "hidden", weight: "W" });
    const tied = [norm, node("Transpose", ["embed"], "embedT"), node("MatMul", ["hidden", "embedT"], "mm"), node("Cast", ["mm"], "logits")];
    expect(planLastPosition(graph(tied), "logits")).toMatchObject({ hidden: "hidden", head: { name: "mm" } });
    // a packed 4-bit weight: the last position, but no column gather
    expect(planLastPosition(graph([norm, node("MatMulNBits", ["hidden", "Wq"], "logits", "com.microsoft")]), "logits")).toMatchObject({ hidden: "hidden", weight: null });
  });

  test("refused: no such output, an old opset, a head fed by a computed weight, a value used elsewhere too, a non-positionwise op", () => {
    expect(planLastPosition(graph([norm, node("MatMul", ["hidden", "W"], "logits")], { outputs: ["last_hidden_state"] }), "logits")).toBe("the graph has no logits output");
    expect(planLastPosition(graph([norm, node("MatMul", ["hidden", "W"], "logits")], { opset: 9 }), "logits")).toContain("opset 9");
    expect(planLastPosition(graph([norm, node("MatMul", ["hidden", "hidden2"], "logits")]), "logits")).toContain("does not multiply by a constant weight");
    const shared = [norm, node("MatMul", ["hidden", "W"], "mm"), node("Cast", ["mm"], "logits"), node("ReduceMax", ["mm"], "other")];
    expect(planLastPosition(graph(shared), "logits")).toBe("mm (before logits) is used elsewhere too");
    expect(planLastPosition(graph([norm, node("MatMul", ["hidden", "W"], "mm"), node("Softmax", ["mm"], "logits")]), "logits")).toContain("from a Softmax node");
    expect(planLastPosition(graph([norm, node("MatMul", ["W", "embed"], "logits")]), "logits")).toContain("no hidden-state input");
  });
});
