// Added tokens that contain whitespace (PyLate ColBERT models add "[Q] " and "[D] ", normalized, behind BERT's
// lowercasing normaliser): a long text is still cut at a space or before an ideograph, but never where an
// occurrence of such a token could span the cut (prefix.ts, addedSpans), in the raw text or in the normalised one
// (where a tab, a dropped control character, a stripped accent or BERT's space before an ideograph can complete
// "[q] "). Against the Rust library tokenizing the whole text and truncating it.
import { describe, expect, test } from "bun:test";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../../src/tokenize/encode";
import { cutPolicy } from "../../src/tokenize/prefix";
import { expectLibraryIds, libraryTruncated, tokenizerText } from "../helpers";
import { letters } from "../../bench/workload";
import { expectAtLimit, type LimitCase } from "./at-limit";

const PYLATE = "models/colbert-pylate";
const MAX = 61;

/** The colbert-pylate tokenizer.json with its added tokens changed by `edit`. */
function pylateWith(edit: (added: Array<Record<string, unknown>>) => Array<Record<string, unknown>>): Record<string, unknown> {
  const json = JSON.parse(tokenizerText(PYLATE)!);
  json.added_tokens = edit(json.added_tokens);
  return json;
}

/**
 * Each pattern placed where the cut is looked for (the first space or ideograph after 16,384 characters, the last
 * before the final 16,384 on the left), shifted by -6..6 characters, after (before, on the left) 55-60 words, so that
 * the tokens around the cut are among the kept ones: a cut through a token changes the ids.
 */
async function checkAround(label: string, json: Record<string, unknown>, patterns: string[]): Promise<void> {
  const text = JSON.stringify(json);
  const encoder = await Encoder.create(json, {}, MAX);
  const rust = Tokenizer.fromString(text);
  rust.disablePadding();
  for (const p of patterns) {
    const rights: string[] = [];
    const lefts: string[] = [];
    for (let shift = -6; shift <= 6; shift++) {
      for (let words = 55; words <= 60; words++) {
        const blank = " ".repeat(16_384 + shift - 2 * words);
        rights.push("w ".repeat(words) + blank + p + " hello " + p + " world".repeat(50));
        lefts.push("hello world ".repeat(50) + p + " there " + p + blank + " w".repeat(words));
      }
    }
    for (const [direction, inputs] of [["right", rights], ["left", lefts]] as const) {
      const got = await encoder.encodeBatch(inputs, undefined, { direction });
      for (let i = 0; i < inputs.length; i++) {
        const want = await libraryTruncated(rust, MAX, inputs[i]!, null, direction);
        expect([label, p, direction, i, Array.from(got[i]!.ids)]).toEqual([label, p, direction, i, want.ids]);
      }
    }
  }
}

describe("added tokens with whitespace: cut only where no match of one can span the cut", () => {
  test("the policy: cuts with such tokens, refused where a match depends on its surroundings or the normaliser is not per character", () => {
    const pylate = cutPolicy(JSON.parse(tokenizerText(PYLATE)!));
    expect(pylate?.spaced).toEqual({ raw: [], normalized: ["[Q] ", "[D] "] });
    const spacedWith = (flags: Record<string, unknown>) => pylateWith((a) => a.map((t) => (t.content === "[Q] " ? { ...t, ...flags } : t)));
    expect(cutPolicy(spacedWith({ lstrip: true }))).toBeNull();
    expect(cutPolicy(spacedWith({ rstrip: true }))).toBeNull();
    expect(cutPolicy(spacedWith({ single_word: true }))).toBeNull();
    expect(cutPolicy(spacedWith({ normalized: false }))?.spaced).toEqual({ raw: ["[Q] "], normalized: ["[D] "] });
    // NFC composes across characters: a normalised token's occurrences are not each character's normalisation
    const nfc = pylateWith((a) => a);
    nfc.normalizer = { type: "NFC" };
    expect(cutPolicy(nfc)).toBeNull();
    const lower = pylateWith((a) => a);
    lower.normalizer = { type: "Sequence", normalizers: [{ type: "NFD" }, { type: "Lowercase" }] };
    expect(cutPolicy(lower)?.spaced?.normalized).toEqual(["[Q] ", "[D] "]);
  });

  test("colbert-pylate ([Q] and [D] with a trailing space, matched lowercased): at the start, in the middle, at the cut, repeated, upper and lower case", () =>
    checkAround(PYLATE, JSON.parse(tokenizerText(PYLATE)!), [
      "a [Q] b",
      "[Q] [Q] [Q] ",
      "[q] [D] x",
      "abc[Q] x",
      "x[D] ",
      "[[Q] ]",
      "[Q ] x",
      "[Q]  x",
      // a tab, a control character BERT drops, an accent it strips, its space before an ideograph: "[q] " in the
      // normalised text only
      "[q]\tb",
      "[Q]\u0001 x",
      "[Q]\u0301 x",
      "[Q]中",
      "[Q]\u3000x",
      "[Q]\u00a0y",
    ]));

  test("a token with a space inside, matched raw, and one matched normalised (the cut inside it on either side)", () =>
    checkAround(
      "raw and normalised tokens with inner spaces",
      pylateWith((a) => [
        ...a.map((t) => (t.content === "[Q] " ? { ...t, normalized: false } : t)),
        { id: 1602, content: "Hello World", single_word: false, lstrip: false, rstrip: false, normalized: false, special: false },
        { id: 1603, content: "big apple", single_word: false, lstrip: false, rstrip: false, normalized: true, special: false },
      ]),
      ["[Q] x", "[q] x", "Hello World", "hello world", "Big Apple", "big\tapple", "big\u0001 apple", "x Hello World y", "big apple big apple"],
    ));

  test("next to a long word, and a token right after WordPiece's shortened run", () =>
    checkAround(PYLATE, JSON.parse(tokenizerText(PYLATE)!), ["a".repeat(300) + "[Q] " + "b".repeat(300), "[Q] " + letters(500, "абвгд", 2) + " [D] "]));

  test("Unigram: a long word's replica is not used when such a token may take the space after the word", async () => {
    // the replica reads the word up to the next space; "ab " makes the library's word end one letter earlier
    const json = JSON.parse(tokenizerText("models/xlmr-max")!);
    json.added_tokens.push({ id: json.model.vocab.length, content: "ab ", single_word: false, lstrip: false, rstrip: false, normalized: false, special: false });
    const inputs = { "one letter, then the token": "hello " + "a".repeat(100_000) + "ab tail", "one letter": "hello " + "a".repeat(100_001) + " tail" };
    await expectLibraryIds("xlmr-max with an added \"ab \"", JSON.stringify(json), MAX, inputs);
  });
});

// At the limit: 1,000,000 characters (--max-input-chars' default), which the library takes 0.3-2.7 s for on this
// tokenizer, cut on the right and on the left, in a fraction of that (timed in a fresh process: at-limit.ts).
describe("1,000,000 characters on colbert-pylate", () => {
  test("identical ids, under a quarter of the library's time", () =>
    expectAtLimit(PYLATE, ["one letter", "CJK", "mixed", "words with markers, then one letter"].flatMap((kind) => [[kind, "right"], [kind, "left"]] as LimitCase[])));
});
