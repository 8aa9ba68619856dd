import { describe, expect, test } from "bun:test";
import { looksLikeBgeM3 } from "../../src/model/hybrid-layout";

describe("bge-m3 without a pooling config (Xenova/bge-m3)", () => {
  test("jina-embeddings-v3 (task adapters), multilingual-e5 (514 positions) and other architectures are not bge-m3", () => {
    const m3 = { architectures: ["XLMRobertaModel"], max_position_embeddings: 8194 };
    expect(looksLikeBgeM3(m3)).toBe(true);
    expect(looksLikeBgeM3({ ...m3, lora_adaptations: ["retrieval.query"] })).toBe(false);
    expect(looksLikeBgeM3({ ...m3, max_position_embeddings: 514 })).toBe(false);
    expect(looksLikeBgeM3({ ...m3, architectures: ["XLMRobertaForSequenceClassification"] })).toBe(false);
  });
});
