// BertPreTokenizer isolates every punctuation character, so a long run of punctuation ("!!!!", "-----", "....") is
// one token per character and was tokenized whole (1.3-3.4 s at 1,000,000 characters): prefix.ts punctuationCutAt
// cuts before and after a punctuation mark where both characters are their own units for BERT's normaliser, no added
// token holds the two, and the tokenizer's own pre-tokenizer splits them. Ids must be the library's on the whole text,
// truncated (right, left, pairs), around added tokens ([CLS], [SEP], [MASK], PyLate's "[Q] "), marks, Unicode
// punctuation the normaliser maps (U+037E to ";") and CJK punctuation.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { Tokenizer } from "tokenizers";
import { cutAtOrAfter, cutAtOrBefore, cutPolicy } from "../../src/tokenize/prefix";
import { SHARED_TOKENIZERS, describeLikeLibrary, textOfPieces, tokenizerText } from "../helpers";
import { expectAtLimit, type LimitCase } from "./at-limit";

/** The BERT pipelines here: cased and uncased, PyLate's added "[Q] " / "[D] ", nomic's and ModernBERT's files. */
const NAMES = [
  ...(existsSync(SHARED_TOKENIZERS) ? ["shared/bert-base-uncased.tokenizer.json"] : []),
  "models/bert-mean-norm",
  "models/colbert-pylate",
  "models/colbert-stanford",
  "models/nomic-embed",
  "models/modernbert-embed",
];

const PIECES = ["!", "!!!", "-".repeat(40), ".".repeat(25), "?!", "[", "]", "[CLS]", "[SEP]", "[MASK]", "[UNK]", "[Q] ", "[D] ", "[q]", "[C", "LS]", "a", "word", "Word", " ", "  ", "\n", "12", "日本", "。", "、", "¿", "«»", "\u037e", "\u0387", "!\u0301", "\u0301", "é", "😀", "\u00ad", "\u200b", "#", "$%&", "'", "\"", "\u2014", "\u2026"];
const LONG = 24_000;

function inputs(seed: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let k = 0; k < 4; k++) out[`pieces, seed ${seed + k}`] = textOfPieces(PIECES, seed * 7919 + k, LONG);
  out.bang = "!".repeat(LONG);
  out.dashes = "-".repeat(LONG);
  out["[CLS] repeated"] = "[CLS]".repeat(LONG / 5);
  out["[Q] repeated"] = "[Q] ".repeat(LONG / 4);
  out["brackets"] = "[[]]".repeat(LONG / 4);
  out["words, then dots"] = "hello world ".repeat(100) + ".".repeat(LONG);
  out["dots, then words"] = ".".repeat(LONG) + " hello world".repeat(100);
  out["words between tabs"] = "hello\tworld\tagain\t".repeat(LONG / 18);
  out["words between U+00A0 and U+3000"] = textOfPieces(["hello", "world", "\u00a0", "\u3000", "[MASK]", "é"], seed, LONG);
  out["math symbols"] = textOfPieces([..."\u2211\u222b\u221a\u221e\u2248\u2260\u2264\u2265\u00b1\u00d7\u00f7\u2202\u2207\u03b1\u03b2\u03b3\u03b4"], seed, LONG);
  return out;
}

describeLikeLibrary("long punctuation under BertPreTokenizer", NAMES, inputs);

describe("where a punctuation cut is taken", () => {
  const json = tokenizerText("models/bert-mean-norm")!;
  const policy = cutPolicy(JSON.parse(json))!;
  const rust = Tokenizer.fromString(json);
  const normalizer = rust.getNormalizer()!;
  const pre = rust.getPreTokenizer()!;
  const normalize = (ch: string) => normalizer.normalizeString(ch);
  const pieces = (s: string) => pre.preTokenizeString(s).length;

  test("before and after a mark of punctuation, both directions", () => {
    expect(cutAtOrAfter("abc!def", 1, policy, normalize, pieces)).toBe(3);
    expect(cutAtOrAfter("!!!!!!", 2, policy, normalize, pieces)).toBe(2);
    expect(cutAtOrBefore("abc!def", 6, policy, normalize, pieces)).toBe(4);
    expect(cutAtOrBefore("。。。。", 2, policy, normalize, pieces)).toBe(2);
  });

  test("at characters that are punctuation once normalised (U+2260 is \"=\" behind accent stripping)", () => {
    expect(cutAtOrAfter("ab\u2260cd", 1, policy, normalize, pieces)).toBe(2);
    expect(cutAtOrBefore("ab\u2260cd", 4, policy, normalize, pieces)).toBe(3);
    expect(cutAtOrAfter("\u2211\u1fef\u03b1", 1, policy, normalize, pieces)).toBe(1);
    // cased, no accent stripping: U+2260 stays itself, inside its word
    const cased = JSON.parse(json);
    cased.normalizer = { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: false, lowercase: false };
    const casedNormalizer = Tokenizer.fromString(JSON.stringify(cased)).getNormalizer()!;
    expect(cutAtOrAfter("ab\u2260cd", 1, cutPolicy(cased)!, (ch) => casedNormalizer.normalizeString(ch), pieces)).toBe(-1);
  });

  test("after whitespace other than U+0020 (a tab, U+00A0, U+3000), before what is not whitespace", () => {
    expect(cutAtOrAfter("hello\u00a0world", 1, policy, normalize, pieces)).toBe(6);
    expect(cutAtOrAfter("hello\t\u3000world", 1, policy, normalize, pieces)).toBe(7);
    expect(cutAtOrBefore("hello\u3000world\tagain", 14, policy, normalize, pieces)).toBe(12);
    // not inside a run of whitespace, nor before a mark
    expect(cutAtOrAfter("ab\t\u0301cd", 1, policy, normalize, pieces)).toBe(-1);
    // nor inside an added token that holds the whitespace and what follows it
    const withTab = JSON.parse(json);
    withTab.added_tokens.push({ id: 1 + Math.max(...(Object.values(withTab.model.vocab) as number[])), content: "x\ty", single_word: false, lstrip: false, rstrip: false, normalized: false, special: false });
    expect(cutAtOrAfter("abx\tyz", 1, policy, normalize, pieces)).toBe(4);
    // (the token's end is a cut: addedCut)
    expect(cutAtOrAfter("abx\tyz", 1, cutPolicy(withTab)!, normalize, pieces)).toBe(5);
  });

  test("never inside an added token, next to a mark or without the pre-tokenizer's count", () => {
    // "[CLS]": every neighbouring pair is inside the token
    expect(cutAtOrAfter("x[CLS]".repeat(3), 2, policy, normalize, pieces)).toBe(6);
    // a mark joins the punctuation before it as far as the normaliser goes
    expect(cutAtOrAfter("ab!\u0301cd", 3, policy, normalize, pieces)).toBe(-1);
    expect(cutAtOrAfter("!!!!!!", 2, policy, normalize)).toBe(-1);
  });

  test("byte-level BPE keeps punctuation runs together: no such cuts there", () => {
    expect(cutPolicy(JSON.parse(tokenizerText("models/roberta-cls")!))!.punctuation).toBeNull();
    expect(cutPolicy(JSON.parse(tokenizerText("models/xlmr-max")!))!.punctuation).toBeNull();
  });
});

describe("1,000,000 characters of punctuation (timed in a fresh process: at-limit.ts)", () => {
  for (const name of ["models/bert-mean-norm", "models/colbert-pylate"]) {
    test(name, () => expectAtLimit(name, ["one punctuation", "punctuation and letters", "math symbols", "words between tabs", "words between NBSP"].flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[])), 600_000);
  }
});
