// The graph builder's decisions and its weight reading, as units: export or build (--graph), the refusals, the cache
// folder's identity, float16 / bfloat16 decoding, sharded weights and the architecture table. Parity of the built
// graphs through the API: test/server/built-graphs.test.ts.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelLoadError } from "../../src/errors";
import { architectureFor, builtGraph, chooseGraph, graphCacheDir, knownArchitectures, unknownArchitectureMessage } from "../../src/model/build";
import { decodeFloat, Weights, writeSafetensors } from "../../src/model/safetensors";
import { Builder } from "../../src/model/build/blocks";
import { ElemType, Graph } from "../../src/model/build/graph";
import { dequantizeBlockwise, quantizeBlockwise, type Quantization } from "../../src/model/build/quantize";
import * as ort from "onnxruntime-node";
import { listFolder } from "../../src/model/resolve";
import { fixture, shardedCopy } from "../helpers";

const tmp = (name: string) => mkdtempSync(join(tmpdir(), `infinity-build-${name}-`));

describe("export or build (--graph)", () => {
  const exported = ["config.json", "tokenizer.json", "model.safetensors", "onnx/model.onnx"];
  const weightsOnly = ["config.json", "tokenizer.json", "model.safetensors"];
  const sharded = ["config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"];
  test("auto builds only without an export and with weights; export never; build always", () => {
    expect(chooseGraph(exported, "auto")).toEqual({ build: false, reason: "the repository's ONNX export (--graph auto)" });
    expect(chooseGraph(["config.json", "model.onnx"], "auto").build).toBe(false);
    expect(chooseGraph(weightsOnly, "auto")).toEqual({ build: true, reason: expect.stringContaining("no ONNX export") });
    expect(chooseGraph(sharded, "auto").build).toBe(true);
    expect(chooseGraph(["config.json", "pytorch_model.bin"], "auto").build).toBe(false);
    expect(chooseGraph(weightsOnly, "export")).toEqual({ build: false, reason: "--graph export" });
    expect(chooseGraph(exported, "build")).toEqual({ build: true, reason: "--graph build" });
  });

  test("auto prefers a built graph to the export where the bench showed it as fast and as exact (BERT / RoBERTa / XLM-R, float32)", () => {
    const bert = { architectures: ["BertModel"], hidden_act: "gelu" };
    expect(chooseGraph(exported, "auto", "auto", bert)).toEqual({ build: true, reason: expect.stringContaining("in preference to the repository's ONNX export") });
    expect(chooseGraph(exported, "auto", "float32", { architectures: ["XLMRobertaForSequenceClassification"] }).build).toBe(true);
    // Not for: another dtype (the export's own file), an architecture not measured, remote code, a config the builder
    // does not build, a Dense module whose weights only the export may carry, a folder without weights.
    expect(chooseGraph(exported, "auto", "int8", bert).build).toBe(false);
    expect(chooseGraph(exported, "auto", "auto", { architectures: ["Qwen3Model"] }).build).toBe(false);
    expect(chooseGraph(exported, "auto", "auto", { ...bert, auto_map: { AutoModel: "modeling.Bert" } }).build).toBe(false);
    expect(chooseGraph(exported, "auto", "auto", { ...bert, position_embedding_type: "relative_key" }).build).toBe(false);
    expect(chooseGraph(exported, "auto", "auto", { ...bert, hidden_act: "quick_gelu" }).build).toBe(false);
    expect(chooseGraph([...exported, "2_Dense/config.json"], "auto", "auto", bert).build).toBe(false);
    expect(chooseGraph([...exported, "2_Dense/config.json", "2_Dense/model.safetensors"], "auto", "auto", bert).build).toBe(true);
    expect(chooseGraph(["config.json", "onnx/model.onnx"], "auto", "auto", bert).build).toBe(false);
    expect(chooseGraph(exported, "export", "auto", bert).build).toBe(false);
  });

  test("refusals say what to do: build without safetensors, a dtype built graphs do not come in", () => {
    expect(() => chooseGraph(["config.json", "pytorch_model.bin", "onnx/model.onnx"], "build")).toThrow(/--graph build needs model\.safetensors/);
    expect(() => chooseGraph(weightsOnly, "auto", "float16")).toThrow(/--dtype float16: built graphs are float32 or int8 .*--dtype float32 or int8, or export/);
    expect(() => chooseGraph(exported, "build", "float16")).toThrow(/--dtype float16: built graphs are float32 or int8 .*--graph export/);
    expect(chooseGraph(exported, "build", "int8").build).toBe(true);
    expect(chooseGraph(exported, "auto", "int8").build).toBe(false);
  });
});

describe("architectures", () => {
  test("by config.json architectures, else model_type; unknown ones refused with the known list and optimum-cli", () => {
    expect(architectureFor({ architectures: ["XLMRobertaModel"] })?.architectures).toContain("RobertaModel");
    expect(architectureFor({ model_type: "distilbert" })?.architectures).toContain("DistilBertModel");
    expect(architectureFor({ architectures: ["Qwen3ForCausalLM"], model_type: "qwen3" })?.architectures).toContain("Qwen3Model");
    expect(architectureFor({ architectures: ["LlamaModel"], model_type: "qwen3" })).toBeNull();
    for (const name of ["BertModel", "BertForSequenceClassification", "RobertaModel", "XLMRobertaModel", "DistilBertModel", "MPNetModel", "ModernBertModel",
      "NomicBertModel", "BertForMaskedLM", "DistilBertForMaskedLM", "HF_ColBERT", "Qwen3Model", "Qwen3ForSequenceClassification", "Qwen3ForCausalLM", "Gemma3TextModel", "DebertaV2Model", "DebertaV2ForSequenceClassification"]) {
      expect(knownArchitectures()).toContain(name);
    }
    const msg = unknownArchitectureMessage({ architectures: ["LlamaModel"] }, "org/llama-embed");
    expect(msg).toContain("does not know LlamaModel");
    expect(msg).toContain("Gemma3TextModel");
    expect(msg).toContain("optimum-cli export onnx --model org/llama-embed llama-embed-onnx");
  });

  test("a known architecture whose weights are not its layout is refused, and nothing is cached", () => {
    const dir = tmp("wrong");
    writeSafetensors(join(dir, "model.safetensors"), { "foo.weight": { dtype: "F32", shape: [2], bytes: new Uint8Array(8) } });
    Bun.write(join(dir, "config.json"), "{}");
    const root = tmp("wrong-cache");
    expect(() => builtGraph(dir, ["config.json", "model.safetensors"], { architectures: ["BertModel"], hidden_size: 2 }, root, "m")).toThrow(ModelLoadError);
    expect(listFolder(root)).toEqual([]);
    // A BERT checkpoint called HF_ColBERT without the projection would serve unprojected vectors: refused.
    const bertDir = fixture("bert-mean-norm");
    const config = { ...JSON.parse(readFileSync(join(bertDir, "config.json"), "utf8")), architectures: ["HF_ColBERT"] };
    expect(() => builtGraph(bertDir, listFolder(bertDir), config, root, "m")).toThrow(/HF_ColBERT checkpoint needs its projection linear\.weight/);
  });
});

describe("weights", () => {
  test("float16 and bfloat16 decode exactly (normal, subnormal, max, signed zero, infinity)", () => {
    const half = new Uint16Array([0x3c00, 0xc100, 0x7bff, 0x0001, 0x8000, 0x7c00, 0x3555]);
    expect([...decodeFloat(new Uint8Array(half.buffer), "F16", "t")]).toEqual([1, -2.5, 65504, 2 ** -24, -0, Infinity, 0.333251953125]);
    const bf = new Uint16Array([0x3f80, 0xc020, 0x4049, 0x0001]);
    expect([...decodeFloat(new Uint8Array(bf.buffer), "BF16", "t")]).toEqual([1, -2.5, 3.140625, new Float32Array(new Uint32Array([0x10000]).buffer)[0]!]);
    expect(() => decodeFloat(new Uint8Array(8), "I64", "tensor x")).toThrow(/tensor x is I64; only F32, F16 and BF16/);
  });

  test("tensors at odd offsets, read through the mapped file", () => {
    const dir = tmp("odd");
    writeSafetensors(join(dir, "model.safetensors"), {
      "a": { dtype: "F16", shape: [1], bytes: new Uint8Array(new Uint16Array([0x3c00]).buffer) },
      "b": { dtype: "F32", shape: [2], bytes: new Uint8Array(new Float32Array([0.5, -7]).buffer) },
    });
    const w = new Weights(dir, ["model.safetensors"]);
    expect([...w.float("b")]).toEqual([0.5, -7]);
    expect(w.shape("b")).toEqual([2]);
    expect(w.unused()).toEqual(["a"]);
  });

  test("sharded weights build the same graph as the single file; a missing shard is named", () => {
    const single = fixture("distilbert-embed");
    const dir = join(tmp("sharded"), "m");
    shardedCopy(single, dir, 3);
    const files = listFolder(dir);
    expect(files.filter((f) => /^model-0000\d-of-00003\.safetensors$/.test(f)).length).toBe(3);
    const config = JSON.parse(readFileSync(join(single, "config.json"), "utf8"));
    const a = builtGraph(single, listFolder(single), config, tmp("cache-a"), "m");
    const b = builtGraph(dir, files, config, tmp("cache-b"), "m");
    expect(readFileSync(`${b.path}.data`).equals(readFileSync(`${a.path}.data`))).toBe(true);
    expect(readFileSync(b.path).equals(readFileSync(a.path))).toBe(true);
    Bun.spawnSync(["rm", join(dir, "model-00002-of-00003.safetensors")]);
    expect(() => new Weights(dir, listFolder(dir))).toThrow(/weight shard model-00002-of-00003\.safetensors is missing/);
  });
});

describe("the graph cache", () => {
  test("named by the weights' identity, the dtype and the builder version; a second call reads it", () => {
    const dir = join(tmp("ident"), "m");
    shardedCopy(fixture("distilbert-embed"), dir, 1);
    const files = listFolder(dir);
    const root = tmp("root");
    const first = graphCacheDir(root, dir, files, "float32");
    expect(first.startsWith(join(root, "infinity-graphs"))).toBe(true);
    expect(graphCacheDir(root, dir, files, "float32")).toBe(first);
    expect(graphCacheDir(root, dir, files, "int8")).not.toBe(first);
    const shard = join(dir, "model-00001-of-00001.safetensors");
    utimesSync(shard, new Date(), new Date(Date.now() + 5000));
    expect(graphCacheDir(root, dir, files, "float32")).not.toBe(first);
    const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    const built = builtGraph(dir, files, config, root, "m");
    expect(built.cached).toBe(false);
    expect(builtGraph(dir, files, config, root, "m")).toMatchObject({ cached: true, path: built.path });
  });
});

describe("int8 weights (MatMulNBits)", () => {
  const seeded = (n: number, seed: number) => {
    let s = seed;
    return Float32Array.from({ length: n }, () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5) * 2);
  };

  test("block-wise symmetric quantization: within half a step of each weight; 4-bit packs the first value in the low nibble", () => {
    for (const q of [{ bits: 8, block: 32 }, { bits: 4, block: 16 }] as Quantization[]) {
      const [n, k] = [3, 40]; // k not a multiple of the block: the last block is padded
      const w = seeded(n * k, q.bits);
      const qw = quantizeBlockwise(w, n, k, q);
      expect(qw.blocks).toBe(Math.ceil(k / q.block));
      expect(qw.packed.length).toBe((n * qw.blocks * q.block * q.bits) / 8);
      const back = dequantizeBlockwise(qw, n, k, q);
      for (let i = 0; i < w.length; i++) {
        const scale = qw.scales[Math.floor(i / k) * qw.blocks + Math.floor((i % k) / q.block)]!;
        expect(Math.abs(back[i]! - w[i]!)).toBeLessThanOrEqual(scale / 2 + 1e-7);
      }
    }
    const four = quantizeBlockwise(Float32Array.from([7, -7, 0, 7, ...new Array(12).fill(0)]), 1, 16, { bits: 4, block: 16 });
    // 7 / scale 1 -> 7 + 8 = 15; -7 -> 1; 0 -> 8: bytes low | high << 4
    expect([...four.packed.slice(0, 2)]).toEqual([15 | (1 << 4), 8 | (15 << 4)]);
  });

  test("onnxruntime's MatMulNBits computes x times the dequantized weights (8 and 4 bits)", async () => {
    const [n, k, rows] = [5, 64, 3];
    const w = seeded(n * k, 11);
    const dir = tmp("nbits");
    writeSafetensors(join(dir, "model.safetensors"), { "l.weight": { dtype: "F32", shape: [n, k], bytes: new Uint8Array(w.buffer) } });
    const x = seeded(rows * k, 5);
    for (const q of [{ bits: 8, block: 32 }, { bits: 4, block: 32 }] as Quantization[]) {
      const path = join(dir, `q${q.bits}.onnx`);
      const g = new Graph(`${path}.data`);
      const b = new Builder(g, new Weights(dir, ["model.safetensors"]), {}, q);
      g.output(b.matmul(g.input("x", ElemType.float, [rows, k]), "l"), "y", ElemType.float, [rows, n]);
      g.write(path, "test");
      const sess = await ort.InferenceSession.create(path);
      const y = (await sess.run({ x: new ort.Tensor("float32", x, [rows, k]) })).y!.data as Float32Array;
      const deq = dequantizeBlockwise(quantizeBlockwise(w, n, k, q), n, k, q);
      for (let r = 0; r < rows; r++) {
        for (let c = 0; c < n; c++) {
          let want = 0;
          for (let i = 0; i < k; i++) want += x[r * k + i]! * deq[c * k + i]!;
          // accuracy_level 4 quantizes x to 8 bits per block: a small relative error, far below a packing mistake's
          expect(Math.abs(y[r * n + c]! - want)).toBeLessThanOrEqual(0.02 * Math.sqrt(k));
        }
      }
    }
  });
});

describe("masked-LM heads", () => {
  test("DistilBertForMaskedLM: the built graph's logits match the export torch made of the same weights", async () => {
    // opensearch-sparse keeps its DistilBertForMaskedLM (saved by transformers) in document_0_MLMTransformer/ and
    // torch.onnx's export of it in onnx/model.onnx.
    const dir = join(fixture("opensearch-sparse"), "document_0_MLMTransformer");
    const files = listFolder(dir);
    const built = builtGraph(dir, files, JSON.parse(readFileSync(join(dir, "config.json"), "utf8")), tmp("mlm"), "mlm");
    const [mine, theirs] = await Promise.all([built.path, join(fixture("opensearch-sparse"), "onnx", "model.onnx")].map((p) => ort.InferenceSession.create(p)));
    const ids = [[101, 7, 300, 41, 102, 0], [101, 5, 102, 0, 0, 0]].flat();
    const mask = [[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]].flat();
    const feeds = (s: ort.InferenceSession) => Object.fromEntries(s.inputNames.map((n) => [n, new ort.Tensor("int64", BigInt64Array.from((n === "attention_mask" ? mask : ids).map(BigInt)), [2, 6])]));
    const a = (await mine!.run(feeds(mine!))).logits!;
    const b = (await theirs!.run(feeds(theirs!))).logits!;
    expect(a.dims).toEqual(b.dims);
    expect(a.dims[2]).toBeGreaterThan(1000);
    let worst = 0;
    const [x, y] = [a.data as Float32Array, b.data as Float32Array];
    // Padded positions differ between implementations (their rows are never read): compare the real tokens only.
    for (let i = 0; i < x.length; i++) if (mask[Math.floor(i / a.dims[2]!)]) worst = Math.max(worst, Math.abs(x[i]! - y[i]!));
    expect(worst).toBeLessThanOrEqual(1e-4);
  });
});
