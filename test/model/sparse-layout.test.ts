import { describe, expect, test } from "bun:test";
import { readModules } from "../../src/model/st-modules";
import { sparseLayout } from "../../src/model/sparse-layout";

describe("sparse (SPLADE) detection", () => {
  const st6 = readModules([{ path: "", type: "sentence_transformers.base.modules.transformer.Transformer" }, { path: "1_SpladePooling", type: "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling" }]);
  test("a SparseEncoder's SpladePooling config decides pooling and activation", () => {
    expect(sparseLayout(st6, () => ({ pooling_strategy: "sum", activation_function: "log1p_relu" }), "auto", "BertForMaskedLM")).toEqual({ poolingStrategy: "sum", activation: "log1p_relu", source: "1_SpladePooling/config.json", query: null, defaultKind: "document" });
    expect(sparseLayout(st6, () => null, "auto", "BertForMaskedLM")?.poolingStrategy).toBe("max");
    expect(() => sparseLayout(st6, () => ({ pooling_strategy: "mean" }), "auto", "BertForMaskedLM")).toThrow(/pooling_strategy "mean"/);
  });

  test("a masked LM is refused unless declared sparse; --pooling-method splade declares it", () => {
    expect(() => sparseLayout([], () => null, "auto", "BertForMaskedLM")).toThrow(/masked language model.*--pooling-method splade/);
    expect(sparseLayout([], () => null, "splade", "BertForMaskedLM")?.source).toBe("--pooling-method splade");
    expect(() => sparseLayout([], () => null, "splade", "BertForSequenceClassification")).toThrow(/classifier/);
    expect(sparseLayout([], () => null, "auto", "BertModel")).toBeNull();
    expect(() => sparseLayout(readModules([{ path: "0_SparseStaticEmbedding", type: "sentence_transformers.sparse_encoder.modules.SparseStaticEmbedding" }]), () => null, "auto", "")).toThrow(/static embedding outside a query\/document Router/);
  });
});

describe("inference-free sparse encoders (sentence-transformers Router)", () => {
  const router = readModules([{ path: "", type: "sentence_transformers.base.modules.router.Router" }]);
  const types = {
    query_0_SparseStaticEmbedding: "sentence_transformers.sparse_encoder.modules.sparse_static_embedding.SparseStaticEmbedding",
    document_0_MLMTransformer: "sentence_transformers.sparse_encoder.modules.mlm_transformer.MLMTransformer",
    document_1_SpladePooling: "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling",
  };
  const structure = { query: ["query_0_SparseStaticEmbedding"], document: ["document_0_MLMTransformer", "document_1_SpladePooling"] };
  const pooling = () => ({ pooling_strategy: "max", activation_function: "log1p_relu" });

  test("query -> SparseStaticEmbedding, document -> MLM + SpladePooling; the default route decides inputs without input_type", () => {
    const l = sparseLayout(router, pooling, "auto", "DistilBertForMaskedLM", { types, structure, parameters: { default_route: "document" } })!;
    expect(l).toMatchObject({ poolingStrategy: "max", activation: "log1p_relu", source: "document_1_SpladePooling/config.json", defaultKind: "document" });
    expect(l.query?.path).toBe("query_0_SparseStaticEmbedding");
    expect(sparseLayout(router, pooling, "auto", "", { types, structure, parameters: { default_route: "query" } })!.defaultKind).toBe("query");
  });

  test("any other routing, or no router_config.json, is refused with what it routes", () => {
    expect(() => sparseLayout(router, pooling, "auto", "", null)).toThrow(/no router_config.json/);
    const csr = { ...structure, document: ["document_0_MLMTransformer", "document_1_SparseAutoEncoder"] };
    expect(() => sparseLayout(router, pooling, "auto", "", { types: { ...types, document_1_SparseAutoEncoder: "x.SparseAutoEncoder" }, structure: csr })).toThrow(/document -> \[MLMTransformer, SparseAutoEncoder\]/);
    expect(() => sparseLayout(router, pooling, "auto", "", { types, structure: { ...structure, image: [] } })).toThrow(/routes document, image, query/);
  });
});

describe("inference-free sparse encoders, older OpenSearch layout (idf.json, no Router)", () => {
  test("a masked-LM with idf.json: queries by idf.json, documents max log(1 + relu) without special tokens", () => {
    const l = sparseLayout([], () => null, "auto", "DistilBertForMaskedLM", null, { hello: 2.5, world: 0 })!;
    expect(l).toMatchObject({ poolingStrategy: "max", activation: "relu", defaultKind: "document", dropSpecialTokens: true });
    expect(l.query?.idf).toEqual({ hello: 2.5, world: 0 });
    expect(() => sparseLayout([], () => null, "auto", "BertForMaskedLM", null, { hello: "x" })).toThrow(/idf.json must map each token to a number; "hello"/);
  });

  test("without idf.json a masked-LM is refused as before; idf.json beside a non-MLM or a SpladePooling module changes nothing", () => {
    expect(() => sparseLayout([], () => null, "auto", "BertForMaskedLM", null, null)).toThrow(/masked language model.*--pooling-method splade/);
    expect(sparseLayout([], () => null, "auto", "BertModel", null, { a: 1 })).toBeNull();
    const st6 = readModules([{ path: "", type: "sentence_transformers.sparse_encoder.models.MLMTransformer" }, { path: "1_SpladePooling", type: "sentence_transformers.sparse_encoder.models.SpladePooling" }]);
    expect(sparseLayout(st6, () => null, "auto", "BertForMaskedLM", null, { a: 1 })).toMatchObject({ query: null, source: "1_SpladePooling/config.json" });
  });
});
