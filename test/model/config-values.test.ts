import { describe, expect, test } from "bun:test";
import { positionLimit } from "../../src/model/config-values";

describe("sentence-transformers files of every generation", () => {
  test("position limits: RoBERTa-family offsets", () => {
    expect(positionLimit({ model_type: "bert", max_position_embeddings: 512 })).toBe(512);
    expect(positionLimit({ model_type: "xlm-roberta", max_position_embeddings: 514, pad_token_id: 1 })).toBe(512);
    expect(positionLimit({})).toBeNull();
  });
});
