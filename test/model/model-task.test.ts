import { describe, expect, test } from "bun:test";
import { taskOf } from "../../src/model/model-task";

describe("sentence-transformers files of every generation", () => {
  test("task from config.json", () => {
    expect(taskOf({ architectures: ["BertModel"] }).task).toBe("embed");
    expect(taskOf({ architectures: ["BertForSequenceClassification"], id2label: { 0: "LABEL_0" } }).task).toBe("rerank");
    expect(taskOf({ architectures: ["XLMRobertaForSequenceClassification"], id2label: { 0: "a", 1: "b", 2: "c" } })).toEqual({ task: "classify", labels: ["a", "b", "c"] });
    expect(taskOf({ architectures: ["BertForSequenceClassification"], num_labels: 2 })).toEqual({ task: "classify", labels: ["LABEL_0", "LABEL_1"] });
  });
});
