// The runners of multimodal towers, against a recording session: which feeds a combined export's text tower gets.
import { describe, expect, test } from "bun:test";
import { combinedTextRunner, mediaDummy } from "../../src/engine/towers";
import type { Feed, InputSpec, ModelSession, OutputTensor } from "../../src/model/session";
import type { TaskReader } from "../../src/tasks/task";

describe("combinedTextRunner", () => {
  test("feeds token inputs, the media dummy, and empty past_key_values built from the declared input specs", async () => {
    const inputSpecs: InputSpec[] = [
      { name: "input_ids", type: "int64", shape: ["batch", "seq"] },
      { name: "attention_mask", type: "int64", shape: ["batch", "seq"] },
      { name: "pixel_values", type: "float32", shape: ["batch", 3, 4, 4] },
      { name: "past_key_values.0.key", type: "float32", shape: ["batch", 2, "past", 8] },
      { name: "past_key_values.0.value", type: "float16", shape: ["batch", 2, "past", 8] },
    ];
    let fed: Record<string, Feed> = {};
    const session = {
      inputNames: inputSpecs.map((s) => s.name),
      inputSpecs,
      outputNames: ["text_embeds"],
      async runFeeds(feeds: Record<string, Feed>, name: string): Promise<OutputTensor> {
        fed = feeds;
        return { name, data: new Float32Array([1, 2, 3, 4]), dims: [2, 2] } as OutputTensor;
      },
    } as unknown as ModelSession;
    const reader: TaskReader<Float32Array> = {
      outputName: (names) => names[0]!,
      read: (out, lengths) => Array.from(lengths, (_, i) => out.data.slice(i * 2, i * 2 + 2)),
    };
    const runner = combinedTextRunner(session, reader, mediaDummy("pixel_values", [3, 4, 4]));
    const rows = await runner.run({ batch: 2, seqLen: 3, inputIds: Int32Array.of(1, 2, 3, 1, 2, 0), attentionMask: Int32Array.of(1, 1, 1, 1, 1, 0), tokenTypeIds: null });
    expect(rows.map((r) => [...r])).toEqual([[1, 2], [3, 4]]);
    expect(Object.keys(fed).sort()).toEqual(["attention_mask", "input_ids", "past_key_values.0.key", "past_key_values.0.value", "pixel_values"]);
    expect(fed["past_key_values.0.key"]!.dims).toEqual([2, 2, 0, 8]);
    expect(fed["past_key_values.0.key"]!.data).toBeInstanceOf(Float32Array);
    expect(fed["past_key_values.0.value"]!.data).toBeInstanceOf(Uint16Array);
    expect(fed["input_ids"]!.dims).toEqual([2, 3]);
    expect(fed["pixel_values"]!.dims).toEqual([1, 3, 4, 4]);
  });
});
