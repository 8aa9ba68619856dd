// Windows inside long words under byte-level BPE (src/tokenize/prefix.ts, InWordPolicy.joiner, windowJoiner,
// midCharCrosser): marks, controls and format characters, regional indicators and Hangul jamo may be window
// characters where nothing joins them (no normaliser), controls, format characters and regional indicators also
// behind NFC. Every window wordPrefixWindow finds in fuzzed texts of these characters, letters, digits and
// punctuation is checked against the Rust library on the whole text: one of its positions is a boundary of the whole
// text's tokens (the token before ends there, the next begins there), and the tokens the Encoder keeps from it (the
// first ones every prefix shares; the last ones every suffix shares, where suffixes are used) are the whole text's.
// Then the 1,000,000-character inputs of these kinds (test/tokenize/at-limit.ts), timed in a fresh process.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../../src/tokenize/encode";
import { crossingDepth, cutPolicy, forcedByteEnd, midCharCrosser, normalFormBoundary, prefixModelJson, wordPrefixWindow, type InWordPolicy, type PieceCount } from "../../src/tokenize/prefix";
import { SHARED_TOKENIZERS, libraryTruncated, textOfPieces, tokenizerText } from "../helpers";
import { expectAtLimit, type LimitCase } from "./at-limit";

const CONTENT = { addSpecialTokens: false } as const;

/**
 * Runs of the new window characters, long enough for windows (a window needs the longest added token's length of
 * window characters on each side), and what sits next to them: letters, digits, punctuation, whitespace, marks of
 * two combining classes (which NFC reorders) and jamo that compose.
 */
const RUNS = [
  "\u200b".repeat(40), "\ufeff".repeat(36), "\u0001".repeat(44), "\u2060\u200b\ufeff".repeat(14), "\u0001!\u200b".repeat(15),
  "🇺🇸".repeat(20), "🇺🇸\u200b".repeat(14), "\u0301".repeat(40), "\u0301\u0316".repeat(20), "\u1100\u1161".repeat(20),
  "\u1100\u1161\u11a8".repeat(14), "\u00a0".repeat(30), "\u180e\u200d".repeat(20), "\u{1F3FB}".repeat(20), "\u{10940}".repeat(24),
  // marks with a normalisation boundary before them (window characters behind NFC too), next to ones without
  "\u0e31\u0e34\u0e35\u0e37\u0489\ufe0f".repeat(7), "\u093e\u093f\u0940\u0902".repeat(10), "\u0e31\u0e48\u0e34\u0e38".repeat(10),
  "\u0b47\u0b3e".repeat(20), "\u102e\u0e31".repeat(20),
];
const PIECES = [
  ...RUNS, ...RUNS, "\u200b", "\ufeff", "\u0001", "\u0301", "\u0316", "e\u0301", "a", "xyz", "1", "23", "!", "?!", " ", "🇯", "\u1161",
  "\u11a8", "\u1100", "é", "日本", "\u00a0", "ก", "\u1025", "\u0b47",
];

const texts = (seed: number, n: number) => Array.from({ length: n }, (_, i) => textOfPieces(PIECES, seed * 1000 + i, 240 + ((i * 53) % 160)));

interface Counts {
  windows: number;
  nonAscii: number;
  /** Windows that hold a character with no normalisation boundary before it (a mark, a vowel or trailing jamo). */
  segments: number;
  /** Windows of marks only (a run of one mark: encode.ts markRunUnit). */
  marks: number;
}

/** Where a window is looked for: wordPrefixWindow's positions, or forcedByteEnd's one position. */
type Finder = (text: string, from: number, policy: InWordPolicy, normalize: (ch: string) => string, pieces: PieceCount) => number[] | null;
const windows: Finder = (text, from, policy, normalize, pieces) => wordPrefixWindow(text, from, policy, normalize, 64, pieces)?.ends ?? null;

/** Every window of `texts` (from every position) against the whole text, as the file's comment says. */
async function checkWindows(label: string, json: Record<string, unknown>, texts: string[], find: Finder = windows): Promise<Counts> {
  const policy = cutPolicy(json)!.inWord!;
  expect(policy, label).not.toBeNull();
  const rust = Tokenizer.fromString(JSON.stringify(json));
  // prefixes inside a word go through the model without its end-of-word suffix (CLIP's </w>)
  const open = policy.endOfWordSuffix ? Tokenizer.fromString(JSON.stringify(prefixModelJson(json))) : rust;
  const normalizer = rust.getNormalizer();
  const preTokenizer = rust.getPreTokenizer()!;
  const normalize = (ch: string) => (normalizer ? normalizer.normalizeString(ch) : ch);
  const pieces: PieceCount = (s) => preTokenizer.preTokenizeString(s).length;
  const counts: Counts = { windows: 0, nonAscii: 0, segments: 0, marks: 0 };
  for (const text of texts) {
    const whole = await rust.encode(text, null, CONTENT);
    const ids = whole.getIds();
    const offsets = whole.getOffsets();
    const total = [...text].length;
    // code-point positions where a token of the whole text begins and the one before it has ended (there or before:
    // a character NFC composes into the one before it has no offsets of its own, so the token before ends short of it)
    const boundaries = new Set<number>();
    for (let t = 1; t < offsets.length; t++) if (offsets[t - 1]![1]! <= offsets[t]![0]!) boundaries.add(offsets[t]![0]!);
    const seen = new Set<string>();
    // every third position (windows from neighbouring positions mostly coincide)
    for (let from = 1; from < text.length; from += 3) {
      const ends = find(text, from, policy, normalize, pieces);
      const win = ends && { ends };
      if (!win || seen.has(win.ends.join())) continue;
      seen.add(win.ends.join());
      const points = win.ends.map((e) => [...text.slice(0, e)].length);
      const where = JSON.stringify(text.slice(Math.max(0, win.ends[0]! - 6), win.ends[win.ends.length - 1]! + 6));
      expect([label, where, points.some((p) => boundaries.has(p))]).toEqual([label, where, true]);
      // the first tokens every prefix shares (by id and offsets) are the whole text's
      const prefixes = (await open.encodeBatch(win.ends.map((e) => text.slice(0, e)), CONTENT)).map((e) => ({ ids: e.getIds(), offsets: e.getOffsets() }));
      const key = (k: number) => prefixes.map((p) => `${p.ids[k]} ${p.offsets[k]?.join()}`);
      let n = 0;
      while (n < prefixes[0]!.ids.length && new Set(key(n)).size === 1) n++;
      // the last common token of an open prefix may carry no suffix where the whole word's does: compared by id
      // where the whole text has no suffix model
      const firstIds = prefixes[0]!.ids.slice(0, n);
      if (!policy.endOfWordSuffix) expect([label, where, firstIds]).toEqual([label, where, ids.slice(0, n)]);
      // one position, a boundary of the whole text's tokens: the prefix's tokens are all the whole text's before it
      if (win.ends.length === 1 && !policy.endOfWordSuffix) expect([label, where, "prefix", prefixes[0]!.ids]).toEqual([label, where, "prefix", ids.slice(0, prefixes[0]!.ids.length)]);
      if (policy.suffixes) {
        const suffixes = (await rust.encodeBatch(win.ends.map((e) => text.slice(e)), CONTENT)).map((e) => ({ ids: e.getIds(), offsets: e.getOffsets() }));
        // a token's offsets from the text's end
        const last = (j: number, k: number) => {
          const s = suffixes[j]!;
          const t = s.ids.length - 1 - k;
          const length = total - points[j]!;
          return t < 0 ? null : `${s.ids[t]} ${length - s.offsets[t]![0]!} ${length - s.offsets[t]![1]!}`;
        };
        let m = 0;
        while (last(0, m) !== null && suffixes.every((_, j) => last(j, m) === last(0, m))) m++;
        const tail = suffixes[0]!.ids.slice(suffixes[0]!.ids.length - m);
        expect([label, where, "suffix", tail]).toEqual([label, where, "suffix", m === 0 ? [] : ids.slice(ids.length - m)]);
      }
      counts.windows++;
      if ([...text.slice(win.ends[0]!, win.ends[win.ends.length - 1]!)].some((c) => c.charCodeAt(0) >= 0x80)) counts.nonAscii++;
      if ([...text.slice(Math.max(0, win.ends[0]! - 1), win.ends[win.ends.length - 1]!)].some((c) => !normalFormBoundary(c))) counts.segments++;
      if (/^\p{M}+$/u.test(text.slice(Math.max(0, win.ends[0]! - 1), win.ends[win.ends.length - 1]!))) counts.marks++;
    }
  }
  return counts;
}

// Hangul syllables where the vocabulary has tokens that begin inside one and end inside the next (CLIP: the last byte of
// 사, 바 or 한 with the first of 나, 다, 라, 마, 바): no window; a position that no token can cover (forcedByteEnd). CLIP
// also has tokens of two syllables (방탄, 축하), which a bound of one syllable's bytes would miss.
const SYLLABLES = [..."한국어가나다라마바사"];
const HANGUL = [...SYLLABLES, ...SYLLABLES, ...SYLLABLES, ...SYLLABLES, ...SYLLABLES, ...SYLLABLES, "한국", "사나", "바다", "방탄", "축하", "방탄소년단", "갓세븐", "日", "a", "!", " ", "1", "\u0301", "\u1100\u1161", "\u11a8", "가\u11a8"];
const forced: Finder = (text, from, policy, normalize, pieces) => {
  const v = forcedByteEnd(text, from, policy, normalize, pieces);
  return v > 0 ? [v] : null;
};
describe("positions inside a word that no byte-level token can cover are boundaries of the whole text's tokens (both sides)", () => {
  for (const name of ["shared/clip-vit-base-patch32.tokenizer.json", "models/clip", "models/qwen3-embed", "shared/roberta-base.tokenizer.json"]) {
    test.skipIf(tokenizerText(name) === null)(name, async () => {
      const json = JSON.parse(tokenizerText(name)!);
      if (name.includes("clip-vit")) expect(midCharCrosser(cutPolicy(json)!.inWord!.tokenBytes!(), [..."한국어가나다라마바사"])).toBe(true);
      const hangul = Array.from({ length: 12 }, (_, i) => textOfPieces(HANGUL, 9100 + i, 300 + ((i * 53) % 200)));
      const n = await checkWindows(name, json, hangul, forced);
      expect([name, n.windows > 50]).toEqual([name, true]);
    }, 120_000);
  }
});

// Decomposed text behind NFC (Qwen3, CLIP): windows read in normalisation segments (encode.ts segmentUnit), each a
// letter with its marks, conjoining jamo, kana with a voicing mark that NFC makes one character, and runs of one
// mark after a letter (repeatedMark) or at a text's start; next to what must stay out of them: marks of another
// combining class after a run (NFC moves them in front of it), a trailing jamo after a syllable, marks that compose
// with nothing and plain letters. Every window the Encoder finds (its own reader) is checked as above.
const DECOMPOSED = [..."한국어가나다라마바사각"].map((c) => c.normalize("NFD"));
const KANA = [..."がぎぐげござじずぜぞだばぱぴぷ"].map((c) => c.normalize("NFD"));
const LATIN = ["ö", "ü", "ä", "é", "è", "ê", "ñ", "å", "ế", "ộ", "ǘ", "ṩ"].map((c) => c.normalize("NFD"));
const SEGMENT_LETTERS = [...DECOMPOSED, ...KANA, ...LATIN, "한", "か", "ö", "a", "b", "x", "\u1100\u1161\u11a8"];
const SEGMENT_PIECES = [
  ...Array.from({ length: 8 }, () => SEGMENT_LETTERS).flat(), "n", "o", "日本", "1", "!", " ", "\u11a8", "\u1100", "\u1161", "\u3099", "\u0308",
  "\u0316", "a" + "\u0301".repeat(60), "o" + "\u0308".repeat(50) + "\u0316", "\u0301".repeat(12), "e\u0301\u0316", "\u0b47\u0b3e", "yes",
];
const segmentTexts = (seed: number, n: number) =>
  Array.from({ length: n }, (_, i) => (i % 4 === 0 ? "\u0301".repeat(60) : "") + textOfPieces(SEGMENT_PIECES, seed * 1000 + i, 300 + ((i * 53) % 200)));
/** The Encoder's own finders for a tokenizer (windows read by its UnitReader, forced positions too). */
async function encoderFinders(json: Record<string, unknown>): Promise<{ window: Finder; forced: Finder }> {
  const encoder = (await Encoder.create(json, {}, 512)) as unknown as {
    window: (text: string, from: number, policy: InWordPolicy) => { ends: number[] } | null;
    forcedWindow: (text: string, from: number, policy: InWordPolicy) => { ends: number[] } | null;
    cuts: { inWord: InWordPolicy };
  };
  const policy = encoder.cuts.inWord;
  expect(policy.segments).toBe(true);
  return { window: (text, from) => encoder.window(text, from, policy)?.ends ?? null, forced: (text, from) => encoder.forcedWindow(text, from, policy)?.ends ?? null };
}

describe("windows of decomposed text behind NFC, read in normalisation segments, are exact (every window, both sides)", () => {
  const NAMES = ["models/qwen3-embed", "models/qwen3-rerank", "models/clip", "shared/clip-vit-base-patch32.tokenizer.json"];
  for (const [k, name] of NAMES.entries()) {
    test.skipIf(tokenizerText(name) === null)(name, async () => {
      const json = JSON.parse(tokenizerText(name)!);
      const { window, forced } = await encoderFinders(json);
      const all = segmentTexts(20 + k, 14);
      const n = await checkWindows(name, json, all, window);
      const f = await checkWindows(name, json, all, forced);
      // windows that hold a character that is not its own unit (a mark, a jamo): read in segments
      expect([name, n.segments + f.segments > 200, n.marks > 10]).toEqual([name, true, true]);
    }, 300_000);
  }
});

describe("an added token matched in the normalised text is kept out of windows read in segments", () => {
  // 16 syllables, matched after NFC: 32 code points of the decomposed text, 16 window units (the windows' reach is
  // counted in units). Without the added-token checks of wordPrefixWindow and forcedByteEnd this fails.
  const TOKEN = "가나다라마바사아자차카타파하각낙";
  test("models/qwen3-embed with a normalised added token", async () => {
    const json = JSON.parse(tokenizerText("models/qwen3-embed")!);
    const id = Object.keys(json.model.vocab).length + json.added_tokens.length;
    json.added_tokens.push({ id, content: TOKEN, single_word: false, lstrip: false, rstrip: false, normalized: true, special: false });
    const { window, forced } = await encoderFinders(json);
    const pieces = [..."한국어한국어한국어", TOKEN].map((p) => p.normalize("NFD"));
    const all = Array.from({ length: 8 }, (_, i) => textOfPieces(pieces, 7700 + i, 400));
    expect(all.every((t) => t.includes(TOKEN.normalize("NFD")))).toBe(true);
    const n = await checkWindows("qwen3-embed + token", json, all, window);
    const f = await checkWindows("qwen3-embed + token", json, all, forced);
    expect(n.segments + f.segments).toBeGreaterThan(20);
  }, 120_000);
});

describe("added tokens spelled with letters: windows where no occurrence crosses them are exact (every window, both sides)", () => {
  // the Qwen3 fixtures' added tokens "yes" and "no" (raw matches), next to their letters in other words, decomposed
  // letters (o from ö), and roberta-base with an added token "hello" matched in the normalised text
  const SINGLE = ["y", "e", "s", "n", "o", "a", "b", "ö".normalize("NFD"), "ñ".normalize("NFD"), "hell", "nos"];
  const LETTERS = [...SINGLE, ...SINGLE, ...SINGLE, ...SINGLE, ...SINGLE, "yes", "no", "hello", "eyes"];
  const lettered = (seed: number) => Array.from({ length: 12 }, (_, i) => textOfPieces(LETTERS, seed * 100 + i, 400 + ((i * 37) % 200)));
  for (const [k, name] of ["models/qwen3-embed", "models/qwen3-rerank"].entries()) {
    test(name, async () => {
      const json = JSON.parse(tokenizerText(name)!);
      const { window, forced } = await encoderFinders(json);
      const all = lettered(31 + k);
      expect(all.every((t) => t.includes("no") && t.includes("yes"))).toBe(true);
      const n = await checkWindows(name, json, all, window);
      const f = await checkWindows(name, json, all, forced);
      // (none without the occurrence check: every window here holds an n and an o)
      expect([name, n.windows + f.windows > 20]).toEqual([name, true]);
    }, 120_000);
  }
  test.skipIf(!existsSync(SHARED_TOKENIZERS))("roberta-base with an added token hello (normalised)", async () => {
    const json = JSON.parse(tokenizerText("shared/roberta-base.tokenizer.json")!);
    json.added_tokens.push({ id: 50_265, content: "hello", single_word: false, lstrip: false, rstrip: false, normalized: true, special: false });
    const n = await checkWindows("roberta-base + hello", json, lettered(40));
    expect(n.windows).toBeGreaterThan(50);
  }, 120_000);
});

describe("windows of marks, controls, format characters, flags and jamo under byte-level BPE are exact (every window, both sides)", () => {
  test.skipIf(!existsSync(SHARED_TOKENIZERS))("roberta-base (no normaliser: marks and jamo too)", async () => {
    const n = await checkWindows("roberta-base", JSON.parse(tokenizerText("shared/roberta-base.tokenizer.json")!), texts(1, 10));
    expect(n.nonAscii).toBeGreaterThan(100);
  }, 120_000);

  test.skipIf(!existsSync(SHARED_TOKENIZERS))("CLIP (NFC, whitespace collapsed, lowercase; </w>)", async () => {
    const n = await checkWindows("clip", JSON.parse(tokenizerText("shared/clip-vit-base-patch32.tokenizer.json")!), texts(2, 10));
    expect(n.nonAscii).toBeGreaterThan(50);
  }, 120_000);

  test("Qwen3 (NFC, Split regex)", async () => {
    const n = await checkWindows("qwen3-embed", JSON.parse(tokenizerText("models/qwen3-embed")!), texts(3, 10));
    expect(n.nonAscii).toBeGreaterThan(50);
  }, 120_000);

  test("clap and colmodernvbert (GPT-2's regex, small vocabularies)", async () => {
    for (const name of ["clap", "colmodernvbert"]) {
      const n = await checkWindows(name, JSON.parse(tokenizerText(`models/${name}`)!), texts(4, 6));
      expect(n.nonAscii).toBeGreaterThan(50);
    }
  }, 120_000);

  test("which characters may be window characters, by pipeline", () => {
    const qwen = cutPolicy(JSON.parse(tokenizerText("models/qwen3-embed")!))!.inWord!;
    const clap = cutPolicy(JSON.parse(tokenizerText("models/clap")!))!.inWord!;
    const same = (c: string) => c;
    const rust = Tokenizer.fromString(tokenizerText("models/qwen3-embed")!);
    const pieces: PieceCount = (s) => rust.getPreTokenizer()!.preTokenizeString(s).length;
    const found = (policy: typeof qwen, text: string, p: PieceCount = pieces) => wordPrefixWindow(text, 1000, policy, same, 64, p) !== null;
    // behind NFC: no marks without a normalisation boundary before them, no jamo; format characters, controls, flags,
    // Thai and Devanagari vowel signs yes
    expect(found(qwen, "\u0301".repeat(3000))).toBe(false);
    expect(found(qwen, "\u0e48".repeat(3000))).toBe(false);
    expect(found(qwen, "\u0b47\u0b3e".repeat(1500))).toBe(false);
    expect(found(qwen, "\u0e31\u0e34\u093e".repeat(1000))).toBe(true);
    expect(found(qwen, "\u1100\u1161".repeat(1500))).toBe(false);
    expect(found(qwen, "\u200b".repeat(3000))).toBe(true);
    expect(found(qwen, "\u0001\ufeff".repeat(1500))).toBe(true);
    expect(found(qwen, "🇺🇸".repeat(1000))).toBe(true);
    // no normaliser: marks and jamo too; never whitespace (U+00A0), unassigned code points or lone surrogates
    expect(found(clap, "\u0301".repeat(3000))).toBe(true);
    expect(found(clap, "\u1100\u1161".repeat(1500))).toBe(true);
    expect(found(clap, "\u00a0".repeat(3000))).toBe(false);
    expect(found(clap, "\u0378".repeat(3000))).toBe(false);
    expect(found(clap, "\ud800".repeat(3000))).toBe(false);
    // the library's regex decides the class: a character it counted as whitespace would be refused
    expect(found(clap, "\u200b".repeat(3000), (s) => (s.includes("\u200b") && /[!a1]/.test(s) ? 2 : pieces(s)))).toBe(false);
    // windows are only found with the library's pre-tokenizer
    expect(wordPrefixWindow("\u200b".repeat(3000), 1000, clap, same)).toBeNull();
    // byte-level BPE behind another normaliser (NFKC: compatibility mappings not checked here) keeps JOINER
    const nfkc = JSON.parse(tokenizerText("models/qwen3-embed")!);
    nfkc.normalizer = { type: "NFKC" };
    expect(wordPrefixWindow("\u200b".repeat(3000), 1000, cutPolicy(nfkc)!.inWord!, same, 64, pieces)).toBeNull();
    expect(wordPrefixWindow("abc".repeat(1000), 1000, cutPolicy(nfkc)!.inWord!, same, 64, pieces)).not.toBeNull();
  });

  test("a vocabulary token that begins inside a character and goes on past it rules a window of those characters out", () => {
    const json = JSON.parse(tokenizerText("models/clap")!);
    // U+200B is E2 80 8B: "ĭâ" (8B E2) begins inside one and ends inside the next
    json.model.vocab["ĭâ"] = 5000;
    json.model.merges.unshift(["ĭ", "â"]);
    const policy = cutPolicy(json)!.inWord!;
    expect(midCharCrosser(policy.tokenBytes!(), ["\u200b"])).toBe(true);
    // a token of bytes those characters never put together is no such token
    expect(midCharCrosser(policy.tokenBytes!(), ["\u0001"])).toBe(false);
    const rust = Tokenizer.fromString(JSON.stringify(json));
    const pieces: PieceCount = (s) => rust.getPreTokenizer()!.preTokenizeString(s).length;
    expect(wordPrefixWindow("\u200b".repeat(3000), 1000, policy, (c) => c, 64, pieces)).toBeNull();
    expect(wordPrefixWindow("\ufeff".repeat(3000), 1000, policy, (c) => c, 64, pieces)).not.toBeNull();
  });
});

// Emoji ZWJ sequences: the byte-level vocabularies hold tokens that begin inside U+2764 (E2 9D A4) and go on into
// U+FE0F (A4 EF, A4 EF B8, A4 EF B8 8F), so windows of these characters are 2 + crossingDepth wider than the longest
// run of them in a token. Every window found in fuzzed texts of ZWJ sequences, skin tones, variation selectors (and
// the odd letter, digit, space or flag) is checked against the library on the whole text, both sides.
const EMOJI_ZWJ = ["👨\u200d👩\u200d👧", "👍🏽", "🏳\ufe0f\u200d🌈", "❤\ufe0f"];
const EMOJI_PIECES = [...EMOJI_ZWJ, ...EMOJI_ZWJ, ...EMOJI_ZWJ, "❤", "\ufe0f", "\u200d", "🏽🏽", "❤\ufe0f\u200d🔥", "🇺🇸", "a", "1", " ", "!"];
const emojiTexts = (seed: number, n: number) => Array.from({ length: n }, (_, i) => textOfPieces(EMOJI_PIECES, seed * 1000 + i, 200 + ((i * 37) % 120)));
const EMOJI_NAMES = [
  ...(existsSync(SHARED_TOKENIZERS) ? ["shared/clip-vit-base-patch32.tokenizer.json"] : []),
  "models/clip", "models/qwen3-embed", "models/qwen3-rerank", "models/colmodernvbert",
];
describe("windows of emoji ZWJ sequences under byte-level BPE, where tokens begin inside a character and cross into the next (crossingDepth)", () => {
  for (const name of EMOJI_NAMES) {
    test(name, async () => {
      const json = JSON.parse(tokenizerText(name)!);
      const policy = cutPolicy(json)!.inWord!;
      // the crossers are there: the old rule (no crosser at all) refused these windows
      const chars = [...new Set([...EMOJI_ZWJ.join("")])];
      expect(midCharCrosser(policy.tokenBytes!(), chars)).toBe(true);
      expect(crossingDepth(policy.tokenBytes!(), chars)).toBe(1);
      const n = await checkWindows(name, json, emojiTexts(5, 10));
      expect(n.nonAscii).toBeGreaterThan(40);
    }, 120_000);
  }

  test("a chain of tokens that begin inside characters makes windows wider (a vocabulary built for it)", async () => {
    // GPT-2's byte-to-character map
    const byteChar: string[] = [];
    for (let b = 0, extra = 0; b < 256; b++) byteChar.push(String.fromCodePoint((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? b : 256 + extra++));
    const level = (s: string) => [...new TextEncoder().encode(s)].map((b) => byteChar[b]!).join("");
    // "˂¶¶¶¶¶¶×·" is CB 82 (C2 B6) x 6 C3 97 C2 B7: merged into CB | 82 (C2 B6) x 6 C3 | 97 C2 | B7, whose 8
    // character boundaries from ˂'s end to ×'s end are none of them a token boundary, though no token holds more
    // than 6 whole characters (a window of 8 positions, 2 more than that, would not be enough). No token begins
    // inside ¶ or ·, and only these inside ˂ or ×: the chain is bounded (crossingDepth counts from inside ˂: 7 + 1)
    const unit = "˂¶¶¶¶¶¶×·";
    const [x82, c2, b6, c3, x97, b7, cb] = [0x82, 0xc2, 0xb6, 0xc3, 0x97, 0xb7, 0xcb].map((b) => byteChar[b]!);
    const merges: [string, string][] = [[x97, c2], [x82, c2]];
    let left = x82 + c2;
    for (const next of [b6, ...Array.from({ length: 5 }, () => [c2, b6]).flat(), c3]) {
      merges.push([left, next]);
      left += next;
    }
    const vocab: Record<string, number> = {};
    for (const c of byteChar) vocab[c] = Object.keys(vocab).length;
    for (const [a, b] of merges) vocab[a + b] = Object.keys(vocab).length;
    const json = { ...JSON.parse(tokenizerText("models/clap")!), added_tokens: [], post_processor: null };
    json.model = { ...json.model, vocab, merges };
    const rust = Tokenizer.fromString(JSON.stringify(json));
    const tokens = (await rust.encode(unit.repeat(3), null, CONTENT)).getTokens();
    expect(tokens.slice(0, 5)).toEqual([cb, x82 + level("¶¶¶¶¶¶") + c3, x97 + c2, b7, cb]);
    const policy = cutPolicy(json)!.inWord!;
    expect(crossingDepth(policy.tokenBytes!(), [..."˂¶×·"])).toBe(8);
    const n = await checkWindows("chain", json, [0, 1, 2, 3, 4].map((k) => "·".repeat(k) + unit.repeat(30)));
    expect(n.windows).toBeGreaterThan(20);
  });

  test("crossingDepth: chains of tokens that begin inside characters (bounded, unbounded, none)", () => {
    const json = JSON.parse(tokenizerText("models/clap")!);
    const base = cutPolicy(json)!.inWord!;
    expect(crossingDepth(base.tokenBytes!(), ["\u200b", "\ufeff"])).toBe(0);
    const withTokens = (tokens: string[]) => {
      const j = structuredClone(json);
      for (const [k, t] of tokens.entries()) j.model.vocab[t] = 60_000 + k;
      return cutPolicy(j)!.inWord!.tokenBytes!();
    };
    // U+200B is E2 80 8B ("âĢĭ"), U+FEFF EF BB BF ("ï»¿"), U+0001 01 ("ā"): 8B EF crosses one boundary and ends
    // inside U+FEFF, where BB BF 01 crosses one more (and ends at U+0001's end); a token of bytes the characters
    // never put together counts for nothing
    expect(crossingDepth(withTokens(["ĭï"]), ["\u200b", "\ufeff"])).toBe(1);
    expect(crossingDepth(withTokens(["ĭï", "»¿ā"]), ["\u200b", "\ufeff", "\u0001"])).toBe(2);
    expect(crossingDepth(withTokens(["ĭï", "»¿ā"]), ["\u200b", "\ufeff"])).toBe(1);
    expect(crossingDepth(withTokens(["ĭï"]), ["\u200b", "\u0001"])).toBe(0);
    // 8B, a whole U+200B, then its end: one boundary inside (the token ends at a character's end)
    expect(crossingDepth(withTokens(["ĭâĢĭ"]), ["\u200b"])).toBe(1);
    expect(crossingDepth(withTokens(["ĭâĢĭā"]), ["\u200b", "\u0001"])).toBe(2);
    // tokens that end inside a character where a chain can begin again (every byte is a token): no bound, no window
    expect(crossingDepth(withTokens(["ĭâ"]), ["\u200b"])).toBe(-1);
    expect(crossingDepth(withTokens(["ĭï", "»¿â"]), ["\u200b", "\ufeff"])).toBe(-1);
    expect(wordPrefixWindow("\u200b".repeat(3000), 1000, cutPolicy((() => { const j = structuredClone(json); j.model.vocab["ĭâ"] = 60_000; return j; })())!.inWord!, (c) => c, 64, (t) => (t.length > 0 ? 1 : 0))).toBeNull();
  });
});

// 1,000,000 characters of each kind, both directions: the library's ids and a fraction of its time (behind NFC, a
// run of one mark and jamo are read in normalisation segments, as decomposed text is).
const ALL = ["zero-width spaces", "byte-order marks", "controls", "emoji flags", "combining marks", "hangul jamo", "nbsp", "format, controls, flags mixed"];
// (decomposed Latin holds the letters of the Qwen3 fixtures' added tokens "yes" and "no": windows where neither occurs)
const NFC = [...ALL.filter((k) => k !== "nbsp"), "decomposed Korean", "decomposed Japanese", "decomposed Latin", "marks of several classes", "marks of one class, mixed"];
const both = (kinds: string[]) => kinds.flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[]);
// A letter followed by a long run of marks of several combining classes is one normalisation segment, which NFC
// reorders whole: behind NFC (byte-level BPE) or NFKC (Unigram) the Encoder replaces such a run by the library's
// normal form of it (encode.ts normalizeLongSegments) and reads it code point by code point. Texts over the Encoder's whole-text length with runs
// of 40-3,000 marks drawn from classes 1, 7, 10, 202, 220 and 230 (some that compose with the letter before them: a
// + U+0308 + U+0304 is U+01DF), after letters, a Kelvin sign (K under NFC), an added token, or at the text's start,
// each encoded at several max lengths in both directions against the library truncating the whole text.
const MARKS = ["\u0301", "\u0316", "\u0308", "\u0327", "\u0304", "\u05b0", "\u0334", "\u093c", "\u0323", "\u0301\u0316\u0308"];
function markRun(seed: number, n: number): string {
  let state = seed;
  let out = "";
  for (let i = 0; i < n; i++) {
    state = (state * 1103515245 + 12345) >>> 0;
    out += MARKS[(state >>> 16) % MARKS.length];
  }
  return out;
}
function markTexts(seed: number, count: number, lead: string[]): string[] {
  return Array.from({ length: count }, (_, i) => {
    const words = textOfPieces(["word ", "ab", "é", "日本", "1", "!", " "], seed + i, 200 + ((i * 97) % 3000));
    const starter = lead[i % lead.length]!;
    const run = markRun(seed * 7 + i, 40 + ((i * 811) % 3000));
    const filler = "x".repeat(17000);
    return i % 3 === 0 ? words + starter + run + " " + filler : i % 3 === 1 ? filler + words + starter + run : starter + run + words + filler + starter + markRun(seed + i, 50);
  });
}
async function checkMarkRuns(label: string, json: Record<string, unknown>, texts: string[]): Promise<{ replaced: number; refused: number }> {
  const rust = Tokenizer.fromString(JSON.stringify(json));
  rust.disablePadding();
  const replaced = { replaced: 0, refused: 0 };
  for (const max of [24, 200]) {
    const encoder = await Encoder.create(json, {}, max);
    for (const text of texts) {
      for (const direction of ["right", "left"] as const) {
        const got = await encoder.encode(text, { direction });
        const want = await libraryTruncated(rust, max, text, null, direction);
        expect([label, max, direction, JSON.stringify(text.slice(0, 40)), Array.from(got.ids)]).toEqual([label, max, direction, JSON.stringify(text.slice(0, 40)), want.ids]);
      }
    }
    // the same text in two calls at once (each reads the NFC spans the other also put there), then nothing kept
    const [a, b] = await Promise.all([encoder.encode(texts[0]!, { direction: "right" }), encoder.encode(texts[0]!, { direction: "left" })]);
    expect([label, max, Array.from(a.ids), Array.from(b.ids)]).toEqual([label, max, (await libraryTruncated(rust, max, texts[0]!, null, "right")).ids, (await libraryTruncated(rust, max, texts[0]!, null, "left")).ids]);
    expect((encoder as unknown as { normalRuns: Map<string, unknown> }).normalRuns.size).toBe(0);
    replaced.replaced += encoder.nfcSpans.replaced;
    replaced.refused += encoder.nfcSpans.refused;
  }
  return replaced;
}

describe("long runs of marks of several classes behind NFC: replaced by their NFC, read code point by code point (same ids as the library)", () => {
  const LEADS = ["a", "e", "\u212a", "o", "\u3042", "", "A"];
  // byte-level BPE behind NFC, and Unigram behind NFKC and Metaspace (read by the replica, newUnigramWord)
  const names = ["models/qwen3-embed", "models/qwen3-rerank", "models/clip", ...(existsSync(SHARED_TOKENIZERS) ? ["shared/clip-vit-base-patch32.tokenizer.json"] : []), "models/colpali", "models/deberta-rerank", "models/gemma-embed"];
  for (const name of names) {
    test(name, async () => {
      const n = await checkMarkRuns(name, JSON.parse(tokenizerText(name)!), markTexts(9100, 12, LEADS));
      expect([name, n.replaced > 12]).toEqual([name, true]);
    }, 300_000);
  }
  const withAdded = (content: string) => {
    const json = JSON.parse(tokenizerText("models/qwen3-embed")!);
    json.added_tokens.push({ id: 3000, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: false });
    return json;
  };
  test("an added token that ends with a letter NFC composes keeps that letter's runs as they are (models/qwen3-embed + xa)", async () => {
    const n = await checkMarkRuns("qwen3-embed + xa", withAdded("xa"), markTexts(9200, 9, ["xa", "xe"]));
    expect([n.refused > 2, n.replaced > 2]).toEqual([true, true]);
  }, 300_000);
  test("an added token that holds a mark keeps every run of it as it is (models/qwen3-embed + q\\u05b0, xa\\u0308)", async () => {
    const n = await checkMarkRuns("qwen3-embed + q\\u05b0", withAdded("q\u05b0"), markTexts(9300, 6, ["q", "a"]));
    expect([n.refused > 2, n.replaced]).toEqual([true, 0]);
    // the token's mark is composed into the letter, and no other one is left in the run's NFC
    const composed = ["xa\u0308" + "\u0316\u0327".repeat(40) + " " + "y".repeat(17000), "y".repeat(17000) + " xa\u0308" + "\u0327\u0316".repeat(40)];
    const m = await checkMarkRuns("qwen3-embed + xa\\u0308", withAdded("xa\u0308"), composed);
    expect([m.refused >= 4, m.replaced]).toEqual([true, 0]);
  }, 300_000);
});

describe("1,000,000 characters of joiners, byte-level BPE (timed in a fresh process: at-limit.ts)", () => {
  test.skipIf(!existsSync(SHARED_TOKENIZERS))("roberta-base", () => expectAtLimit("shared/roberta-base.tokenizer.json", both(ALL)), 600_000);
  test.skipIf(!existsSync(SHARED_TOKENIZERS))("clip-vit-base-patch32", () => expectAtLimit("shared/clip-vit-base-patch32.tokenizer.json", both(NFC)), 600_000);
  test("qwen3-embed", () => expectAtLimit("models/qwen3-embed", both([...NFC, "nbsp"])), 600_000);
  test("clip", () => expectAtLimit("models/clip", both(["combining marks", "hangul jamo", "decomposed Korean", "decomposed Japanese", "decomposed Latin"])), 600_000);
  // Unigram behind NFKC: long runs of mixed marks replaced by their NFKC (normalizeLongSegments)
  test("colpali, deberta-rerank (Unigram behind NFKC): marks of several classes", async () => {
    // most of the time is the library's NFKC of the run (about 150 ms): under half the library's time
    for (const name of ["colpali", "deberta-rerank"]) await expectAtLimit(`models/${name}`, both(["marks of several classes", "marks of one class, mixed"]), 512, 1 / 2);
  }, 600_000);
  test("emoji ZWJ sequences (clip, qwen3-embed, qwen3-rerank, colmodernvbert; crossingDepth)", async () => {
    for (const name of EMOJI_NAMES) await expectAtLimit(name, both(["emoji ZWJ sequences"]));
  }, 600_000);
  test("clap, colmodernvbert, roberta-cls", async () => {
    for (const name of ["clap", "colmodernvbert", "roberta-cls"]) await expectAtLimit(`models/${name}`, both(["zero-width spaces", "combining marks", "emoji flags", "hangul jamo"]));
  }, 600_000);
});
