// Runs of characters that a per-character normaliser drops (src/tokenize/prefix.ts shortenDroppedRuns): BERT's
// cleaning drops controls and formats (zero-width spaces, byte-order marks, soft hyphens, U+0001), its accent
// stripping drops nonspacing marks. A long text's runs of them are shortened before it is cut or tokenized; the
// shortened text must normalise to exactly what the whole text does, and so give the same ids and word ids.
import { describe, expect, test } from "bun:test";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../../src/tokenize/encode";
import { cutPolicy, shortenDroppedRuns, type Dropped } from "../../src/tokenize/prefix";
import { SHARED_TOKENIZERS, bertVariant, describeLikeLibrary, textOfPieces, tokenizerText } from "../helpers";
import { expectAtLimit, type LimitCase } from "./at-limit";
import { existsSync } from "node:fs";

const VARIANTS: Record<string, () => string> = {
  "NFD, StripAccents, Lowercase": () => bertVariant({ type: "Sequence", normalizers: [{ type: "NFD" }, { type: "StripAccents" }, { type: "Lowercase" }] }),
  "BertNormalizer, accents stripped, cased": () => bertVariant({ type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: true, lowercase: false }),
  // an added token spelled with dropped characters, matched in the raw text: they may not be shortened
  "raw added token of zero-width spaces": () => bertVariant(undefined, [{ content: "\u200b\u200b", normalized: false }, { content: "x\u00ady", normalized: false }]),
};

const SHARED = existsSync(SHARED_TOKENIZERS) ? ["shared/bert-base-uncased.tokenizer.json"] : [];
const FIXTURE_NAMES = ["models/bert-mean-norm", "models/bert-classify", "models/colbert-pylate", "models/colbert-stanford"];
const jsonOf = (name: string) => VARIANTS[name]?.() ?? tokenizerText(name)!;
const NAMES = [...SHARED, ...FIXTURE_NAMES, ...Object.keys(VARIANTS)];

/**
 * Dropped characters of every kind (controls, formats, U+FFFD, nonspacing marks of several combining classes, the
 * starter mark U+034F, astral formats), runs of them, and what may stand next to them: letters, marks that survive
 * (U+1D165 and U+1D16D are spacing marks of classes 216 and 226, which NFD reorders around a dropped run unless a
 * starter stands between them), spaces, punctuation, ideographs and added tokens.
 */
const PIECES = [
  "\u200b",
  "\ufeff",
  "\u0001",
  "\u0000",
  "\u00ad",
  "\ufffd",
  "\u{e0001}",
  "\u{1d173}",
  "\u0301",
  "\u0323",
  "\u034f",
  "\u200b".repeat(40),
  "\ufeff".repeat(17),
  "\u0001\u200b\ufeff".repeat(9),
  "\u0301".repeat(33),
  "\u0301\u034f\u0301\u0301\u0323\u0323",
  "\u{1d16d}\u0301\u034f\u0301\u0301\u{1d165}",
  "\u{1d16d}\u0301\u0301\u0301\u{1d165}",
  // runs of dropped marks of several classes (kept to their first), with survivors of classes 216 and 226 around
  "\u0301\u0316\u0308\u0327\u05b0".repeat(9),
  "\u{1d16d}\u0316\u0301\u0334\u0323\u{1d165}",
  "\u{1d165}\u0301\u0316\u{1d16d}\u0327\u0301",
  "\u{1d165}",
  "\u{1d16d}",
  "a",
  "word",
  "Word",
  "É",
  "e\u0301",
  " ",
  "\n",
  "!",
  "日本",
  "[MASK]",
  "[Q] ",
  "x\u00ady",
];
const LONG = 24_000;

function inputs(seed: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let k = 0; k < 3; k++) out[`pieces, seed ${seed + k}`] = textOfPieces(PIECES, seed * 7919 + k, LONG);
  out["zero-width spaces"] = "\u200b".repeat(LONG);
  out["words, then byte-order marks"] = "hello world ".repeat(100) + "\ufeff".repeat(LONG);
  out["marks after a letter"] = "a" + "\u0301".repeat(LONG);
  out["words in runs of dropped characters"] = textOfPieces(["word ", "\u200b".repeat(300), "\u0001\ufeff".repeat(50), "\u0301".repeat(90), "é"], seed, LONG);
  return out;
}

/** The Encoder's Dropped kind of each code point (a private member, read as the Encoder uses it). */
const kindOf = (encoder: Encoder) => (encoder as unknown as { isDropped: (cp: number) => Dropped }).isDropped;

describe("shortenDroppedRuns", () => {
  // 1: a dropped control or format; 2: another dropped character (a mark); 3: a dropped non-starter
  const kind = (cp: number): Dropped => (/[\p{C}]/u.test(String.fromCodePoint(cp)) ? 1 : cp === 0x34f ? 2 : /\p{Mn}/u.test(String.fromCodePoint(cp)) ? 3 : 0);

  test("a run of controls and formats keeps its first character", () => {
    expect(shortenDroppedRuns("a\u200b\ufeff\u0001\u200bb", kind)).toBe("a\u200bb");
    expect(shortenDroppedRuns("\ufeff".repeat(1000), kind)).toBe("\ufeff");
    expect(shortenDroppedRuns("\u{e0001}\u{e0001}\u200bx\u{e0001}", kind)).toBe("\u{e0001}x\u{e0001}");
  });

  test("a run of non-starters keeps its first character; one with a dropped starter (U+034F) keeps one of each repeated", () => {
    expect(shortenDroppedRuns("a" + "\u0301\u0316\u0308".repeat(1000) + "b", kind)).toBe("a\u0301b");
    expect(shortenDroppedRuns("x\u0301\u0316\u034f\u034f\u0316\u0301y", kind)).toBe("x\u0301\u0316\u034f\u0316\u0301y");
  });

  test("other runs keep one of each character repeated in a row, in order", () => {
    expect(shortenDroppedRuns("a" + "\u0301".repeat(1000), kind)).toBe("a\u0301");
    expect(shortenDroppedRuns("x\u0301\u0301\u034f\u034f\u0301\u200b\u200by", kind)).toBe("x\u0301\u034f\u0301\u200by");
  });

  test("a text without runs comes back as it was", () => {
    const text = "a\u200bb\u0301c d";
    expect(shortenDroppedRuns(text, kind)).toBe(text);
  });

  test("which tokenizers drop characters (CutPolicy.dropped): per-character normalisers that clean or strip", () => {
    expect(cutPolicy(JSON.parse(tokenizerText("models/bert-mean-norm")!))?.dropped).toEqual(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]);
    expect(cutPolicy(JSON.parse(bertVariant({ type: "Sequence", normalizers: [{ type: "NFD" }, { type: "StripAccents" }] })))?.dropped).not.toBeNull();
    expect(cutPolicy(JSON.parse(bertVariant({ type: "BertNormalizer", clean_text: false, handle_chinese_chars: true, strip_accents: false, lowercase: false })))?.dropped).toBeNull();
    expect(cutPolicy(JSON.parse(bertVariant({ type: "Sequence", normalizers: [{ type: "NFC" }, { type: "StripAccents" }] })))?.dropped ?? null).toBeNull();
    expect(cutPolicy(JSON.parse(bertVariant(null)))?.dropped).toBeNull();
  });
});

describe("a text with its dropped runs shortened normalises as the whole text does: same ids and word ids", () => {
  for (const name of NAMES) {
    test(name, async () => {
      const json = jsonOf(name);
      const encoder = await Encoder.create(JSON.parse(json), {}, 512);
      const rust = Tokenizer.fromString(json);
      rust.disablePadding();
      rust.disableTruncation();
      const normalizer = rust.getNormalizer()!;
      let shortened = 0;
      for (let seed = 0; seed < 40; seed++) {
        const text = textOfPieces(PIECES, seed * 104729 + 17, 400);
        const short = shortenDroppedRuns(text, kindOf(encoder));
        if (short.length < text.length) shortened++;
        expect([name, seed, normalizer.normalizeString(short)]).toEqual([name, seed, normalizer.normalizeString(text)]);
        const [whole, cut] = await Promise.all([rust.encode(text, null, { addSpecialTokens: false }), rust.encode(short, null, { addSpecialTokens: false })]);
        expect([name, seed, cut.getIds(), cut.getWordIds()]).toEqual([name, seed, whole.getIds(), whole.getWordIds()]);
      }
      // the texts are shortened (no vacuous pass)
      expect(shortened).toBeGreaterThan(30);
    }, 60_000);
  }

  test("characters an added token holds in the raw text are not shortened", async () => {
    const encoder = await Encoder.create(JSON.parse(VARIANTS["raw added token of zero-width spaces"]!()), {}, 512);
    const kind = kindOf(encoder);
    expect([kind(0x200b), kind(0xad), kind(0xfeff), kind(0x301)]).toEqual([0, 0, 1, 3]);
  });

  test("a cased BERT drops controls, keeps marks", async () => {
    const encoder = await Encoder.create(JSON.parse(tokenizerText("models/bert-classify")!), {}, 512);
    const kind = kindOf(encoder);
    expect([kind(0x200b), kind(0xfeff), kind(0x1), kind(0x301), kind(0x61), kind(0x20)]).toEqual([1, 1, 1, 0, 0, 0]);
  });
});

describeLikeLibrary("long runs of dropped characters", NAMES.filter((n) => !n.includes(" ")), inputs);

// At the limit: 1,000,000 characters, timed in a fresh process against the library (at-limit.ts).
const DROPPED_LIMIT: Record<string, string[]> = {
  "shared/bert-base-uncased.tokenizer.json": ["zero-width spaces", "byte-order marks", "combining marks", "controls and formats", "marks of several classes", "marks of one class, mixed"],
  "models/bert-classify": ["zero-width spaces", "byte-order marks", "controls and formats"],
  "models/colbert-pylate": ["zero-width spaces", "combining marks", "marks of several classes"],
  // separators after soft hyphens and dropped controls (prefix.ts separatorCutAt: CutPolicy.separatorLeads)
  "shared/t5-small.tokenizer.json": ["controls and formats"],
  "shared/xlm-roberta-unigram.tokenizer.json.gz": ["controls and formats"],
  "models/xlmr-max": ["controls and formats"],
};
describe("1,000,000 characters of dropped runs (timed in a fresh process: at-limit.ts)", () => {
  for (const [name, kinds] of Object.entries(DROPPED_LIMIT)) {
    if (name.startsWith("shared/") && SHARED.length === 0) continue;
    test(name, () => expectAtLimit(name, kinds.flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[])), 600_000);
  }
});
