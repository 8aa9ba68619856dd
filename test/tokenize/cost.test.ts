// What a long text costs the Encoder in the library's time: the characters of every text it hands the library
// (prefixes, suffixes, windows and the whole text) are counted. Where no cut is found early, windows far into the
// text are given up before they cost more than tokenizing it whole (encode.ts cheaperThanWhole): Thai with its vowel
// signs and tone marks has few window characters, and the library takes about 10 s per million characters of it.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { Encoder } from "../../src/tokenize/encode";
import { SHARED_TOKENIZERS, textOfPieces, tokenizerText } from "../helpers";
import { expectAtLimit, type LimitCase } from "./at-limit";

const THAI = [..."กขคงจฉชซดตถทนบปผพฟมยรลวสหอ", "\u0e31", "\u0e34", "\u0e35", "\u0e48", "\u0e49", "\u0e38", "\u0e33"];
const NAMES = [...(existsSync(SHARED_TOKENIZERS) ? ["shared/roberta-base.tokenizer.json"] : []), "models/clap"];

type Batch = (texts: string[], options?: unknown) => Promise<unknown>;
type One = (text: string, pair?: unknown, options?: unknown) => Promise<unknown>;
/** Counts the characters an Encoder's tokenizers are handed (private members, wrapped). */
function counted(encoder: Encoder): { chars: number } {
  const count = { chars: 0 };
  const inner = encoder as unknown as Record<string, { encode: One; encodeBatch: Batch }>;
  for (const key of ["tokenizer", "prefixTokenizer"]) {
    const t = inner[key];
    if (!t) continue;
    const [one, batch] = [t.encode.bind(t), t.encodeBatch.bind(t)];
    t.encode = (text, pair, options) => ((count.chars += text.length), one(text, pair, options));
    t.encodeBatch = (texts, options) => ((count.chars += texts.reduce((s, x) => s + x.length, 0)), batch(texts, options));
  }
  return count;
}

describe("a long text without cut points costs at most about the whole text twice (byte-level BPE behind NFC)", () => {
  for (const name of NAMES) {
    test(name, async () => {
      // behind NFC, where marks join the letter before them: no class cut before a mark (prefix.ts classJoiner)
      const encoder = await Encoder.create({ ...JSON.parse(tokenizerText(name)!), normalizer: { type: "NFC" } }, {}, 512);
      const count = counted(encoder);
      for (const [seed, n] of [[3, 200_000]] as const) {
        const text = textOfPieces(THAI, seed, n);
        for (const direction of ["right", "left"] as const) {
          count.chars = 0;
          await encoder.encode(text, { direction });
          expect([name, n, direction, count.chars <= 2 * text.length]).toEqual([name, n, direction, true]);
        }
      }
    }, 120_000);
  }
});

// At the limit: words of letters and marks without spaces on byte-level BPE without a normaliser, where a letter
// before a mark is a class cut (prefix.ts classJoiner); timed in a fresh process against the library (at-limit.ts).
describe("1,000,000 characters of letters and marks without spaces (timed in a fresh process: at-limit.ts)", () => {
  test("models/clap", () => expectAtLimit("models/clap", ["Thai with marks", "Devanagari without spaces"].flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[])), 600_000);
  // behind NFC, before a mark with a normalisation boundary before it (Thai U+0E31, U+0E34, U+0E35, Devanagari vowel signs)
  for (const name of ["models/qwen3-embed", "models/clip"]) {
    test(name, () => expectAtLimit(name, ["Thai with marks", "Devanagari without spaces"].flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[])), 600_000);
  }
  // behind NFC, between a plain letter and the harakat after it (prefix.ts markCutAt), on both Qwen3 fixtures and CLIP
  for (const name of ["models/qwen3-embed", "models/qwen3-rerank", "models/clip", ...(existsSync(SHARED_TOKENIZERS) ? ["shared/clip-vit-base-patch32.tokenizer.json"] : [])]) {
    test(`${name}: Arabic with harakat`, () => expectAtLimit(name, [["arabic harakat", "right"], ["arabic harakat", "left"]]), 600_000);
  }
  // one word of Hangul syllables, whose tokens may cross syllables' bytes on CLIP: at positions no token can cover (prefix.ts forcedByteEnd)
  test.skipIf(!existsSync(SHARED_TOKENIZERS))("shared/clip-vit-base-patch32.tokenizer.json: Hangul syllables", () =>
    expectAtLimit("shared/clip-vit-base-patch32.tokenizer.json", [["hangul syllables", "right"], ["hangul syllables", "left"]]), 600_000);
  // Unigram behind NFKC: Thai, which the fixtures' vocabulary does not know, is one run of unknown characters
  // (normalFormUnknownTail); Devanagari with its virama is read by the replica in normalisation segments (unigramWord)
  for (const name of ["models/gemma-embed", "models/deberta-rerank"]) {
    test(name, () => expectAtLimit(name, ["Thai with marks", "Devanagari without spaces", "combining marks", "hangul jamo"].flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[])), 600_000);
  }
});

// Words and numbers separated by whitespace other than U+0020 (tab-separated data, one word a line, U+00A0 for spaces)
describe("1,000,000 characters of words between tabs, U+00A0 or line breaks (timed in a fresh process: at-limit.ts)", () => {
  // byte-level BPE: a class cut before the whitespace (classSpaceCutAt); Metaspace behind Precompiled or NFKC, and
  // WhitespaceSplit: a cut before whitespace the normaliser makes a space or the pre-tokenizer drops (separatorCutAt;
  // tokenized whole before: 2-6.5 s on XLM-R, bge-m3, Gemma, DeBERTa-v3, ColPali, t5 left)
  for (const name of ["models/colmodernvbert", "shared/roberta-base.tokenizer.json", "models/xlmr-max", "models/gemma-embed", "shared/t5-small.tokenizer.json"]) {
    test.skipIf(tokenizerText(name) === null)(name, () => expectAtLimit(name, ["words between tabs", "words between NBSP", "words between line breaks", "numbers between tabs"].flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[])), 600_000);
  }
});
