import { describe, expect, test } from "bun:test";
import { denseModules, poolingFromConfig, readModules } from "../../src/model/st-modules";
import { ModelLoadError } from "../../src/errors";

describe("sentence-transformers files of every generation", () => {
  test("modules.json: old and new class paths", () => {
    expect(readModules([{ path: "", type: "sentence_transformers.models.Transformer" }, { path: "1_Pooling", type: "sentence_transformers.models.Pooling" }, { path: "2_Normalize", type: "sentence_transformers.models.Normalize" }]).map((m) => m.kind)).toEqual(["Transformer", "Pooling", "Normalize"]);
    expect(readModules([{ path: "", type: "sentence_transformers.base.modules.transformer.Transformer" }, { path: "1_Pooling", type: "sentence_transformers.sentence_transformer.modules.pooling.Pooling" }]).map((m) => m.kind)).toEqual(["Transformer", "Pooling"]);
    expect(readModules(null)).toEqual([]);
  });

  test("pooling config: boolean keys and the pooling_mode string", () => {
    expect(poolingFromConfig({ word_embedding_dimension: 384, pooling_mode_cls_token: true, pooling_mode_mean_tokens: false })).toBe("cls");
    expect(poolingFromConfig({ pooling_mode_mean_tokens: true })).toBe("mean");
    expect(poolingFromConfig({ pooling_mode_max_tokens: true })).toBe("max");
    expect(poolingFromConfig({ pooling_mode_lasttoken: true })).toBe("last");
    expect(poolingFromConfig({ pooling_mode_mean_sqrt_len_tokens: true })).toBe("mean_sqrt_len");
    expect(poolingFromConfig({ pooling_mode_weightedmean_tokens: true })).toBe("weighted_mean");
    expect(poolingFromConfig({ embedding_dimension: 32, pooling_mode: "mean" })).toBe("mean");
    expect(poolingFromConfig({ pooling_mode: "lasttoken" })).toBe("last");
    expect(poolingFromConfig({})).toBeNull();
    expect(poolingFromConfig(null)).toBeNull();
  });
});

describe("model families: decoders, Dense modules, unknown modules", () => {
  const st = (kind: string, path = "") => ({ path, type: `sentence_transformers.models.${kind}` });

  test("an unknown sentence-transformers module is refused at load, naming it", () => {
    const mods = readModules([st("Transformer"), st("Pooling", "1_Pooling"), st("LayerNorm", "2_LayerNorm")]);
    expect(() => denseModules(mods, () => null)).toThrow(/LayerNorm \(2_LayerNorm\).*would be wrong/);
    expect(() => denseModules(readModules([st("Transformer"), st("WordWeights", "1"), st("Pooling", "2")]), () => null)).toThrow(ModelLoadError);
  });

  test("Dense modules: config read, token-level Dense and unknown activations refused", () => {
    const mods = readModules([st("Transformer"), st("Pooling", "1_Pooling"), st("Dense", "2_Dense")]);
    const cfg = { in_features: 4, out_features: 2, bias: false, activation_function: "torch.nn.modules.linear.Identity" };
    expect(denseModules(mods, () => cfg)).toEqual([{ path: "2_Dense", inFeatures: 4, outFeatures: 2, bias: false, activation: "identity", residual: false }]);
    expect(() => denseModules(mods, () => ({ ...cfg, activation_function: "torch.nn.modules.activation.GELU" }))).toThrow(/GELU/);
    expect(() => denseModules(mods, () => ({ ...cfg, module_input_name: "token_embeddings" }))).toThrow(/token embeddings/);
    const before = readModules([st("Transformer"), st("Dense", "1_Dense"), st("Pooling", "2_Pooling")]);
    expect(() => denseModules(before, () => cfg)).toThrow(/before pooling/);
  });
});
