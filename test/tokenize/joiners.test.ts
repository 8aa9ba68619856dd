// Which characters may be in a window inside a long word, per pipeline (src/tokenize/prefix.ts joinerOf): Unigram
// behind Metaspace / WhitespaceSplit with no normaliser (bge-m3's, xlmr-max's fixtures) or Unicode normal forms
// (Gemma's, DeBERTa's: NFKC and ` {2,}`) lets zero-width spaces, BOMs, controls, regional indicators, line breaks
// and tabs (Metaspace alone splits only at U+0020) into windows, and without a normaliser marks and jamo too.
// Checked at the level of the cuts, against the library on the whole text: every window's common first tokens (ids
// and offsets), every unknown-character cut and shortened tail, and the replica's path of whole words.
import { describe, expect, test } from "bun:test";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../../src/tokenize/encode";
import { compositionSecond, cutPolicy, normalFormUnknownTail, unknownCut, unknownTail, wordPrefixWindow, type CharKind, type InWordPolicy, type PieceCount, type TailChar } from "../../src/tokenize/prefix";
import { expectLibraryIds, textOfPieces, tokenizerText } from "../helpers";
import { expectAtLimit, type LimitCase } from "./at-limit";

const CONTENT = { addSpecialTokens: false } as const;

/** Pieces of long words: the adversarial characters, letters, marks after letters, jamo, added tokens, rarely a space. */
const PIECES = [
  "\u200b", "\u200b\u200b", "\ufeff", "\u0001", "\u0007", "\u00ad", "\u2060", "\n", "\n\n", "\t", "\r\n", "\r",
  "🇺🇸", "🇺", "\u{1F3FB}", "👍\u{1F3FB}", "\u1100\u1161", "\u1100", "\u1161", "\u11a8", "가", "a\u0301", "\u0301", "\u0308\u0301",
  "a", "b", "x", "ab", "é", "ж", "日", "1", "!", "\u2581", "\u0600", "\u200d", "\u00a0", "\u3000", "</s>", " ",
];

/** The Encoder's private helpers that the cuts take (the same caches the Encoder uses). */
interface Internals {
  cuts: { inWord: InWordPolicy };
  normalizeChar: (ch: string) => string;
  pieces: PieceCount;
  charKind: (cp: number) => CharKind;
  unigramWord: (text: string, from: number, policy: InWordPolicy) => { start: number; end: number; path: { ids: Int32Array } } | null;
}

/** How many first tokens all encodings share (ids and offsets). */
function common(encodings: Array<{ getIds(): number[]; getOffsets(): number[][] }>): number {
  const ids = encodings.map((e) => e.getIds());
  const offsets = encodings.map((e) => e.getOffsets());
  let n = 0;
  while (ids[0]![n] !== undefined && ids.every((x, j) => x[n] === ids[0]![n] && offsets[j]![n]![0] === offsets[0]![n]![0] && offsets[j]![n]![1] === offsets[0]![n]![1])) n++;
  return n;
}

/**
 * Every window (at every start), unknown cut and unknown tail in `texts`, and the replica on each text's words, against
 * the library's encoding of the whole text. Returns how many of each were checked.
 */
async function checkWindows(name: string, texts: string[]): Promise<{ windows: number; tokens: number; cuts: number; tails: number; words: number }> {
  return checkWindowsOf(name, tokenizerText(name)!, texts);
}

async function checkWindowsOf(name: string, json: string, texts: string[]): Promise<{ windows: number; tokens: number; cuts: number; tails: number; words: number }> {
  const rust = Tokenizer.fromString(json);
  // xlm-roberta's tokenizer.json truncates to 512 tokens: the whole text's tokens, all of them
  rust.disableTruncation();
  rust.disablePadding();
  const encoder = (await Encoder.create(JSON.parse(json), {}, 64)) as unknown as Internals;
  const policy = encoder.cuts.inWord;
  const n = { windows: 0, tokens: 0, cuts: 0, tails: 0, words: 0 };
  for (const text of texts) {
    const whole = await rust.encode(text, null, CONTENT);
    const ids = whole.getIds();
    const offsets = whole.getOffsets();
    const seen = new Set<string>();
    for (let from = 1; from < text.length; from++) {
      const win = wordPrefixWindow(text, from, policy, encoder.normalizeChar, 64, encoder.pieces);
      if (win && !seen.has(win.ends.join())) {
        seen.add(win.ends.join());
        const prefixes = await rust.encodeBatch(win.ends.map((e) => text.slice(0, e)), CONTENT);
        let k = common(prefixes);
        // a fused unknown token at the end may go on in the whole text (encode.ts wordPrefix drops it)
        while (k > 0 && policy.unknownId !== null && prefixes[0]!.getIds()[k - 1] === policy.unknownId) k--;
        const got = { ids: prefixes[0]!.getIds().slice(0, k), offsets: prefixes[0]!.getOffsets().slice(0, k) };
        const label = [name, "window", JSON.stringify(text.slice(win.ends[0]! - 8, win.ends.at(-1)! + 8))];
        expect([...label, got]).toEqual([...label, { ids: ids.slice(0, k), offsets: offsets.slice(0, k) }]);
        n.windows++;
        n.tokens += k;
      }
      const cut = unknownCut(text, from, text.length, policy, encoder.charKind);
      if (cut > 0 && !seen.has(`cut ${cut}`)) {
        seen.add(`cut ${cut}`);
        const e = await rust.encode(text.slice(0, cut), null, CONTENT);
        const got = e.getIds();
        if (got.at(-1) === policy.unknownId) got.pop();
        expect([name, "unknown cut", JSON.stringify(text.slice(cut - 8, cut + 8)), got]).toEqual([name, "unknown cut", JSON.stringify(text.slice(cut - 8, cut + 8)), ids.slice(0, got.length)]);
        n.cuts++;
      }
    }
    const tail = unknownTail(text, policy, encoder.charKind);
    if (tail !== text) {
      expect([name, "unknown tail", JSON.stringify(text.slice(-16)), (await rust.encode(tail, null, CONTENT)).getIds()]).toEqual([name, "unknown tail", JSON.stringify(text.slice(-16)), ids]);
      n.tails++;
    }
    // the replica on the last word (from the last space), where it applies, against the library's tokens of it
    if (policy.unigram) {
      const word = encoder.unigramWord(text, text.length - 1, policy);
      // (the word up to the text's end: a space after it is a piece of its own)
      if (word && word.end === text.length) {
        const mine = Array.from(word.path.ids);
        expect([name, "replica", JSON.stringify(text.slice(word.start)), mine]).toEqual([name, "replica", JSON.stringify(text.slice(word.start)), ids.slice(ids.length - mine.length)]);
        n.words++;
      }
    }
  }
  return n;
}

const texts = (seed: number, count: number, pieces: readonly string[] = PIECES) =>
  Array.from({ length: count }, (_, i) => textOfPieces(pieces, seed * 1000 + i, 150 + ((i * 37) % 250)));

/** Pieces without spaces: one long word, so that windows and the replica are taken often. */
const WORD_PIECES = PIECES.filter((p) => p !== " ");

describe("windows of pipelines whose normaliser joins fewer characters than grapheme clusters (ids and offsets, every window)", () => {
  for (const name of ["models/bge-m3-baai", "models/gemma-embed", "models/deberta-rerank", "models/colpali"]) {
    test(name, async () => {
      const n = await checkWindows(name, [...texts(1, 24), ...texts(2, 24, WORD_PIECES)]);
      expect(n.windows).toBeGreaterThan(15);
      expect(n.tokens).toBeGreaterThan(1000);
      expect(n.cuts).toBeGreaterThan(1000);
      expect(n.tails).toBeGreaterThan(10);
      expect(n.words).toBeGreaterThan(1);
    }, 120_000);
  }
});

// NFKC: marks with a normalisation boundary before them (Thai U+0E31, U+0E34-0E37, Devanagari vowel signs, U+0489,
// U+FE0F) are window characters, next to marks without one (tone marks, virama, U+0301), vowel signs that compose with
// the letter before them (U+0B47 U+0B3E, U+1025 U+102E) and U+0E33 (NFKC: U+0E4D U+0E32)
const MARK_PIECES = [
  "क", "म", "र", "न", "\u093e", "\u093f", "\u0940", "\u0902", "\u094d", "\u093c", "ก", "ข", "\u0e31", "\u0e34", "\u0e35", "\u0e37",
  "\u0e48", "\u0e38", "\u0e33", "a", "b", "e\u0301", "\u0301", "\u0489", "\ufe0f", "❤\ufe0f", "\u0b47\u0b3e", "\u0b47", "\u0b3e",
  "\u1025\u102e", "\u1025", "\u102e", "\u1b05\u1b35", "x", "1", " ",
  // runs of window characters, so that windows lie next to all of the above
  "कम\u093eर\u093fन\u0940क\u0902", "ก\u0e31ข\u0e34ก\u0e35ข\u0e37", "a\u0489b\ufe0fx\u0489", "\u0e31\u0e34\u093e\u0902\u0489\ufe0f",
];
describe("windows next to marks behind NFKC and Metaspace (ids and offsets, every window)", () => {
  for (const name of ["models/gemma-embed", "models/deberta-rerank"]) {
    test(name, async () => {
      // (and words of window characters alone, for the replica: unigram.ts)
      const only = ["क", "म", "\u093e", "\u093f", "\u0940", "\u0902", "ก", "\u0e31", "\u0e34", "\u0e35", "a", "\u0489", "\ufe0f", " "];
      const n = await checkWindows(name, [...texts(7, 24, MARK_PIECES), ...texts(8, 24, MARK_PIECES.filter((p) => p !== " ")), ...texts(9, 12, only)]);
      expect(n.windows).toBeGreaterThan(30);
      expect(n.words).toBeGreaterThan(3);
    }, 120_000);
  }
});

// Precompiled (t5, XLM-R) transforms a cluster under 6 bytes whole: regional indicators (4 bytes, transformed alone in
// any cluster) are window characters, a pair cut in two; marks, Prepend characters, modifiers stay out
const FLAG_PIECES = [
  "🇺🇸", "🇺", "🇸", "🇫🇷", "🇺🇸🇺🇸", "a", "b", "x", "ab", "é", "ж", "日", "1", "!", "\u0301", "a\u0301", "🇺\u0301", "\u0600", "\u0600🇺",
  "\u200b", "\u200d", "🇺\u200d", " ", "</s>", "\u1100\u1161", "👍\u{1F3FB}", "\u{1F3FB}", "\u00ad",
  "\u1100", "\u1161", "\u11a8", "가", "각", "\u0600\u1100", "\u1100\u0301", "\u0d4e\u1161", "\u3131", "\u1100\u1161\u11a8", "\uac00\u11a8",
];
const SHARED_FLAGS = ["shared/t5-small.tokenizer.json", "shared/xlm-roberta-unigram.tokenizer.json.gz"];
describe("windows with regional indicators and Hangul jamo under Precompiled (ids and offsets, every window)", () => {
  for (const name of SHARED_FLAGS) {
    test.skipIf(tokenizerText(name) === null)(name, async () => {
      // mostly window characters (t5's added tokens are up to 13 characters long: a window needs 2 x 13 + 17 in a row)
      const flagWords = ["🇺🇸", "🇺", "🇸", "🇫🇷", "🇺🇸🇺🇸", "a", "b", "x", "ж", "日", "1", "!", "ab", "🇺🇸🇺🇸🇺🇸", "\u0301", "\u0600🇺", "🇺\u200d", " "];
      const jamoWords = ["\u1100\u1161", "\u1100", "\u1161", "\u11a8", "가", "각", "a", "ж", "🇺", "\u0600\u1100", "\u1100\u0301", "\u0d4e\u1161", "\u3131", "\u1100\u1161".repeat(6)];
      const n = await checkWindows(name, [...texts(3, 24, FLAG_PIECES), ...texts(4, 24, flagWords), ...texts(5, 24, jamoWords)]);
      expect(n.windows).toBeGreaterThan(15);
      expect(n.words).toBeGreaterThan(3);
    }, 120_000);
  }
});

const inWord = (name: string) => cutPolicy(JSON.parse(tokenizerText(name)!))!.inWord!;

describe("the joiners of each pipeline", () => {

  test("no normaliser behind WhitespaceSplit: only whitespace to the library is kept out", () => {
    const { joiner } = inWord("models/bge-m3-baai");
    for (const ch of ["\u200b", "\ufeff", "\u0001", "\u0301", "\u1100", "\u{1F1FA}", "\u0600", "\u200d"]) expect([ch, joiner.test(ch)]).toEqual([ch, false]);
    for (const ch of [" ", "\n", "\t", "\r", "\u0085", "\u00a0", "\u3000", "\u2028"]) expect([ch, joiner.test(ch)]).toEqual([ch, true]);
  });

  test("NFKC behind Metaspace alone: marks, jamo and U+0020 are kept out, line breaks and format characters are not", () => {
    const { joiner } = inWord("models/gemma-embed");
    for (const ch of ["\u200b", "\ufeff", "\u0001", "\n", "\t", "\r", "\u2028", "\u{1F1FA}", "\u{1F3FB}", "\u0600"]) expect([ch, joiner.test(ch)]).toEqual([ch, false]);
    for (const ch of [" ", "\u0301", "\u1100", "\u1161", "\u11a8", "\uff9e", "\u0b3e", "\u{16d67}"]) expect([ch, joiner.test(ch)]).toEqual([ch, true]);
  });

  test.skipIf(tokenizerText("shared/t5-small.tokenizer.json") === null)("Precompiled (per grapheme cluster) keeps the blanket set but for regional indicators and Hangul jamo", () => {
    const t5 = inWord("shared/t5-small.tokenizer.json");
    for (const ch of ["\u200b", "\u0001", "\n", "\u0301", "\u0600", "\u{1F3FB}", "\u200d"]) expect([ch, t5.joiner.test(ch)]).toEqual([ch, true]);
    for (const ch of ["\u{1F1FA}", "\u1100", "\u1161", "\u11a8"]) expect([ch, t5.joiner.test(ch)]).toEqual([ch, false]);
  });

  test("every character that the runtime's normal forms compose backwards or reorder is a normal-form joiner", () => {
    const { joiner } = inWord("models/gemma-embed");
    const missing: string[] = [];
    for (let cp = 0; cp < 0x110000; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const ch = String.fromCodePoint(cp);
      const d = ch.normalize("NFD");
      const parts = [...d];
      // the second and later characters of a canonical composition compose with the one before them
      if (parts.length >= 2 && ch.normalize("NFC") === ch) for (const x of parts.slice(1)) if (!joiner.test(x)) missing.push(x);
      // a character whose normal form begins with a non-starter (reordered with U+0334, class 1, or U+0345, 240)
      for (const form of ["NFC", "NFKC"] as const) {
        const first = [...ch.normalize(form).normalize("NFD")][0];
        if (first === undefined) continue;
        const starter = (first + "\u0334").normalize("NFD") === first + "\u0334" && ("\u0345" + first).normalize("NFD") === "\u0345" + first;
        if (!starter && !joiner.test(ch) && !joiner.test([...ch.normalize(form)][0]!)) missing.push(ch);
      }
    }
    expect([...new Set(missing)].map((c) => c.codePointAt(0)!.toString(16))).toEqual([]);
  }, 60_000);
});

/**
 * Every second character of a canonical composition, in the runtime's tables: the characters after the first of the
 * canonical decomposition of every code point that NFC keeps composed (a scan of all code points).
 */
function compositionSeconds(): Set<string> {
  const seconds = new Set<string>();
  for (let cp = 0; cp < 0x110000; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const ch = String.fromCodePoint(cp);
    const parts = [...ch.normalize("NFD")];
    if (parts.length >= 2 && ch.normalize("NFC") === ch) for (const x of parts.slice(1)) seconds.add(x);
  }
  return seconds;
}

describe("marks with a normalisation boundary before them (NORMAL_FORM_BOUNDARY_MARKS), against the runtime's normal forms on every code point", () => {
  // every starter (canonical combining class 0: not reordered with U+0334, class 1, nor U+0345, class 240) that is the
  // second character of a canonical composition, found by decomposing every code point
  const starter = (ch: string) => (ch + "\u0334").normalize("NFD") === ch + "\u0334" && ("\u0345" + ch).normalize("NFD") === "\u0345" + ch;
  const seconds = compositionSeconds();
  // a boundary before ch in the composed form's normal forms (NFC: its canonical decomposition, NFKC: its compatibility
  // one) begins with a starter that is no composition's second
  const boundaryIn = (ch: string, decomposed: "NFD" | "NFKD") => { const first = [...ch.normalize(decomposed)][0]!; return starter(first) && !seconds.has(first); };
  const boundary = (ch: string) => boundaryIn(ch, "NFD") && boundaryIn(ch, "NFKD");
  const MARKS = /[\p{M}\p{Grapheme_Extend}\u0E33\u0EB3]/u;
  const JAMO_OR_NONE = /[\p{Cn}\p{Cs}\u1100-\u11FF\uA960-\uA97F\uD7B0-\uD7FF\u{16D40}-\u{16D7F}]/u;

  for (const [name, form] of [["models/gemma-embed", "NFKC"], ["models/qwen3-embed", "NFC"], ["models/clip", "NFC"]] as const) {
    test(`${name} (${form}): a character that may be in a window or next to a class cut, alone and normalised, has a boundary before it; every mark that has one may`, () => {
      const { joiner } = inWord(name);
      const wrong: string[] = [];
      const missed: string[] = [];
      for (let cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xd800 && cp <= 0xdfff) continue;
        const ch = String.fromCodePoint(cp);
        const n = ch.normalize(form);
        // windowChar and classCutAt take a character only where it and its normal form (one character) are no joiners
        const d = form === "NFC" ? "NFD" : "NFKD";
        if (!joiner.test(ch) && [...n].length === 1 && !joiner.test(n) && !(boundaryIn(ch, d) && boundaryIn(n, d))) wrong.push(ch);
        if (MARKS.test(ch) && !JAMO_OR_NONE.test(ch) && boundary(ch) && joiner.test(ch)) missed.push(ch);
      }
      const hex = (xs: string[]) => xs.map((c) => c.codePointAt(0)!.toString(16));
      expect(hex(wrong)).toEqual([]);
      // the list is the scan's result (regenerate it when the runtime's Unicode tables grow)
      expect(hex(missed)).toEqual([]);
      // the scripts of the realistic inputs: Thai and Devanagari vowel signs in, tone marks, below vowels, virama out
      for (const ch of ["\u0e31", "\u0e34", "\u0e35", "\u0e36", "\u0e37", "\u093e", "\u093f", "\u0940", "\u0902", "\u0489", "\ufe0f"]) expect([ch, joiner.test(ch)]).toEqual([ch, false]);
      for (const ch of ["\u0e38", "\u0e39", "\u0e48", "\u0e49", "\u0e4a", "\u0e4b", "\u094d", "\u093c", "\u0301", "\u0b3e", "\u102e", "\u1b35", "\u1161"]) expect([ch, joiner.test(ch)]).toEqual([ch, true]);
    }, 120_000);
  }
});

/** Long words of the new window characters (40,000 characters), cut on both sides, against the library truncating. */
const LONG: Record<string, string> = {
  "zero-width": "\u200b".repeat(40_000),
  BOMs: "\ufeff".repeat(40_000),
  controls: "\u0001".repeat(40_000),
  flags: "🇺🇸".repeat(10_000),
  newlines: "\n".repeat(40_000),
  tabs: "\t".repeat(40_001),
  "words, then newlines": "hello world ".repeat(40) + "\n".repeat(40_000),
  "letters and zero-width": textOfPieces(["a", "b", "\u200b", "x\u200b"], 5, 40_000),
  "letters and line breaks": textOfPieces(["a", "b", "\n", "\r\n", "\t"], 6, 40_000),
  "combining marks": "a" + "\u0301".repeat(39_999),
  jamo: "\u1100\u1161".repeat(20_000),
};

describe("long words of these characters through the Encoder, identical to the library truncating the whole text", () => {
  for (const name of ["models/bge-m3-baai", "models/gemma-embed"]) {
    test(name, async () => {
      const encoder = await expectLibraryIds(name, tokenizerText(name)!, 61, LONG);
      expect(encoder.wordPathChecks.differ).toBe(0);
    }, 120_000);
  }
});

/**
 * A small Unigram tokenizer.json behind NFKC and Metaspace alone whose pieces hold line breaks, tabs, zero-width
 * spaces and flags (a run of one of them is a word whose best path shifts with its length: the replica, unigram.ts).
 */
function knownRunsJson(): string {
  const vocab: Array<[string, number]> = [
    ["<unk>", 0], ["\u2581", -1], ["a", -1.5], ["b", -2], ["\n", -1], ["\n\n", -2], ["\n\n\n", -3.5], ["\t", -1.2], ["\t\t", -2.4],
    ["\u200b", -1], ["\u200b\u200b", -2], ["🇺", -1], ["🇸", -1], ["🇺🇸", -1.5], ["\u2581\n", -1.8], ["a\n", -2.2],
  ];
  return JSON.stringify({
    version: "1.0", truncation: null, padding: null,
    added_tokens: [{ id: 0, content: "<unk>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: { type: "Sequence", normalizers: [{ type: "NFKC" }, { type: "Replace", pattern: { Regex: " {2,}" }, content: " " }] },
    pre_tokenizer: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true },
    post_processor: null, decoder: null,
    model: { type: "Unigram", unk_id: 0, vocab, byte_fallback: false },
  });
}

describe("runs of characters that are pieces (line breaks, tabs, zero-width spaces, flags) behind NFKC and Metaspace alone", () => {
  test("the replica on such words, identical to the library truncating the whole text", async () => {
    const inputs: Record<string, string> = {};
    for (let d = 0; d < 3; d++) inputs[`newlines x ${30_000 + d}`] = "\n".repeat(30_000 + d);
    inputs["tabs"] = "\t".repeat(30_001);
    inputs["zero-width"] = "\u200b".repeat(30_002);
    inputs["flags"] = "🇺🇸".repeat(10_000) + "🇺";
    inputs["words, then newlines"] = "a b ".repeat(50) + "\n".repeat(30_000);
    inputs["newlines, then words"] = "\n".repeat(30_000) + " a b".repeat(50);
    inputs["letters and newlines"] = textOfPieces(["a", "b", "\n", "\n\n", "\t"], 9, 30_000);
    const encoder = await expectLibraryIds("known runs", knownRunsJson(), 61, inputs);
    expect(encoder.wordPathChecks.differ).toBe(0);
    expect(encoder.wordPathChecks.same).toBeGreaterThan(8);
  }, 120_000);

  test("cut-level: every window, unknown cut and replica path against the whole text", async () => {
    const json = knownRunsJson();
    const pieces = ["a", "b", "\n", "\n\n", "\t", "\u200b", "🇺🇸", "🇺", "c", "\u0301", " "];
    const n = await checkWindowsOf("known runs", json, Array.from({ length: 24 }, (_, i) => textOfPieces(pieces, 500 + i, 150 + ((i * 37) % 250))));
    expect(n.windows).toBeGreaterThan(30);
    expect(n.words).toBeGreaterThan(3);
  }, 120_000);
});

// 1,000,000 characters: the kinds whole before (common.md's sweep), now cut
const ADVERSARIAL = ["zero-width spaces", "byte-order marks", "controls", "emoji flags"];
describe("1,000,000 characters of zero-width spaces, BOMs, controls, flags, line breaks (timed in a fresh process: at-limit.ts)", () => {
  const both = (kinds: string[]) => kinds.flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[]);
  test("bge-m3 (no normaliser): also marks and jamo", () => expectAtLimit("models/bge-m3-baai", both([...ADVERSARIAL, "combining marks", "hangul jamo"])), 600_000);
  for (const name of SHARED_FLAGS) test.skipIf(tokenizerText(name) === null)(`${name}: flags, jamo`, () => expectAtLimit(name, both(["emoji flags", "hangul jamo"])), 600_000);
  test("gemma-embed (NFKC, Metaspace alone): also runs of line breaks and tabs", () => expectAtLimit("models/gemma-embed", both([...ADVERSARIAL, "newlines", "tabs", "words, then newlines"])), 600_000);
});

/**
 * A small Unigram tokenizer.json behind NFKC and Metaspace whose pieces hold characters that others compose into
 * (가 from U+1100 U+1161, é from e U+0301, U+0B4B from U+0B47 U+0B3E) but not those others (U+0301, jamo, U+0B47,
 * U+0B3E are unknown): a tail run must not end where a composition would make a known character.
 */
function composingJson(form: "NFC" | "NFKC"): string {
  const vocab: Array<[string, number]> = [["<unk>", 0], ["\u2581", -1], ["a", -1.5], ["e", -1.5], ["é", -2], ["가", -2], ["\u0b4b", -2], ["\u0e32", -2], ["ab", -2.5]];
  return JSON.stringify({
    version: "1.0", truncation: null, padding: null,
    added_tokens: [{ id: 0, content: "<unk>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: { type: "Sequence", normalizers: [{ type: form }, { type: "Replace", pattern: { Regex: " {2,}" }, content: " " }] },
    pre_tokenizer: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true },
    post_processor: null, decoder: null,
    model: { type: "Unigram", unk_id: 0, vocab, byte_fallback: false },
  });
}

// Texts that end in runs of unknown characters behind NFC / NFKC: letters and marks that reorder (Thai tone marks and
// below vowels), U+0E33 (NFKC: U+0E4D U+0E32, the second a piece here), characters that compose into a known one,
// whitespace that NFKC makes of U+00A0, known letters
const TAIL_PIECES = [
  "ก", "ข", "\u0e31", "\u0e34", "\u0e48", "\u0e38", "\u0e49", "\u0e33", "क", "\u094d", "\u093e", "\u0902", "\u0301", "\u0316", "e", "a", "b",
  "\u1100", "\u1161", "\u11a8", "가", "\u0b47", "\u0b3e", "\u1025", "\u102e", "\u200b", "🇺", "\u00a0", "\u2000", " ", "\u0e48\u0e38", "\u0301\u0316",
  "\u1100\u1161", "ก\u1100\u1161", "\u0b47\u0b3e", "e\u0316\u0301", "\u200b\u0301", "ก\u0301", "\u0e48\u0301", "\u1025\u102e", "ก\u1161",
  // runs of one mark after a letter (repeatedMarkTail): composing with it, not composing, after a precomposed letter
  "e" + "\u0301".repeat(9), "a" + "\u0301".repeat(7), "ก" + "\u0e48".repeat(8), "x" + "\u0316".repeat(6), "é" + "\u0301".repeat(6), "\u0b47" + "\u0b3e".repeat(5),
];

describe("runs of unknown characters behind NFC / NFKC ending a text are shortened to one character after a boundary (normalFormUnknownTail)", () => {
  const cases: Array<[string, string]> = [
    ["models/gemma-embed", tokenizerText("models/gemma-embed")!],
    ["models/deberta-rerank", tokenizerText("models/deberta-rerank")!],
    ["composing, NFKC", composingJson("NFKC")],
    ["composing, NFC", composingJson("NFC")],
  ];
  for (const [name, json] of cases) {
    test(`${name}: every shortened prefix has the whole prefix's ids`, async () => {
      const rust = Tokenizer.fromString(json);
      rust.disableTruncation();
      rust.disablePadding();
      const encoder = (await Encoder.create(JSON.parse(json), {}, 64)) as unknown as { cuts: { inWord: InWordPolicy }; tailChar: (cp: number) => TailChar; repeatedMark: (first: number, mark: number, policy: InWordPolicy) => boolean };
      const policy = encoder.cuts.inWord;
      expect(policy.composes).toBe(name.endsWith(", NFC") ? "NFC" : "NFKC");
      let shortened = 0;
      let kept = 0;
      let repeats = 0;
      for (let i = 0; i < 30; i++) {
        const text = textOfPieces(TAIL_PIECES, 9000 + i, 60 + ((i * 17) % 80));
        const wholes: string[] = [];
        const shorts: string[] = [];
        for (let k = 1; k <= text.length; k++) {
          const prefix = text.slice(0, k);
          if (prefix.charCodeAt(k - 1) >= 0xd800 && prefix.charCodeAt(k - 1) <= 0xdbff) continue;
          const t = normalFormUnknownTail(prefix, policy, encoder.tailChar, (f, m) => encoder.repeatedMark(f, m, policy));
          if (t !== prefix && /(.)\1\1$/u.test(t)) repeats++;
          if (t === prefix) kept++;
          else {
            wholes.push(prefix);
            shorts.push(t);
          }
        }
        const [a, b] = await Promise.all([rust.encodeBatch(wholes, CONTENT), rust.encodeBatch(shorts, CONTENT)]);
        for (let j = 0; j < wholes.length; j++) {
          const label = [name, JSON.stringify(wholes[j]!.slice(-12)), JSON.stringify(shorts[j]!.slice(-4))];
          expect([...label, b[j]!.getIds()]).toEqual([...label, a[j]!.getIds()]);
          shortened++;
        }
      }
      expect(shortened).toBeGreaterThan(300);
      expect(kept).toBeGreaterThan(300);
      // (texts cut to their last three marks)
      expect(repeats).toBeGreaterThan(20);
    }, 120_000);
  }

  test("which characters may be in such a run", async () => {
    const encoder = (await Encoder.create(JSON.parse(composingJson("NFKC")), {}, 64)) as unknown as { tailChar: (cp: number) => TailChar };
    const kind = (ch: string) => encoder.tailChar(ch.codePointAt(0)!);
    // unknown letters and marks: with a boundary before them, or (non-starters) without
    for (const ch of ["ก", "\u0e31", "\u1100", "\u0b47", "\u200b"]) expect([ch, kind(ch)]).toEqual([ch, 2]);
    for (const ch of ["\u0e48", "\u0e38", "\u0316", "\u094d"]) expect([ch, kind(ch)]).toEqual([ch, 1]);
    // composition seconds: only right after a starter they do not compose with (normalFormUnknownTail checks)
    for (const ch of ["\u0301", "\u1161", "\u0b3e", "\u102e"]) expect([ch, kind(ch)]).toEqual([ch, 3]);
    // known, whitespace to NFKC, a piece in the decomposition, a second in the decomposition
    for (const ch of ["a", "é", "\u00a0", "\u2000", " ", "\u0e33", "가", "\u0344", "\u1e08"]) expect([ch, kind(ch)]).toEqual([ch, 0]);
  });
});

describe("COMPOSITION_SECONDS against the runtime's normal forms on every code point", () => {
  test("a character is listed exactly when it is the second of a canonical composition", () => {
    const wrong: string[] = [];
    const seconds = compositionSeconds();
    for (let cp = 0; cp < 0x110000; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const ch = String.fromCodePoint(cp);
      if (/\p{Cn}/u.test(ch)) continue;
      if (seconds.has(ch) !== compositionSecond(ch)) wrong.push(cp.toString(16));
    }
    expect(wrong).toEqual([]);
  }, 60_000);
});

// Words behind NFC / NFKC read in normalisation segments by the replica (encode.ts unigramWord): letters with marks
// that compose (e U+0301, jamo, U+0B47 U+0B3E) or reorder (U+0316 U+0301, Thai tone marks and below vowels),
// Devanagari with its virama, U+0E33 (two characters under NFKC), U+00A0 (a space under NFKC: refused)
const SEGMENT_PIECES = [
  "a", "b", "e", "e\u0301", "\u0301", "\u0316", "\u0301\u0316", "\u0334", "\u0489", "é", "\u1100", "\u1161", "\u11a8", "\u1100\u1161", "가",
  "\u0b47\u0b3e", "ก", "\u0e48", "\u0e38", "\u0e48\u0e38", "\u0e31", "\u0e33", "क", "\u094d", "\u093e", "\u0902", "\u200b", "\u00a0", " ",
  // long runs of one mark after a letter, read mark by mark past the first two (repeatedMark): composing (é), not
  // composing, reordering with what follows the run (U+0316 after U+0301s), after a precomposed letter (é: whole)
  "a" + "\u0301".repeat(19), "e" + "\u0316".repeat(23), "ก" + "\u0e48".repeat(18), "a" + "\u0301".repeat(17) + "\u0316", "é" + "\u0301".repeat(18),
  "\u0b47" + "\u0b3e".repeat(18),
];

describe("the Unigram replica on words read in segments behind NFC / NFKC: the whole word's path, and the prefixes ending at its tokens' ends", () => {
  const cases: Array<[string, string]> = [
    ["models/gemma-embed", tokenizerText("models/gemma-embed")!],
    ["composing, NFKC", composingJson("NFKC")],
    ["composing, NFC", composingJson("NFC")],
  ];
  for (const [name, json] of cases) {
    test(name, async () => {
      const rust = Tokenizer.fromString(json);
      rust.disableTruncation();
      rust.disablePadding();
      const encoder = (await Encoder.create(JSON.parse(json), {}, 64)) as unknown as { cuts: { inWord: InWordPolicy }; unigramWord: (text: string, from: number, policy: InWordPolicy) => { start: number; end: number; path: { ids: Int32Array; ends: Int32Array }; at: Int32Array } | null };
      const policy = encoder.cuts.inWord;
      let words = 0;
      let prefixes = 0;
      let inside = 0;
      for (let i = 0; i < 40; i++) {
        const text = textOfPieces(SEGMENT_PIECES.filter((p) => (i % 2 === 0 || p !== " ") && (i % 4 === 1 || p !== "\u00a0")), 7000 + i, 80 + ((i * 29) % 120));
        const ids = (await rust.encode(text, null, CONTENT)).getIds();
        const word = encoder.unigramWord(text, text.length - 1, policy);
        if (!word || word.end !== text.length) continue;
        const mine = Array.from(word.path.ids);
        const label = [name, JSON.stringify(text.slice(word.start))];
        expect([...label, mine]).toEqual([...label, ids.slice(ids.length - mine.length)]);
        words++;
        // every end of the path's tokens that is a segment's end: the prefix up to there ends with the path's first tokens
        const ends: number[] = [];
        for (let k = 1; k <= word.path.ends.length; k++) {
          const at = word.at[word.path.ends[k - 1]!]!;
          // (a lone marker token ends where the word starts: unigramPrefix takes two tokens at least)
          if (at < 0) inside++;
          else if (at > word.start) ends.push(k);
        }
        const got = await rust.encodeBatch(ends.map((k) => text.slice(0, word.at[word.path.ends[k - 1]!]!)), CONTENT);
        for (let j = 0; j < ends.length; j++) {
          const k = ends[j]!;
          const g = got[j]!.getIds();
          expect([...label, k, g.slice(g.length - k)]).toEqual([...label, k, mine.slice(0, k)]);
          prefixes++;
        }
      }
      expect(words).toBeGreaterThan(10);
      expect(prefixes).toBeGreaterThan(200);
      expect(inside).toBeGreaterThan(0);
    }, 120_000);
  }
});
