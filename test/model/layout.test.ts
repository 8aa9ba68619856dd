import { describe, expect, test } from "bun:test";
import { mkdtempSync, mkdirSync, copyFileSync, cpSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isTextInput } from "../../src/model/session";
import { LLM_RERANK_MAX_LENGTH, rerankTemplateOf } from "../../src/model/rerank-template";
import { chooseOnnxFile, chooseTowerFiles, noOnnxMessage, externalDataFiles, onnxFilesFor } from "../../src/model/repo-files";
import { denseModules, poolingFromConfig, readModules } from "../../src/model/st-modules";
import { mediaModalityOf } from "../../src/model/media-layout";
import { multiVectorLayout } from "../../src/model/multivector-layout";
import { looksLikeBgeM3 } from "../../src/model/hybrid-layout";
import { paddingSideOf, readLayout } from "../../src/model/layout";
import { positionLimit } from "../../src/model/config-values";
import { sparseLayout } from "../../src/model/sparse-layout";
import { taskOf } from "../../src/model/model-task";
import { readDenseLayers } from "../../src/model/dense";
import { denseHead } from "../../src/engine/families/embed";
import { applyDense } from "../../src/tasks/embed";
import { ModelLoadError } from "../../src/errors";
import { fixture } from "../helpers";
import { listFolder } from "../../src/model/resolve";


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

  test("position limits: RoBERTa-family offsets", () => {
    expect(positionLimit({ model_type: "bert", max_position_embeddings: 512 })).toBe(512);
    expect(positionLimit({ model_type: "xlm-roberta", max_position_embeddings: 514, pad_token_id: 1 })).toBe(512);
    expect(positionLimit({})).toBeNull();
  });

  test("task from config.json", () => {
    expect(taskOf({ architectures: ["BertModel"] }).task).toBe("embed");
    expect(taskOf({ architectures: ["BertForSequenceClassification"], id2label: { 0: "LABEL_0" } }).task).toBe("rerank");
    expect(taskOf({ architectures: ["XLMRobertaForSequenceClassification"], id2label: { 0: "a", 1: "b", 2: "c" } })).toEqual({ task: "classify", labels: ["a", "b", "c"] });
    expect(taskOf({ architectures: ["BertForSequenceClassification"], num_labels: 2 })).toEqual({ task: "classify", labels: ["LABEL_0", "LABEL_1"] });
  });
});

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

  test("fixture folders", () => {
    const py = readLayout(fixture("colbert-pylate"), listFolder(fixture("colbert-pylate")), "auto", "auto");
    expect(py.task).toBe("multivector");
    expect(py.maxLength).toBe(40);
    const st = readLayout(fixture("colbert-stanford"), listFolder(fixture("colbert-stanford")), "auto", "auto");
    expect(st.task).toBe("multivector");
    expect(st.onnxFile).toBe("model.onnx");
    expect(st.multivector?.format).toBe("stanford");
  });
});

describe("fixture folders read as the model says", () => {
  const read = (name: string, dtype: "auto" | "float16" | "int8" = "auto", pooling: "auto" | "cls" = "auto") => readLayout(fixture(name), listFolder(fixture(name)), dtype, pooling);

  test("bert-mean-norm (newest sentence-transformers format)", () => {
    const l = read("bert-mean-norm");
    expect(l.task).toBe("embed");
    expect(l.pooling).toBe("mean");
    expect(l.normalize).toBe(true);
    expect(l.maxLength).toBe(48);
    expect(l.prompts).toEqual({ query: "query: ", passage: "passage: ", document: "" });
    expect(l.hiddenSize).toBe(32);
    expect(read("bert-mean-norm", "int8").onnxFile).toBe("onnx/model_quantized.onnx");
    expect(read("bert-mean-norm", "float16").onnxFile).toBe("onnx/model_fp16.onnx");
  });

  test("roberta-cls (sentence-transformers 2.x format, root-level model.onnx)", () => {
    const l = read("roberta-cls");
    expect(l.pooling).toBe("cls");
    expect(l.normalize).toBe(false);
    expect(l.maxLength).toBe(64);
    expect(l.onnxFile).toBe("model.onnx");
    expect(read("roberta-cls", "auto", "cls").poolingSource).toBe("--pooling-method");
  });

  test("xlmr-max, rerank and classify", () => {
    expect(read("xlmr-max").pooling).toBe("max");
    expect(read("xlmr-max").maxLength).toBe(40);
    expect(read("bert-rerank").task).toBe("rerank");
    expect(read("bert-rerank").maxLength).toBe(64);
    expect(read("bert-classify").labels).toEqual(["negative", "neutral", "positive"]);
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

  test("config.json decides the modality; fixtures read as multimodal layouts", () => {
    expect(mediaModalityOf({ vision_config: {} })).toBe("image");
    expect(mediaModalityOf({ audio_config: {} })).toBe("audio");
    expect(mediaModalityOf({ hidden_size: 32 })).toBeNull();
    const dir = fixture("clip");
    const clip = readLayout(dir, listFolder(dir), "auto", "auto");
    expect(clip.modalities).toEqual(["text", "image"]);
    expect(clip.media).toMatchObject({ modality: "image", textFile: "onnx/text_model.onnx", mediaFile: "onnx/vision_model.onnx", combined: false, imageSize: 32 });
    expect(clip.hiddenSize).toBe(16);
    expect(clip.maxLength).toBe(77);
    const clapDir = fixture("clap");
    const clap = readLayout(clapDir, listFolder(clapDir), "auto", "auto");
    expect(clap.modalities).toEqual(["text", "audio"]);
    expect(clap.media?.mediaFile).toBe("onnx/audio_model.onnx");
    expect(readLayout(fixture("bert-mean-norm"), listFolder(fixture("bert-mean-norm")), "auto", "auto").modalities).toEqual(["text"]);
  });
});

describe("model families: decoders, Dense modules, unknown modules", () => {
  const st = (kind: string, path = "") => ({ path, type: `sentence_transformers.models.${kind}` });

  test("padding side from tokenizer_config, else tokenizer.json's padding direction", () => {
    expect(paddingSideOf({ padding_side: "left" }, null)).toBe("left");
    expect(paddingSideOf({}, { padding: { direction: "Left" } })).toBe("left");
    expect(paddingSideOf({}, { padding: null })).toBe("right");
    const files = listFolder(fixture("qwen3-embed"));
    const l = readLayout(fixture("qwen3-embed"), files, "auto", "auto");
    expect([l.paddingSide, l.pooling, l.onnxFile]).toEqual(["left", "last", "onnx/model.onnx"]);
  });

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

  test("bert-dense: Dense weights from safetensors; dimension is the last Dense's", () => {
    const l = readLayout(fixture("bert-dense"), listFolder(fixture("bert-dense")), "auto", "auto");
    expect(l.dense.map((d) => [d.inFeatures, d.outFeatures, d.bias, d.activation])).toEqual([[32, 24, true, "tanh"], [24, 16, false, "identity"]]);
    expect(l.hiddenSize).toBe(16);
    const layers = readDenseLayers(l.dir, l.dense);
    expect(layers[0]!.weight.length).toBe(24 * 32);
    expect(layers[0]!.bias!.length).toBe(24);
    expect(applyDense(new Float32Array(32).fill(0.1), layers).length).toBe(16);
  });

  test("gemma-embed: sentence_embedding output is read; without it the missing Dense weights refuse the model", () => {
    const l = readLayout(fixture("gemma-embed"), listFolder(fixture("gemma-embed")), "auto", "auto");
    expect(l.dense.length).toBe(2);
    expect(denseHead(l, { outputNames: ["last_hidden_state", "sentence_embedding"] })).toEqual([]);
    expect(() => denseHead(l, { outputNames: ["last_hidden_state"] })).toThrow(/no sentence_embedding output.*2_Dense\/model.safetensors is missing/);
  });

  test("applyDense: activation(W x + b), residual", () => {
    const layer = { inFeatures: 2, outFeatures: 2, weight: Float32Array.from([1, 2, 3, 4]), bias: Float32Array.from([0.5, -0.5]), activation: "identity" as const, residual: null };
    expect(Array.from(applyDense(Float32Array.from([1, 1]), [layer]))).toEqual([3.5, 6.5]);
    expect(Array.from(applyDense(Float32Array.from([1, 1]), [{ ...layer, activation: "relu", bias: Float32Array.from([-4, 0]) }]))).toEqual([0, 7]);
    expect(Array.from(applyDense(Float32Array.from([1, 1]), [{ ...layer, residual: "identity" }]))).toEqual([4.5, 7.5]);
    expect(applyDense(Float32Array.from([0, 0]), [{ ...layer, activation: "tanh", bias: Float32Array.from([1, 0]) }])[0]).toBeCloseTo(Math.tanh(1), 6);
  });
});

describe("decoder rerankers", () => {
  const tj = (...tokens: string[]) => ({ added_tokens: tokens.map((content) => ({ content })), model: { vocab: {} } });
  const qwen = (arch: string) => ({ architectures: [arch], model_type: "qwen3" });

  test("a causal LM with the Qwen chat and yes/no tokens is an LLM reranker; a -seq-cls conversion uses the same prompt", () => {
    expect(taskOf(qwen("Qwen3ForCausalLM")).task).toBe("rerank");
    expect(rerankTemplateOf(qwen("Qwen3ForCausalLM"), tj("<|im_start|>", "<|im_end|>", "yes", "no"), "rerank")?.yesToken).toBe("yes");
    const seqCls = rerankTemplateOf({ ...qwen("Qwen3ForSequenceClassification"), num_labels: 1 }, tj("<|im_start|>", "<|im_end|>"), "rerank");
    expect([seqCls?.yesToken, seqCls?.prefix.startsWith("<|im_start|>system")]).toEqual([null, true]);
    expect(rerankTemplateOf({ architectures: ["BertForSequenceClassification"], model_type: "bert" }, tj(), "rerank")).toBeNull();
  });

  test("a causal LM that cannot be read as a reranker is refused at load, saying why", () => {
    expect(() => rerankTemplateOf(qwen("Qwen3ForCausalLM"), tj("<|im_start|>", "<|im_end|>"), "rerank")).toThrow(/lacks yes, no/);
    expect(() => rerankTemplateOf({ architectures: ["LlamaForCausalLM"], model_type: "llama" }, tj("yes", "no"), "rerank")).toThrow(/causal language model/);
  });

  test("fixtures: left padding, the template, yes/no", () => {
    for (const name of ["qwen3-rerank", "qwen3-rerank-seq-cls", "qwen3-rerank-keep"]) {
      const l = readLayout(fixture(name), listFolder(fixture(name)), "auto", "auto");
      expect([l.task, l.paddingSide, l.rerankTemplate !== null]).toEqual(["rerank", "left", true]);
    }
  });
});

describe("max length: LLM rerankers' default and --max-length", () => {
  /** A copy of a fixture whose config and tokenizer_config say what the hub's files say. */
  function copyWith(name: string, config: Record<string, unknown>, tokenizerConfig: Record<string, unknown>): string {
    const dir = mkdtempSync(join(tmpdir(), `${name}-`));
    cpSync(fixture(name), dir, { recursive: true });
    const edit = (file: string, extra: Record<string, unknown>) => writeFileSync(join(dir, file), JSON.stringify({ ...JSON.parse(readFileSync(join(dir, file), "utf8")), ...extra }));
    edit("config.json", config);
    edit("tokenizer_config.json", tokenizerConfig);
    return dir;
  }
  // Qwen/Qwen3-Reranker-0.6B: config.json max_position_embeddings 40960, tokenizer_config.json model_max_length 131072
  const hub = { max_position_embeddings: 40960 };
  const tokenizer = { model_max_length: 131072 };

  test("Qwen3-Reranker (and its -seq-cls conversion): 8192, the model card's max_length, not 40,960 positions; a Qwen3 embedder keeps the model's", () => {
    expect(LLM_RERANK_MAX_LENGTH).toBe(8192);
    for (const name of ["qwen3-rerank", "qwen3-rerank-seq-cls", "qwen3-rerank-keep"]) {
      const dir = copyWith(name, hub, tokenizer);
      expect(readLayout(dir, listFolder(dir), "auto", "auto").maxLength).toBe(8192);
    }
    const embed = copyWith("qwen3-embed", hub, tokenizer);
    expect(readLayout(embed, listFolder(embed), "auto", "auto").maxLength).toBe(40960);
    // a smaller limit of the model's own stays (the fixture's tokenizer says 224)
    expect(readLayout(fixture("qwen3-rerank"), listFolder(fixture("qwen3-rerank")), "auto", "auto").maxLength).toBe(224);
  });

  test("--max-length replaces it, up to the model's positions; above them, or on a multi-vector or multimodal model, the load is refused", () => {
    const dir = copyWith("qwen3-rerank", hub, tokenizer);
    expect(readLayout(dir, listFolder(dir), "auto", "auto", 32768).maxLength).toBe(32768);
    expect(readLayout(dir, listFolder(dir), "auto", "auto", 40960).maxLength).toBe(40960);
    expect(() => readLayout(dir, listFolder(dir), "auto", "auto", 40961)).toThrow("--max-length 40961 is more than the model's 40960 positions");
    const bert = fixture("bert-mean-norm");
    expect(readLayout(bert, listFolder(bert), "auto", "auto").maxLength).toBe(48);
    expect(readLayout(bert, listFolder(bert), "auto", "auto", 16).maxLength).toBe(16);
    expect(() => readLayout(fixture("colbert-pylate"), listFolder(fixture("colbert-pylate")), "auto", "auto", 16)).toThrow("--max-length applies to text models");
    expect(() => readLayout(fixture("clip"), listFolder(fixture("clip")), "auto", "auto", 16)).toThrow("--max-length applies to text models");
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

  test("a local folder with only safetensors weights fails to load with that message", () => {
    const dir = mkdtempSync(join(tmpdir(), "no-onnx-"));
    for (const f of ["config.json", "tokenizer.json", "model.safetensors"]) copyFileSync(join(fixture("bert-dense"), f), join(dir, f));
    expect(() => readLayout(dir, listFolder(dir), "auto", "auto")).toThrow(/has no ONNX export \(no \.onnx file; its weights are model\.safetensors\)\. Export one with `optimum-cli export onnx --model /);
  });

  test("inputs a session can be fed; others refuse the model at load", () => {
    for (const n of ["input_ids", "attention_mask", "token_type_ids", "position_ids", "past_key_values.3.value", "num_logits_to_keep"]) expect(isTextInput(n)).toBe(true);
    for (const n of ["task_id", "inputs_embeds", "past_key_values.0.conv", "pixel_values"]) expect(isTextInput(n)).toBe(false);
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

  test("the OpenSearch fixture folder reads as a sparse model with its query tokenizer", () => {
    const dir = fixture("opensearch-sparse");
    const layout = readLayout(dir, listFolder(dir), "auto", "auto");
    expect(layout.task).toBe("sparse");
    expect(layout.sparse?.query?.maxLength).toBe(48);
    expect(layout.sparse?.query?.tokenizerJson).toBeTruthy();
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

  test("the fixture folder reads as sparse with its idf table and tokenizer; the same folder without idf.json is refused", () => {
    const dir = fixture("opensearch-sparse-idf");
    const layout = readLayout(dir, listFolder(dir), "auto", "auto");
    expect(layout.task).toBe("sparse");
    expect(layout.sparse?.query?.maxLength).toBe(48);
    expect(Object.keys(layout.sparse?.query?.idf ?? {}).length).toBeGreaterThan(1000);
    const bare = mkdtempSync(join(tmpdir(), "idf-less-"));
    mkdirSync(join(bare, "onnx"));
    for (const f of ["config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model.onnx"]) copyFileSync(join(dir, f), join(bare, f));
    expect(() => readLayout(bare, listFolder(bare), "auto", "auto")).toThrow(/masked language model/);
  });
});

describe("bge-m3 without a pooling config (Xenova/bge-m3)", () => {
  test("an XLMRobertaModel with 8194 positions pools CLS, with a warning that says why; other encoders keep mean", () => {
    const dir = mkdtempSync(join(tmpdir(), "bge-m3-8194-"));
    cpSync(fixture("bge-m3-xenova"), dir, { recursive: true });
    const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    writeFileSync(join(dir, "config.json"), JSON.stringify({ ...config, max_position_embeddings: 8194 }));
    const m3 = readLayout(dir, listFolder(dir), "auto", "auto");
    expect(m3.pooling).toBe("cls");
    expect(m3.poolingSource).toMatch(/bge-m3/);
    expect(m3.warnings.join("\n")).toMatch(/taken for bge-m3.*CLS pooling/);
    expect(readLayout(dir, listFolder(dir), "auto", "mean").pooling).toBe("mean");
    // The committed fixture's tiny config (130 positions) is not taken for bge-m3: mean, as before.
    const tiny = readLayout(fixture("bge-m3-xenova"), listFolder(fixture("bge-m3-xenova")), "auto", "auto");
    expect(tiny.pooling).toBe("mean");
    expect(tiny.warnings.join("\n")).toMatch(/using mean pooling/);
  });

  test("jina-embeddings-v3 (task adapters), multilingual-e5 (514 positions) and other architectures are not bge-m3", () => {
    const m3 = { architectures: ["XLMRobertaModel"], max_position_embeddings: 8194 };
    expect(looksLikeBgeM3(m3)).toBe(true);
    expect(looksLikeBgeM3({ ...m3, lora_adaptations: ["retrieval.query"] })).toBe(false);
    expect(looksLikeBgeM3({ ...m3, max_position_embeddings: 514 })).toBe(false);
    expect(looksLikeBgeM3({ ...m3, architectures: ["XLMRobertaForSequenceClassification"] })).toBe(false);
  });
});
