// WordPiece behind BERT's pipeline turns a word of more than max_input_chars_per_word characters into one [UNK], so a
// long run of word characters is shortened before it is cut or tokenized (src/tokenize/prefix.ts shortenWordRuns).
// Such a run goes on through the characters the normaliser drops (nonspacing marks under accent stripping, ZWJ,
// variation selectors, controls): Thai, Devanagari and emoji written without spaces. The shortened text must give
// exactly the whole text's ids and word ids.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../../src/tokenize/encode";
import { shortenWordRuns } from "../../src/tokenize/prefix";
import { SHARED_TOKENIZERS, bertVariant, describeLikeLibrary, textOfPieces, tokenizerText } from "../helpers";
import { expectAtLimit, type LimitCase } from "./at-limit";

const VARIANTS: Record<string, () => string> = {
  "BertNormalizer, accents stripped, cased": () => bertVariant({ type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: true, lowercase: false }),
  // a normalised added token of word characters and a dropped one: matched as "ab" inside runs, which may then not
  // be shortened (its zero-width space splits nothing)
  "normalised added token with a dropped character": () => bertVariant(undefined, [{ content: "ab\u200b", normalized: true }]),
  // a raw added token holding a zero-width space: the space is then not dropped, and ends runs
  "raw added token with a zero-width space": () => bertVariant(undefined, [{ content: "x\u200by", normalized: false }]),
};

const SHARED = existsSync(SHARED_TOKENIZERS) ? ["shared/bert-base-uncased.tokenizer.json"] : [];
const FIXTURE_NAMES = ["models/bert-mean-norm", "models/bert-classify", "models/colbert-pylate", "models/colbert-stanford"];
const jsonOf = (name: string) => VARIANTS[name]?.() ?? tokenizerText(name)!;
const NAMES = [...SHARED, ...FIXTURE_NAMES, ...Object.keys(VARIANTS)];

/** Word characters of several scripts, characters BERT drops (or keeps, cased), and what ends a word. */
const PIECES = [
  ..."กขคงจฉชซดตถทนบปผพฟมยรลวสหอ",
  ..."\u0e31\u0e34\u0e35\u0e48\u0e49\u0e38\u0e33",
  ..."कखगमरन\u093e\u093f\u0940\u094d\u0902",
  "👨\u200d👩\u200d👧",
  "👍🏽",
  "🏳\ufe0f\u200d🌈",
  "❤\ufe0f",
  "\u200b",
  "\ufeff",
  "\u0001",
  "\u034f",
  "\u0301\u0301\u0301",
  "\u{1d165}",
  "a",
  "b",
  "ab",
  "É",
  "x\u200by",
];
/** Pieces that end words: a run is at most a few hundred characters between them. */
const BREAKS = [" ", "\n", "!", "日", "[MASK]"];

function text(seed: number, chars: number): string {
  let out = "";
  for (let k = 0; out.length < chars; k++) {
    out += textOfPieces(PIECES, seed * 7919 + k, 150 + ((seed * 31 + k * 17) % 600));
    out += BREAKS[(seed + k) % BREAKS.length];
  }
  return out;
}

/**
 * Words in which dropped characters outnumber word characters: a letter and one to four marks, ZWJ or selectors;
 * every other word of Latin letters whose pieces the vocabularies hold (such a word is one [UNK] only for its length).
 */
function dense(seed: number, chars: number): string {
  const parts = ["ก\u0e48", "ข\u0e31\u0e49", "ค\u200d\u0e34\u0e48\ufe0f", "a\u0301\u0301\u0301\u0301", "म\u094d\u0902"];
  const latin = ["a\u0301\u0301", "b\u200d\u0301\u0301", "e\u0323\u0301\u200b\u0301", "ab\ufe0f\ufe0f\ufe0f\ufe0f"];
  let out = "";
  for (let k = 0; out.length < chars; k++) out += textOfPieces(k % 2 ? latin : parts, seed * 104729 + k, 300 + ((seed * 13 + k * 29) % 1200)) + BREAKS[(seed + k) % BREAKS.length];
  return out;
}

type Members = { isWordChar: (cp: number) => boolean; inWordRun: (cp: number) => boolean; anyScriptWords: boolean; cuts: { wordPieceMaxChars: number } };
/** The Encoder's own word-run rules (private members, read as the Encoder uses them). */
const membersOf = (encoder: Encoder) => encoder as unknown as Members;

describe("shortenWordRuns", () => {
  const word = (cp: number) => /\p{L}/u.test(String.fromCodePoint(cp));
  const dropped = (cp: number) => /[\p{Mn}\p{Cf}]/u.test(String.fromCodePoint(cp));

  test("a run goes on through dropped characters, which do not count; both ends keep max + 1 word characters", () => {
    const run = ("a\u0301\u0301").repeat(20);
    expect(shortenWordRuns(`x ${run} y`, 3, word, dropped)).toBe(`x ${"a\u0301\u0301".repeat(3)}a${"a\u0301\u0301".repeat(4)} y`);
    // without them a run ends at each dropped character
    expect(shortenWordRuns(`x ${run} y`, 3, word)).toBe(`x ${run} y`);
  });

  test("dropped characters at a run's ends stay, and a run of them alone is no run", () => {
    expect(shortenWordRuns(`\u200b${"b".repeat(30)}\u200b!`, 3, word, dropped)).toBe(`\u200bbbbbbbbb\u200b!`);
    const marks = "\u0301".repeat(50);
    expect(shortenWordRuns(marks, 3, word, dropped)).toBe(marks);
  });
});

describe("runs through dropped characters shortened: the whole text's ids and word ids", () => {
  for (const name of NAMES) {
    test(name, async () => {
      const json = jsonOf(name);
      const encoder = membersOf(await Encoder.create(JSON.parse(json), {}, 512));
      const rust = Tokenizer.fromString(json);
      rust.disablePadding();
      rust.disableTruncation();
      const refused = name.startsWith("normalised added token");
      expect([name, encoder.anyScriptWords]).toEqual([name, !refused]);
      if (refused) return;
      let through = 0;
      for (let seed = 0; seed < 16; seed++) {
        const whole = seed % 2 === 0 ? text(seed, 6_000) : dense(seed, 6_000);
        const short = shortenWordRuns(whole, encoder.cuts.wordPieceMaxChars, encoder.isWordChar, encoder.inWordRun);
        // the runs shortened here only because they go on through dropped characters (no vacuous pass)
        if (short.length < shortenWordRuns(whole, encoder.cuts.wordPieceMaxChars, encoder.isWordChar).length) through++;
        const [a, b] = await Promise.all([rust.encode(whole, null, { addSpecialTokens: false }), rust.encode(short, null, { addSpecialTokens: false })]);
        expect([name, seed, b.getIds(), b.getWordIds()]).toEqual([name, seed, a.getIds(), a.getWordIds()]);
      }
      // (with the raw token, zero-width spaces end runs: few of them are long enough)
      if (!name.startsWith("raw added")) expect([name, through > 8]).toEqual([name, true]);
    }, 120_000);
  }

  test("the variant's normalised token splits runs (why it is refused)", async () => {
    const json = VARIANTS["normalised added token with a dropped character"]!();
    const encoder = membersOf(await Encoder.create(JSON.parse(tokenizerText("models/bert-mean-norm")!), {}, 512));
    const rust = Tokenizer.fromString(json);
    const whole = "ab".repeat(300);
    const short = shortenWordRuns(whole, encoder.cuts.wordPieceMaxChars, encoder.isWordChar, encoder.inWordRun);
    const [a, b] = await Promise.all([rust.encode(whole, null, { addSpecialTokens: false }), rust.encode(short, null, { addSpecialTokens: false })]);
    expect(b.getIds()).not.toEqual(a.getIds());
  });

  test("which characters a run goes on through: dropped ones only", async () => {
    const uncased = membersOf(await Encoder.create(JSON.parse(tokenizerText("models/bert-mean-norm")!), {}, 512));
    expect([0x200b, 0x200d, 0xfe0f, 0x0e48, 0x094d, 0x0301, 0x0e01, 0x093e, 0x20, 0x21].map(uncased.inWordRun)).toEqual([true, true, true, true, true, true, false, false, false, false]);
    // cased (no accent stripping): marks are word characters, controls and formats still dropped
    const cased = membersOf(await Encoder.create(JSON.parse(tokenizerText("models/bert-classify")!), {}, 512));
    expect([0x200b, 0x200d, 0xfe0f, 0x0e48, 0x0301].map(cased.inWordRun)).toEqual([true, true, false, false, false]);
    expect([0xfe0f, 0x0e48, 0x0301].map(cased.isWordChar)).toEqual([true, true, true]);
    const raw = membersOf(await Encoder.create(JSON.parse(VARIANTS["raw added token with a zero-width space"]!()), {}, 512));
    expect([raw.inWordRun(0x200b), raw.inWordRun(0x200d)]).toEqual([false, true]);
  });
});

const LONG = 24_000;
describeLikeLibrary("long words of letters and dropped characters", NAMES.filter((n) => !n.includes(" ")), (seed) => ({
  "Thai with marks": textOfPieces(PIECES.slice(0, 34), seed, LONG),
  "Devanagari without spaces": textOfPieces([..."कखगमरन\u093e\u093f\u0940\u094d\u0902"], seed, LONG),
  "emoji ZWJ sequences": textOfPieces(["👨\u200d👩\u200d👧", "👍🏽", "🏳\ufe0f\u200d🌈", "❤\ufe0f"], seed, LONG),
  "words and long runs": text(seed, LONG),
  "words and long runs, another": text(seed + 101, LONG),
  "Thai words between spaces": textOfPieces([...PIECES.slice(0, 34), " "], seed, LONG),
  "words dense with dropped characters": dense(seed, LONG),
}));

// At the limit: 1,000,000 characters, timed in a fresh process against the library (at-limit.ts).
const KINDS = ["Thai with marks", "Devanagari without spaces", "emoji ZWJ sequences"];
const LIMIT_NAMES = [...SHARED, "models/bert-classify", "models/colbert-pylate"];
describe("1,000,000 characters of words through dropped characters (timed in a fresh process: at-limit.ts)", () => {
  for (const name of LIMIT_NAMES) {
    test(name, () => expectAtLimit(name, KINDS.flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[])), 600_000);
  }
});
