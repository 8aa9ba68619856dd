import { describe, expect, test } from "bun:test";
import { readModules } from "../../src/model/st-modules";
import { multiVectorLayout } from "../../src/model/multivector-layout";

describe("multi-vector (ColBERT) detection", () => {
  const dense = readModules([{ path: "", type: "sentence_transformers.models.Transformer" }, { path: "1_Dense", type: "pylate.models.Dense.Dense" }]);
  test("PyLate keys with PyLate's defaults; Stanford artifact.metadata", () => {
    const py = multiVectorLayout({ architectures: ["ModernBertModel"] }, { model_type: "ColBERT", query_prefix: "[Q] ", document_length: 300, do_query_expansion: false }, null, dense, 8192)!;
    expect(py).toMatchObject({ format: "pylate", queryPrefix: "[Q] ", documentPrefix: "[D] ", queryLength: 32, documentLength: 300, queryExpansion: false, attendToExpansion: false, densePath: "1_Dense" });
    expect(py.skiplistWords).toContain("!");
    expect(() => multiVectorLayout({}, { model_type: "ColBERT" }, null, [], 512)).toThrow(/1_Dense/);
    const st = multiVectorLayout({ architectures: ["HF_ColBERT"] }, null, { query_maxlen: 32, doc_maxlen: 1000, attend_to_mask_tokens: true }, [], 512)!;
    expect(st).toMatchObject({ format: "stanford", queryPrefix: "[unused0]", documentPrefix: "[unused1]", queryLength: 32, documentLength: 512, attendToExpansion: true, densePath: null });
    expect(multiVectorLayout({ architectures: ["BertModel"] }, { prompts: {} }, null, [], 512)).toBeNull();
  });
});
