// jina-clip's layout: a combined export (onnx/model.onnx, both towers) of a config.json with vision_config, its
// projection size, and its query instruction from config_sentence_transformers.json or, without that file, from
// text_config.hf_model_config_kwargs.task_instructions (what its encode_text(task=...) prepends).
import { describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readLayout, towerTaskInstructions } from "../../src/model/layout";
import { listFolder } from "../../src/model/resolve";
import { inputPrompt } from "../../src/tasks/embed";
import { fixture, reference } from "../helpers";

const QUERY = "Represent the query for retrieving evidence documents: ";

describe("jina-clip layout", () => {
  test("one graph for both towers, image inputs, projection size, the query prompt", async () => {
    const ref = await reference("jina-clip");
    const layout = readLayout(fixture("jina-clip"), listFolder(fixture("jina-clip")), "auto", "auto");
    expect(layout.modalities).toEqual(["text", "image"]);
    expect(layout.media).toMatchObject({ modality: "image", combined: true, textFile: "onnx/model.onnx", mediaFile: "onnx/model.onnx", imageSize: 30 });
    expect(layout.hiddenSize).toBe(ref.dimension);
    expect(layout.maxLength).toBe(ref.max_length);
    expect(layout.prompts).toEqual({ "retrieval.query": QUERY });
    expect(inputPrompt(layout, { inputType: "query" }).prompt).toBe(QUERY);
    expect(inputPrompt(layout, { inputType: "document" }).prompt).toBe("");
  });

  test("without config_sentence_transformers.json the prompts are config.json's tower task_instructions", () => {
    const dir = mkdtempSync(join(tmpdir(), "jina-clip-layout-"));
    try {
      cpSync(fixture("jina-clip"), dir, { recursive: true });
      rmSync(join(dir, "config_sentence_transformers.json"));
      const layout = readLayout(dir, listFolder(dir), "auto", "auto");
      expect(layout.prompts).toEqual({ "retrieval.query": QUERY });
      expect(inputPrompt(layout, { inputType: "query" }).prompt).toBe(QUERY);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("towerTaskInstructions: empty instructions and other configs give none", () => {
    const cfg = { text_config: { hf_model_config_kwargs: { task_instructions: { "retrieval.query": "Q: ", "text-matching": "" } } } };
    expect(towerTaskInstructions(cfg)).toEqual({ "retrieval.query": "Q: " });
    expect(towerTaskInstructions({ model_type: "clip", text_config: { hidden_size: 32 } })).toEqual({});
    expect(towerTaskInstructions({})).toEqual({});
  });
});
