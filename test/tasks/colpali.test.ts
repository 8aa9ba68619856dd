// ColPali's and ColModernVBERT's layouts (where prompts, image settings and image_seq_length come from; which vision
// retrievers are refused) and their input preparation, without a model run (those are in test/server/colpali.test.ts
// and test/server/colmodernvbert.test.ts).
import { describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, rmSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { COLMODERNVBERT_DEFAULTS, COLPALI_DEFAULTS, colpaliLayout } from "../../src/model/colpali-layout";
import { readLayout } from "../../src/model/layout";
import { Engine } from "../../src/engine/engine";
import { colpaliImageBatches, colpaliImageRunner, colpaliImageText, colpaliQueryInput, colpaliQueryRunner, colpaliQueryText, colpaliTextKind, colpaliTokens, tiledImageText } from "../../src/tasks/colpali";
import { multiVectorBatches } from "../../src/tasks/multivector";
import type { Feed } from "../../src/model/session";
import { InputTooLong, InvalidInput, ModelLoadError } from "../../src/errors";
import { fixture } from "../helpers";

const PALIGEMMA = {
  model_type: "paligemma",
  architectures: ["PaliGemmaForConditionalGeneration"],
  image_token_index: 257152,
  text_config: { model_type: "gemma", max_position_embeddings: 8192, num_image_tokens: 1024 },
  vision_config: { model_type: "siglip_vision_model", image_size: 448, patch_size: 14 },
};
const SIGLIP_448 = { image_processor_type: "SiglipImageProcessor", size: { height: 448, width: 448 }, resample: 3, image_seq_length: 1024 };

// The real ModernVBERT/colmodernvbert shapes: 512 px tiles, patch 16, pixel shuffle 4 -> 64 image tokens per tile.
const MODERNVBERT = {
  model_type: "modernvbert",
  image_token_id: 50407,
  pixel_shuffle_factor: 4,
  text_config: { model_type: "modernbert", max_position_embeddings: 8192 },
  vision_config: { model_type: "siglip_vision_model", image_size: 512, patch_size: 16 },
};
const IDEFICS3_2048 = {
  image_processor_type: "Idefics3ImageProcessor", size: { longest_edge: 2048 }, max_image_size: { longest_edge: 512 }, resample: 1,
  do_image_splitting: true, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5],
};

describe("ColModernVBERT layout and prompts", () => {
  test("transformers' layout: image_seq_len from processor_config.json (else (tile / patch)^2 / shuffle^2), transformers' default prompts", () => {
    const l = colpaliLayout({ model_type: "colmodernvbert", vlm_config: MODERNVBERT, embedding_dim: 128 }, { image_processor: IDEFICS3_2048 }, null)!;
    expect(l.kind).toBe("idefics3");
    expect(l.imageSeqLength).toBe(64);
    expect(l.imageTokenId).toBe(50407);
    expect(l.dim).toBe(128);
    expect(l.queryPrefix).toBe("");
    expect(l.visualPromptPrefix).toBe(COLMODERNVBERT_DEFAULTS.visualPromptPrefix);
    expect(colpaliLayout({ model_type: "colmodernvbert", vlm_config: MODERNVBERT }, { image_seq_len: 16, query_prefix: "Q: " }, IDEFICS3_2048)!.imageSeqLength).toBe(16);
  });

  test("the original / Qdrant export: a flat ModernVBert config naming ColModernVBert", () => {
    const l = colpaliLayout({ ...MODERNVBERT, architectures: ["ColModernVBert"] }, { image_seq_len: 64, processor_class: "ColModernVBertProcessor" }, IDEFICS3_2048)!;
    expect(l.kind).toBe("idefics3");
    expect(l.imageSize).toBe(512);
  });

  test("query and image prompt strings are ColModernVBertProcessor's (unsplit, and a 2 x 3 grid)", () => {
    const l = { ...colpaliLayout({ model_type: "colmodernvbert", vlm_config: MODERNVBERT }, { image_seq_len: 2 }, IDEFICS3_2048)!, queryPrefix: "Q: " };
    expect(colpaliQueryText(l, { bos: "", augmentation: "<end_of_utterance>" }, "what?")).toBe(`Q: what?${"<end_of_utterance>".repeat(10)}`);
    const [pre, post] = ["<|begin_of_text|>User:", "Describe the image.<end_of_utterance>\nAssistant:"];
    const tile = "<image><image>";
    const global = `<fake_token_around_image><global-img>${tile}<fake_token_around_image>`;
    expect(tiledImageText(l, "<image>", 0, 0)).toBe(`${pre}${global}${post}`);
    const row = (r: number) => [1, 2, 3].map((c) => `<fake_token_around_image><row_${r}_col_${c}>${tile}`).join("") + "\n";
    expect(tiledImageText(l, "<image>", 2, 3)).toBe(`${pre}${row(1)}${row(2)}\n${global}${post}`);
  });
});

describe("colpaliLayout", () => {
  test("a merged PaliGemma export: image settings from preprocessor_config.json, prefixes default to transformers'", () => {
    const l = colpaliLayout(PALIGEMMA, null, SIGLIP_448)!;
    expect(l.imageSeqLength).toBe(1024);
    expect(l.imageTokenId).toBe(257152);
    expect(l.imageSize).toBe(448);
    expect(l.queryPrefix).toBe(COLPALI_DEFAULTS.queryPrefix);
    expect(l.visualPromptPrefix).toBe("Describe the image.");
    expect(l.promptSource).toContain("defaults");
  });

  test("processor_config.json names the prefixes (fastembed's export uses Query: ) and may nest the image processor", () => {
    const l = colpaliLayout(PALIGEMMA, { query_prefix: "Query: ", visual_prompt_prefix: "Describe the page.", image_processor: { ...SIGLIP_448, image_seq_length: 256 } }, null)!;
    expect(l.queryPrefix).toBe("Query: ");
    expect(l.visualPromptPrefix).toBe("Describe the page.");
    expect(l.promptSource).toBe("processor_config.json");
    expect(l.imageSeqLength).toBe(256);
  });

  test("image_seq_length falls back to the vision config's num_image_tokens, then (image_size / patch_size)^2", () => {
    const { image_seq_length: _, ...noSeq } = SIGLIP_448;
    expect(colpaliLayout({ ...PALIGEMMA, vision_config: { ...PALIGEMMA.vision_config, num_image_tokens: 64 } }, null, noSeq)!.imageSeqLength).toBe(64);
    expect(colpaliLayout({ ...PALIGEMMA, text_config: {}, vision_config: { image_size: 224, patch_size: 14 } }, null, noSeq)!.imageSeqLength).toBe(256);
  });

  test("ColQwen2, Idefics3 and a ModernVBert without the retrieval head are refused by name; a ColPali or ColModernVBERT without image settings is refused; others are not ColPali", () => {
    expect(() => colpaliLayout({ model_type: "idefics3" }, null, null)).toThrow(
      "idefics3: Idefics3 (a generative vision-language model, not a retriever) is not supported; of the late-interaction vision retrievers this server serves ColPali (PaliGemma) and ColModernVBERT",
    );
    expect(() => colpaliLayout({ model_type: "modernvbert", architectures: ["ModernVBertForMaskedLM"] }, null, null)).toThrow(
      "ModernVBertForMaskedLM: ModernVBERT without the ColModernVBert retrieval head (no multi-vector projection) is not supported",
    );
    expect(() => colpaliLayout({ model_type: "colmodernvbert", vlm_config: MODERNVBERT }, null, null)).toThrow("a ColModernVBERT model needs its image processor settings");
    expect(() => colpaliLayout({ model_type: "colmodernvbert", vlm_config: MODERNVBERT }, null, SIGLIP_448)).toThrow(
      'a ColModernVBERT model needs an Idefics3 image processor (image_processor_type Idefics3ImageProcessor), got "SiglipImageProcessor"',
    );
    expect(() => colpaliLayout({ model_type: "qwen2_vl", architectures: ["ColQwen2ForRetrieval"] }, null, null)).toThrow(/ColQwen2/);
    expect(() => colpaliLayout(PALIGEMMA, null, null)).toThrow(/image processor settings/);
    expect(colpaliLayout({ model_type: "clip", vision_config: {} }, null, {})).toBeNull();
  });

  test("the fixture folder reads as a multi-vector model over text and image, with Query:  from processor_config.json", () => {
    const l = readLayout(fixture("colpali"), ["model.onnx"], "auto", "auto");
    expect(l.task).toBe("multivector");
    expect(l.modalities).toEqual(["text", "image"]);
    expect(l.media).toBeNull();
    expect(l.colpali!.queryPrefix).toBe("Query: ");
    expect(l.colpali!.imageSeqLength).toBe(16);
    expect(l.hiddenSize).toBe(32);
    expect(l.maxLength).toBe(256);
    expect(l.warnings).toEqual([]);
  });

  test("without processor_config.json prefixes the load warns which defaults it took", () => {
    const dir = mkdtempSync(join(tmpdir(), "colpali-"));
    try {
      cpSync(fixture("colpali"), dir, { recursive: true });
      const proc = JSON.parse(readFileSync(join(dir, "processor_config.json"), "utf8"));
      writeFileSync(join(dir, "preprocessor_config.json"), JSON.stringify(proc.image_processor));
      rmSync(join(dir, "processor_config.json"));
      const l = readLayout(dir, ["model.onnx"], "auto", "auto");
      expect(l.colpali!.queryPrefix).toBe("Question: ");
      expect(l.warnings.join(" ")).toContain("ColPali prompts from transformers' ColPaliProcessor defaults");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("ColPali inputs", () => {
  const layout = colpaliLayout(PALIGEMMA, { query_prefix: "Query: ", visual_prompt_prefix: "Describe the image." }, { ...SIGLIP_448, image_seq_length: 3 })!;

  test("query and image prompt strings are ColPaliProcessor's", () => {
    expect(colpaliQueryText(layout, { bos: "<bos>", augmentation: "<pad>" }, "what?")).toBe(`<bos>Query: what?${"<pad>".repeat(10)}\n`);
    expect(colpaliImageText(layout, "<bos>", "<image>")).toBe("<image><image><image><bos>Describe the image.\n");
  });

  test("the tokenizer template's own special tokens are stripped; a cut query is refused", () => {
    const tokens = { bos: "<bos>", augmentation: "<pad>", imageIds: new Int32Array(), imageToken: "<image>", before: 1, after: 1 };
    const x = colpaliQueryInput({ ids: Int32Array.of(101, 2, 7, 8, 102), typeIds: null }, tokens, 512, "input");
    expect(Array.from(x.ids)).toEqual([2, 7, 8]);
    expect(x.tokens).toBe(3);
    expect(Array.from(x.keep)).toEqual([1, 1, 1]);
    expect(() => colpaliQueryInput({ ids: Int32Array.of(101, 2, 102), typeIds: null, fullLength: 900 }, tokens, 3, "input[2]")).toThrow(InputTooLong);
  });

  test("text is a query; input_type document is a 400 that says documents are images", () => {
    expect(colpaliTextKind(undefined)).toBe("query");
    expect(colpaliTextKind("search_query")).toBe("query");
    expect(() => colpaliTextKind("document")).toThrow(InvalidInput);
  });

  test("the image prompt must hold image_seq_length image tokens; BOS, pad and <image> must exist", async () => {
    const vocab: Record<string, number> = { "<bos>": 2, "<pad>": 0, "<image>": 9 };
    const tokenize = async (t: string) => [...t.matchAll(/<image>/g)].map(() => 9).concat([2, 5, 6]);
    const ok = await colpaliTokens({ ...layout, imageTokenId: null }, { bos_token: "<bos>", pad_token: "<pad>" }, tokenize, (t) => vocab[t], { before: 0, after: 0 }, () => undefined);
    expect(Array.from(ok.imageIds)).toEqual([9, 9, 9, 2, 5, 6]);
    const short = async () => [9, 2, 5];
    await expect(colpaliTokens({ ...layout, imageTokenId: null }, { bos_token: "<bos>", pad_token: "<pad>" }, short, (t) => vocab[t], { before: 0, after: 0 }, () => undefined)).rejects.toThrow(/1 image tokens/);
    await expect(colpaliTokens(layout, { bos_token: "<bos>" }, tokenize, (t) => vocab[t], { before: 0, after: 0 }, () => undefined)).rejects.toThrow(/pad token/);
  });
});

describe("ColPali runners", () => {
  // A fake graph: every position's vector is [input_id, pixel rows seen, 0], so a test sees what was fed.
  const fakeSession = (needsRowPerText: boolean) => {
    const calls: Array<Record<string, Feed>> = [];
    return {
      calls,
      inputNames: ["input_ids", "attention_mask", "pixel_values"],
      inputSpecs: [],
      async runFeeds(feeds: Record<string, Feed>) {
        calls.push(feeds);
        const [batch, seq] = feeds.input_ids!.dims as [number, number];
        const rows = feeds.pixel_values!.dims[0]!;
        if (needsRowPerText && rows !== batch) throw new Error(`pixel_values batch ${rows} != ${batch}`);
        const data = new Float32Array(batch * seq * 3);
        for (let i = 0; i < batch * seq; i++) data.set([Number(feeds.input_ids!.data[i]), rows, 0], i * 3);
        return { name: "embeddings", data, dims: [batch, seq, 3] };
      },
    };
  };
  const input = (ids: number[]) => ({ ids: Int32Array.from(ids), attention: new Uint8Array(ids.length).fill(1), keep: new Uint8Array(ids.length).fill(1), tokens: ids.length });
  const batch = multiVectorBatches(0).assemble([input([5, 6, 7]), input([8])]).tensors;

  test("queries get one zero image per batch when the graph accepts it", async () => {
    const s = fakeSession(false);
    const { runner, oneImage } = await colpaliQueryRunner(s, "embeddings", [3, 2, 2], batch);
    expect(oneImage).toBe(true);
    const [a, b] = await runner.run(batch);
    expect(s.calls.at(-1)!.pixel_values!.dims).toEqual([1, 3, 2, 2]);
    expect([a!.rows, b!.rows]).toEqual([3, 1]);
    // vectors are L2-normalised: [8, 1, 0] / |.|
    expect(b!.data[0]).toBeCloseTo(8 / Math.hypot(8, 1), 6);
  });

  test("a graph that ties pixel_values' batch to the text's gets one zero image per row after the probe fails", async () => {
    const s = fakeSession(true);
    const { runner, oneImage } = await colpaliQueryRunner(s, "embeddings", [3, 2, 2], batch);
    expect(oneImage).toBe(false);
    await runner.run(batch);
    expect(s.calls.at(-1)!.pixel_values!.dims).toEqual([2, 3, 2, 2]);
    expect(Array.from(s.calls.at(-1)!.pixel_values!.data as Float32Array).every((v) => v === 0)).toBe(true);
  });

  test("images are fed the image prompt's ids, all attended, every position kept", async () => {
    const s = fakeSession(true);
    const runner = colpaliImageRunner(s, "embeddings", Int32Array.of(9, 9, 2, 4));
    const pixels = new Float32Array(2 * 12).fill(0.5);
    const out = await runner.run({ data: pixels, dims: [2, 3, 2, 2] });
    expect(out.map((v) => v.rows)).toEqual([4, 4]);
    expect(Array.from(s.calls[0]!.input_ids!.data)).toEqual([9, 9, 2, 4, 9, 9, 2, 4]);
    expect(Array.from(s.calls[0]!.attention_mask!.data)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
    expect(s.calls[0]!.pixel_values!.data).toBe(pixels);
  });
});

test("image batches cost each image its tokens: a 512-token budget runs 1030-token images one at a time, 34-token ones together", async () => {
  const runs: number[] = [];
  const runner = { run: async (t: { dims: number[] }) => (runs.push(t.dims[0]!), Array.from({ length: t.dims[0]! }, () => t.dims[0]!)) };
  const limits = { maxBatchSize: 32, maxBatchTokens: 512, maxQueueSize: 100 };
  const big = new Engine("big", runner, colpaliImageBatches([3, 2, 2], 1030), limits);
  big.start();
  await big.submit(Array.from({ length: 3 }, () => new Float32Array(12)));
  expect(runs).toEqual([1, 1, 1]);
  runs.length = 0;
  const small = new Engine("small", runner, colpaliImageBatches([3, 2, 2], 34), limits);
  small.start();
  await small.submit(Array.from({ length: 4 }, () => new Float32Array(12)));
  expect(runs).toEqual([4]);
});
