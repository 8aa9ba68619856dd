import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { join } from "node:path";
import { Encoder, longestFirst, padTokenId } from "../../src/tokenize/encode";
import { TokenizerPool } from "../../src/tokenize/pool";
import { fixture, reference, ROOT } from "../helpers";

async function encoderFor(name: string, maxLength: number) {
  const dir = fixture(name);
  const tj = await Bun.file(join(dir, "tokenizer.json")).json();
  const tcFile = Bun.file(join(dir, "tokenizer_config.json"));
  const tc = (await tcFile.exists()) ? await tcFile.json() : {};
  return { enc: await Encoder.create(tj, tc, maxLength), tj, tc };
}

describe("token ids match the HuggingFace tokenizers, truncation included", () => {
  for (const name of ["bert-mean-norm", "roberta-cls", "xlmr-max", "bert-classify"]) {
    test(name, async () => {
      const ref = await reference(name);
      const { enc } = await encoderFor(name, ref.max_seq_length ?? ref.max_length);
      for (const c of ref.cases) expect(Array.from((await enc.encode(c.text)).ids)).toEqual(c.input_ids);
    });
  }

  test("bert-rerank pairs: ids and token type ids", async () => {
    const ref = await reference("bert-rerank");
    const { enc } = await encoderFor("bert-rerank", ref.max_length);
    // Every case exactly, the odd token of a halved budget included (it goes where tokenizers 0.23 puts it).
    for (const c of ref.cases) {
      const e = await enc.encodePair(c.query, c.document);
      expect(Array.from(e.ids)).toEqual(c.input_ids);
      expect(Array.from(e.typeIds!)).toEqual(c.token_type_ids);
    }
  });

  test("pad ids: BERT 0, RoBERTa 1", async () => {
    for (const [name, pad] of [["bert-mean-norm", 0], ["roberta-cls", 1]] as const) {
      const { enc, tj, tc } = await encoderFor(name, 64);
      const config = await Bun.file(join(fixture(name), "config.json")).json();
      expect(padTokenId(tj, tc, config, enc)).toBe(pad);
    }
  });
});

describe("longest-first pair truncation (the Rust tokenizers rule)", () => {
  test("table", () => {
    expect(longestFirst(3, 4, 10)).toEqual([3, 4]);
    expect(longestFirst(3, 20, 10)).toEqual([3, 7]);
    expect(longestFirst(20, 3, 10)).toEqual([7, 3]);
    expect(longestFirst(8, 9, 11)).toEqual([5, 6]);
    expect(longestFirst(9, 8, 11)).toEqual([6, 5]);
    expect(longestFirst(20, 20, 11)).toEqual([5, 6]);
    expect(longestFirst(100, 150, 61)).toEqual([30, 31]);
  });
});

// Real published tokenizers from ../shared/tokenizers: skipped where that folder is absent.
const SHARED = join(ROOT, "..", "shared", "tokenizers");
const shared = (file: string) => {
  const p = join(SHARED, file);
  if (!existsSync(p)) return null;
  const raw = readFileSync(p);
  return JSON.parse((file.endsWith(".gz") ? gunzipSync(raw) : raw).toString("utf8"));
};

describe.skipIf(!existsSync(SHARED))("real published tokenizers", () => {
  test("bert-base-uncased: specials, lowercasing, truncation keeps [SEP]", async () => {
    const enc = await Encoder.create(shared("bert-base-uncased.tokenizer.json"), {}, 8);
    expect(Array.from((await enc.encode("Hello world, this is a test!")).ids)).toEqual([101, 7592, 2088, 1010, 2023, 2003, 1037, 102]);
    const pair = await enc.encodePair("query here", "document text that is long");
    expect(pair.ids.length).toBe(8);
    expect(pair.ids[0]).toBe(101);
    expect(pair.ids[7]).toBe(102);
    expect(Array.from(pair.typeIds!)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
  });

  test("roberta-base: <s> ... </s></s> ... </s> pair template", async () => {
    const enc = await Encoder.create(shared("roberta-base.tokenizer.json"), {}, 512);
    const e = await enc.encodePair("a", "b");
    expect(e.ids[0]).toBe(0);
    expect(Array.from(e.ids).filter((x) => x === 2)).toHaveLength(3);
  });

  test("xlm-roberta unigram and t5: load and encode with specials at the ends", async () => {
    const x = await Encoder.create(shared("xlm-roberta-unigram.tokenizer.json.gz"), {}, 16);
    const ids = Array.from((await x.encode("Grüße aus Köln, 東京 und 🧪 ".repeat(5))).ids);
    expect(ids).toHaveLength(16);
    expect(ids[0]).toBe(0);
    expect(ids[15]).toBe(2);
    const t5 = await Encoder.create(shared("t5-small.tokenizer.json"), {}, 32);
    const t = Array.from((await t5.encode("translate English to German: hello")).ids);
    expect(t[t.length - 1]).toBe(1);
  });

  test("clip byte-level BPE", async () => {
    const enc = await Encoder.create(shared("clip-vit-base-patch32.tokenizer.json"), {}, 77);
    const ids = Array.from((await enc.encode("a photo of a cat")).ids);
    expect(ids[0]).toBe(49406);
    expect(ids[ids.length - 1]).toBe(49407);
  });
});

describe("worker pool", () => {
  test("encodes in workers in input order, across chunks, and reports unknown models", async () => {
    const pool = new TokenizerPool(2);
    try {
      const ref = await reference("bert-mean-norm");
      const { tj, tc } = await encoderFor("bert-mean-norm", 48);
      await pool.load("m", tj, tc, 48);
      const texts = Array.from({ length: 150 }, (_, i) => ref.cases[i % ref.cases.length].text);
      const out = await pool.encode("m", texts);
      out.forEach((e, i) => expect(Array.from(e.ids)).toEqual(ref.cases[i % ref.cases.length].input_ids));
      await expect(pool.encode("other", ["x"])).rejects.toThrow(/not loaded/);
    } finally {
      pool.close();
    }
  });
});
