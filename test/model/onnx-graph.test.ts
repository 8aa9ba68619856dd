import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onnxExternalDataFiles, onnxOutputNames } from "../../src/model/onnx-graph";
import { ModelLoadError } from "../../src/errors";
import { fixture } from "../helpers";

describe("ONNX graph output names, read without onnxruntime", () => {
  test("the fixtures' outputs, in graph order (as onnxruntime lists them)", () => {
    expect(onnxOutputNames(join(fixture("bge-m3-onnx"), "model.onnx"))).toEqual(["dense_vecs", "sparse_vecs", "colbert_vecs"]);
    expect(onnxOutputNames(join(fixture("bge-m3-xenova"), "onnx", "model.onnx"))).toEqual(["last_hidden_state"]);
    expect(onnxOutputNames(join(fixture("colbert-stanford"), "model.onnx"))).toEqual(["contextual"]);
    expect(onnxOutputNames(join(fixture("bge-m3-baai"), "onnx", "model.onnx"))).toEqual(["token_embeddings", "sentence_embedding"]);
  });

  test("external data files: initializers' and a Constant node's value (BAAI/bge-m3's layout); none in a single-file export", () => {
    expect(onnxExternalDataFiles(join(fixture("bge-m3-baai"), "onnx", "model.onnx")).sort()).toEqual(["Constant_123_attr__value", "model.onnx_data"]);
    expect(onnxExternalDataFiles(join(fixture("bge-m3-xenova"), "onnx", "model.onnx"))).toEqual([]);
  });

  test("a file that is not an ONNX model is a load error", () => {
    const dir = mkdtempSync(join(tmpdir(), "onnx-graph-"));
    const bad = join(dir, "model.onnx");
    writeFileSync(bad, Buffer.from([0x3a, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3]));
    expect(() => onnxOutputNames(bad)).toThrow(ModelLoadError);
    expect(() => onnxOutputNames(join(dir, "missing.onnx"))).toThrow(/cannot open/);
  });
});
