import { describe, expect, test } from "bun:test";
import { chooseOnnxFile, chooseTowerFiles, noOnnxMessage, externalDataFiles, onnxFilesFor } from "../../src/model/repo-files";
import { ModelLoadError } from "../../src/errors";

describe("ONNX file choice", () => {
  const repo = ["config.json", "onnx/model.onnx", "onnx/model_fp16.onnx", "onnx/model_quantized.onnx", "onnx/model.onnx_data"];
  test("by dtype, with the hub's names", () => {
    expect(chooseOnnxFile(repo, "auto")).toEqual({ file: "onnx/model.onnx", dtype: "float32" });
    expect(chooseOnnxFile(repo, "float16").file).toBe("onnx/model_fp16.onnx");
    expect(chooseOnnxFile(repo, "int8").file).toBe("onnx/model_quantized.onnx");
    expect(chooseOnnxFile(["model.onnx"], "float32").file).toBe("model.onnx");
    expect(chooseOnnxFile(["onnx/model_int8.onnx"], "auto")).toEqual({ file: "onnx/model_int8.onnx", dtype: "int8" });
    expect(externalDataFiles("onnx/model.onnx", repo)).toEqual(["onnx/model.onnx_data"]);
  });

  test("a missing export names what was looked for", () => {
    expect(() => chooseOnnxFile(["pytorch_model.bin", "config.json"], "auto")).toThrow(ModelLoadError);
    expect(() => chooseOnnxFile(["pytorch_model.bin"], "auto")).toThrow(/has no ONNX export \(no \.onnx file; its weights are pytorch_model\.bin\)/);
    expect(() => chooseOnnxFile(["onnx/model.onnx"], "float16")).toThrow(/model_fp16\.onnx.*has onnx\/model\.onnx/);
  });
});

describe("multimodal towers", () => {
  const towers = ["config.json", "onnx/text_model.onnx", "onnx/vision_model.onnx", "onnx/text_model_quantized.onnx", "onnx/vision_model_quantized.onnx", "onnx/model.onnx"];

  test("separate tower exports are preferred, per dtype", () => {
    expect(chooseTowerFiles(towers, "auto", "image")).toEqual({ text: "onnx/text_model.onnx", media: "onnx/vision_model.onnx", combined: false, dtype: "float32" });
    expect(chooseTowerFiles(towers, "int8", "image")).toMatchObject({ text: "onnx/text_model_quantized.onnx", media: "onnx/vision_model_quantized.onnx" });
    expect(onnxFilesFor(towers, "auto")).toEqual(["onnx/text_model.onnx", "onnx/vision_model.onnx"]);
    expect(onnxFilesFor(["onnx/text_model.onnx", "onnx/audio_model.onnx"], "auto")).toEqual(["onnx/text_model.onnx", "onnx/audio_model.onnx"]);
  });

  test("the combined model.onnx when that is all a repository has", () => {
    expect(chooseTowerFiles(["onnx/model.onnx"], "auto", "image")).toEqual({ text: "onnx/model.onnx", media: "onnx/model.onnx", combined: true, dtype: "float32" });
    expect(onnxFilesFor(["onnx/model.onnx", "onnx/text_model.onnx"], "auto")).toEqual(["onnx/model.onnx"]);
    expect(() => chooseTowerFiles(["onnx/text_model.onnx"], "auto", "audio")).toThrow("audio_model.onnx");
  });
});

describe("a repository without a usable ONNX export", () => {
  test("names what it has and the optimum-cli command; never a stack trace", () => {
    const msg = noOnnxMessage(["config.json", "model.safetensors", "tokenizer.json", "training_args.bin"], "Org/Some-Model");
    expect(msg).toContain("Org/Some-Model has no ONNX export");
    expect(msg).toContain("its weights are model.safetensors)");
    expect(msg).not.toContain("training_args");
    expect(msg).toContain("`optimum-cli export onnx --model Org/Some-Model Some-Model-onnx`");
    expect(() => chooseOnnxFile(["config.json", "pytorch_model.bin"], "auto", "a/b")).toThrow(/a\/b has no ONNX export.*pytorch_model.bin.*optimum-cli export onnx --model a\/b b-onnx/);
    // An export for another dtype is named instead.
    expect(() => chooseOnnxFile(["onnx/model_fp16.onnx"], "float32", "a/b")).toThrow(/the repository has onnx\/model_fp16.onnx/);
  });
});
