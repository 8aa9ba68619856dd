// The one shortcut for long texts (src/tokenize/cut.ts): which tokenizers cut and where, and texts built to stress the
// cut (whitespace of every kind the library counts, runs of it, marks, Prepend characters, punctuation, added
// tokens, words longer than the margin) whose ids must be the library's on the whole text, truncated: right, left and
// as pair members, on every distinct fixture tokenizer and the published ones in ../shared/tokenizers.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "tokenizers";
import { cutAtOrAfter, cutAtOrBefore, cutPolicy, codePointsBefore } from "../../src/tokenize/cut";
import { Encoder } from "../../src/tokenize/encode";
import { FIXTURES, SHARED_TOKENIZERS, describeLikeLibrary, libraryTruncated, textOfPieces, tokenizerText } from "../helpers";

const SHARED = ["bert-base-uncased.tokenizer.json", "roberta-base.tokenizer.json", "clip-vit-base-patch32.tokenizer.json", "t5-small.tokenizer.json", "xlm-roberta-unigram.tokenizer.json.gz"];
/** Every fixture's tokenizer.json once (several fixtures share one file). */
function fixtureNames(): string[] {
  const seen = new Set<string>();
  const names: string[] = [];
  for (const dir of readdirSync(FIXTURES).sort()) {
    const text = existsSync(join(FIXTURES, dir, "tokenizer.json")) ? tokenizerText(`models/${dir}`) : null;
    if (text === null || seen.has(text)) continue;
    seen.add(text);
    names.push(`models/${dir}`);
  }
  return names;
}
const NAMES = [...(existsSync(SHARED_TOKENIZERS) ? SHARED.map((f) => `shared/${f}`) : []), ...fixtureNames()];

const policyOf = (json: string) => cutPolicy(JSON.parse(json), Tokenizer.fromString(json));
const variant = (name: string, change: (tj: Record<string, any>) => void): string => {
  const tj = JSON.parse(tokenizerText(name)!);
  change(tj);
  return JSON.stringify(tj);
};

describe("the cut policy is read off the tokenizer's own normaliser and pre-tokenizer", () => {
  test("BERT cuts at every whitespace character; Metaspace behind NFKC at spaces and what NFKC makes spaces, not line breaks", () => {
    const bert = policyOf(tokenizerText("models/bert-mean-norm")!)!;
    for (const w of [" ", "\n", "\t", "\u3000", "\u00a0"]) expect([JSON.stringify(w), bert.cutChars.includes(w)]).toEqual([JSON.stringify(w), true]);
    const metaspace = policyOf(tokenizerText("models/jina-v3")!)!;
    expect(metaspace.cutChars.includes(" ")).toBe(true);
    expect(metaspace.cutChars.includes("\u3000")).toBe(true);
    expect(metaspace.cutChars.includes("\n")).toBe(false);
    // Qwen's regex keeps a line break with the punctuation before it, but after a letter the piece ends
    expect(policyOf(tokenizerText("models/qwen3-embed")!)!.cutChars.includes("\n")).toBe(true);
  });

  test("the margin covers the longest vocabulary entry and added token", () => {
    for (const name of NAMES) {
      const tj = JSON.parse(tokenizerText(name)!);
      const policy = policyOf(tokenizerText(name)!);
      if (!policy) continue;
      const vocab: string[] = Array.isArray(tj.model.vocab) ? tj.model.vocab.map((e: [string, number]) => e[0]) : Object.keys(tj.model.vocab);
      const longest = Math.max(...vocab.map((v) => [...v].length), ...tj.added_tokens.map((t: { content: string }) => [...t.content].length));
      expect([name, policy.margin > longest]).toEqual([name, true]);
    }
  });

  // A text tokenized whole is truncated by the library to one token past the room (its count then the max length + 1);
  // a part cut at whitespace holds every token of the part, many more.
  test("every tokenizer here cuts a long text of words (its length then a lower bound past the max length + 1)", async () => {
    const prose = textOfPieces(["hello ", "world, ", "the ", "cat\n", "日本 ", "😀 ", "a\u3000"], 5, 30_000);
    for (const name of NAMES) {
      expect([name, policyOf(tokenizerText(name)!) !== null]).toEqual([name, true]);
      const encoder = await Encoder.create(JSON.parse(tokenizerText(name)!), {}, 64);
      for (const direction of ["right", "left"] as const) {
        const e = await encoder.encode(prose, { direction });
        expect([name, direction, e.fullLengthAtLeast, e.fullLength! > 65]).toEqual([name, direction, true, true]);
      }
    }
  });

  test("no cut where the pre-tokenizer does not split at spaces, or the normaliser is of an unknown kind", () => {
    const noSplit = variant("models/jina-v3", (tj) => (tj.pre_tokenizer.split = false));
    expect(policyOf(noSplit)).toBeNull();
    const noRegex = variant("models/roberta-cls", (tj) => (tj.pre_tokenizer = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }));
    expect(policyOf(noRegex)).toBeNull();
    const mergedWithPrevious = variant("models/roberta-cls", (tj) => (tj.pre_tokenizer = { type: "Split", pattern: { String: " " }, behavior: "MergedWithPrevious", invert: false }));
    expect(policyOf(mergedWithPrevious)).toBeNull();
    const farReplace = variant("models/bert-mean-norm", (tj) => (tj.normalizer = { type: "Replace", pattern: { Regex: "a.*z" }, content: "" }));
    expect(policyOf(farReplace)).toBeNull();
  });

  test("cuts are at a cut character after one that is not whitespace", () => {
    const policy = policyOf(tokenizerText("models/bert-mean-norm")!)!;
    const text = "ab  cd\n\nef\u3000gh";
    expect(cutAtOrAfter(text, 0, policy)).toBe(2);
    expect(cutAtOrAfter(text, 3, policy)).toBe(6);
    expect(cutAtOrAfter(text, 7, policy)).toBe(10);
    expect(cutAtOrAfter(text, 11, policy)).toBe(-1);
    expect(cutAtOrBefore(text, 12, policy)).toBe(10);
    expect(cutAtOrBefore(text, 9, policy)).toBe(6);
    expect(cutAtOrBefore(text, 1, policy)).toBe(-1);
    expect(codePointsBefore("a😀b", 3)).toBe(2);
  });
});

/** Every character the library counts as whitespace, runs of them, and what may stand next to a run. */
const WHITESPACE = ["\t", "\n", "\v", "\f", "\r", " ", "\u0085", "\u00a0", "\u1680", "\u2000", "\u2003", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"];
const PIECES = [
  ...WHITESPACE,
  ...WHITESPACE.map((w) => w.repeat(5)),
  " ".repeat(41),
  "\n".repeat(23),
  "\r\n",
  " \n".repeat(11),
  "a",
  "word",
  "Word",
  "日本",
  "é",
  "e\u0301",
  "\u0301",
  "!",
  "?!\n",
  "'s",
  "12",
  "\u200b",
  "\u0600",
  "😀",
  "</s>",
  "[SEP]",
  "<|im_end|>",
  "x".repeat(70),
];

function inputs(seed: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let k = 0; k < 2; k++) out[`pieces, seed ${seed + k}`] = textOfPieces(PIECES, seed * 7919 + k, 24_000);
  out["a word longer than the margin at every place"] = textOfPieces(["a ", "b ", "x".repeat(300) + " ", "c\n"], seed, 24_000);
  return out;
}

describeLikeLibrary("texts of whitespace, marks, punctuation and added tokens", NAMES, inputs);

describe("a prefix too short is grown, and a text without a cut is tokenized whole", () => {
  // A single text tokenized whole sets the tokenizer's truncation for its own call only: calls in flight beside it
  // (counts, pairs, the other direction) see none of it.
  test("a whole text's truncation does not reach the calls running beside it", async () => {
    const json = tokenizerText("models/roberta-cls")!;
    const encoder = await Encoder.create(JSON.parse(json), {}, 64);
    const rust = Tokenizer.fromString(json);
    rust.disablePadding();
    const a = "xyz".repeat(10_000);
    const b = "q".repeat(20_000) + "é".repeat(10_000);
    const full = async (t: string) => (await rust.encode(t, null, { addSpecialTokens: false })).getLength();
    // a count issued right after a whole text (the binding reads its truncation when a call runs, not when it is made)
    for (const t of [a, b]) expect((await Promise.all([encoder.encode(t), encoder.countContent(t)]))[1]).toBe(await full(t));
    const [ra, la, ca, cb, pair] = await Promise.all([
      encoder.encode(a),
      encoder.encode(b, { direction: "left" }),
      encoder.countContent(a),
      encoder.countContent(b),
      encoder.encodePair("what is this?", b),
    ]);
    expect([ca, cb]).toEqual([await full(a), await full(b)]);
    expect(Array.from(ra.ids)).toEqual((await libraryTruncated(rust, 64, a, null)).ids);
    expect(Array.from(la.ids)).toEqual((await libraryTruncated(rust, 64, b, null, "left")).ids);
    const wantPair = await libraryTruncated(rust, 64, "what is this?", b);
    expect([Array.from(pair.ids), Array.from(pair.typeIds ?? [])]).toEqual([wantPair.ids, wantPair.types]);
  });

  // Byte-level BPE, 64 tokens kept: kept tokens in the prefix's last word, or in a word ending within the margin of
  // the cut, are refused (the text is then tokenized whole: its length exact, not a lower bound).
  test("kept tokens in the part's last word, or within the margin of the cut, are not taken from the part", async () => {
    const json = tokenizerText("models/roberta-cls")!;
    const encoder = await Encoder.create(JSON.parse(json), {}, 64);
    const margin = policyOf(json)!.margin;
    expect(margin).toBeGreaterThan(9);
    const rust = Tokenizer.fromString(json);
    rust.disablePadding();
    const lastWord = "hello ".repeat(10) + "xyz".repeat(5_500) + " tail".repeat(100);
    // the first cut at or after 16,384 characters is 9 characters after the long word's end
    const nearCut = "xyz".repeat(5_458) + "x" + " ab" + " cd".repeat(100);
    for (const text of [lastWord, nearCut]) {
      for (const direction of ["right", "left"] as const) {
        const got = await encoder.encode(text, direction === "right" ? {} : { direction });
        const want = await libraryTruncated(rust, 64, text, null, direction);
        expect(Array.from(got.ids)).toEqual(want.ids);
        // tokenized whole: the library's truncation to one token past the room (max length + 1), not a part's many tokens
        if (direction === "right") expect([got.fullLengthAtLeast, got.fullLength]).toEqual([true, 65]);
      }
    }
  });

  test("WordPiece words of 100 letters (one [UNK] each): the first prefix holds too few tokens, the next enough", async () => {
    const json = tokenizerText("models/bert-mean-norm")!;
    const encoder = await Encoder.create(JSON.parse(json), {}, 512);
    const rust = Tokenizer.fromString(json);
    rust.disablePadding();
    const grown = ("y".repeat(100) + " ").repeat(1_500);
    const whole = "y".repeat(150_000);
    for (const [text, cut] of [[grown, true], [whole, false]] as const) {
      for (const direction of ["right", "left"] as const) {
        const got = await encoder.encode(text, { direction });
        const want = await libraryTruncated(rust, 512, text, null, direction);
        expect(Array.from(got.ids)).toEqual(want.ids);
        // a cut text's length is a lower bound past the max length (the part's tokens); a whole one's exact here
        expect([direction, got.fullLengthAtLeast === true, (got.fullLength ?? 0) > 513]).toEqual([direction, cut, cut]);
        if (!cut) expect(got.ids.length).toBe(3);
      }
    }
  });
});
