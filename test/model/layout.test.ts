import { describe, expect, test } from "bun:test";
import { mkdtempSync, mkdirSync, copyFileSync, cpSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LLM_RERANK_MAX_LENGTH } from "../../src/model/rerank-template";
import { paddingSideOf, readLayout } from "../../src/model/layout";
import { fixture } from "../helpers";
import { listFolder } from "../../src/model/resolve";

describe("multi-vector (ColBERT) detection", () => {
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

describe("model families: decoders, Dense modules, unknown modules", () => {
  test("padding side from tokenizer_config, else tokenizer.json's padding direction", () => {
    expect(paddingSideOf({ padding_side: "left" }, null)).toBe("left");
    expect(paddingSideOf({}, { padding: { direction: "Left" } })).toBe("left");
    expect(paddingSideOf({}, { padding: null })).toBe("right");
    const files = listFolder(fixture("qwen3-embed"));
    const l = readLayout(fixture("qwen3-embed"), files, "auto", "auto");
    expect([l.paddingSide, l.pooling, l.onnxFile]).toEqual(["left", "last", "onnx/model.onnx"]);
  });
});

describe("decoder rerankers", () => {
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
  test("a local folder with only safetensors weights fails to load with that message", () => {
    const dir = mkdtempSync(join(tmpdir(), "no-onnx-"));
    for (const f of ["config.json", "tokenizer.json", "model.safetensors"]) copyFileSync(join(fixture("bert-dense"), f), join(dir, f));
    expect(() => readLayout(dir, listFolder(dir), "auto", "auto")).toThrow(/has no ONNX export \(no \.onnx file; its weights are model\.safetensors\)\. Export one with `optimum-cli export onnx --model /);
  });
});

describe("inference-free sparse encoders (sentence-transformers Router)", () => {
  test("the OpenSearch fixture folder reads as a sparse model with its query tokenizer", () => {
    const dir = fixture("opensearch-sparse");
    const layout = readLayout(dir, listFolder(dir), "auto", "auto");
    expect(layout.task).toBe("sparse");
    expect(layout.sparse?.query?.maxLength).toBe(48);
    expect(layout.sparse?.query?.tokenizerJson).toBeTruthy();
  });
});

describe("inference-free sparse encoders, older OpenSearch layout (idf.json, no Router)", () => {
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
});
