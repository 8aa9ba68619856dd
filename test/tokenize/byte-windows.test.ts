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
import { cutPolicy, midCharCrosser, prefixModelJson, wordPrefixWindow, type PieceCount } from "../../src/tokenize/prefix";
import { SHARED_TOKENIZERS, textOfPieces, tokenizerText } from "../helpers";
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
}

/** Every window of `texts` (from every position) against the whole text, as the file's comment says. */
async function checkWindows(label: string, json: Record<string, unknown>, texts: string[]): Promise<Counts> {
  const policy = cutPolicy(json)!.inWord!;
  expect(policy, label).not.toBeNull();
  const rust = Tokenizer.fromString(JSON.stringify(json));
  // prefixes inside a word go through the model without its end-of-word suffix (CLIP's </w>)
  const open = policy.endOfWordSuffix ? Tokenizer.fromString(JSON.stringify(prefixModelJson(json))) : rust;
  const normalizer = rust.getNormalizer();
  const preTokenizer = rust.getPreTokenizer()!;
  const normalize = (ch: string) => (normalizer ? normalizer.normalizeString(ch) : ch);
  const pieces: PieceCount = (s) => preTokenizer.preTokenizeString(s).length;
  const counts: Counts = { windows: 0, nonAscii: 0 };
  for (const text of texts) {
    const whole = await rust.encode(text, null, CONTENT);
    const ids = whole.getIds();
    const offsets = whole.getOffsets();
    const total = [...text].length;
    // code-point positions where a token of the whole text ends and the next begins
    const boundaries = new Set<number>();
    for (let t = 1; t < offsets.length; t++) if (offsets[t - 1]![1] === offsets[t]![0]) boundaries.add(offsets[t]![0]!);
    const seen = new Set<string>();
    // every third position (windows from neighbouring positions mostly coincide)
    for (let from = 1; from < text.length; from += 3) {
      const win = wordPrefixWindow(text, from, policy, normalize, 64, pieces);
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
    }
  }
  return counts;
}

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

// 1,000,000 characters of each kind, both directions: the library's ids and a fraction of its time (the NFC
// pipelines' marks and jamo are still tokenized whole: not here).
const ALL = ["zero-width spaces", "byte-order marks", "controls", "emoji flags", "combining marks", "hangul jamo", "nbsp", "format, controls, flags mixed"];
const NFC = ["zero-width spaces", "byte-order marks", "controls", "emoji flags", "format, controls, flags mixed"];
const both = (kinds: string[]) => kinds.flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[]);
describe("1,000,000 characters of joiners, byte-level BPE (timed in a fresh process: at-limit.ts)", () => {
  test.skipIf(!existsSync(SHARED_TOKENIZERS))("roberta-base", () => expectAtLimit("shared/roberta-base.tokenizer.json", both(ALL)), 600_000);
  test.skipIf(!existsSync(SHARED_TOKENIZERS))("clip-vit-base-patch32", () => expectAtLimit("shared/clip-vit-base-patch32.tokenizer.json", both(NFC)), 600_000);
  test("qwen3-embed", () => expectAtLimit("models/qwen3-embed", both([...NFC, "nbsp"])), 600_000);
  test("clap, colmodernvbert, roberta-cls", async () => {
    for (const name of ["clap", "colmodernvbert", "roberta-cls"]) await expectAtLimit(`models/${name}`, both(["zero-width spaces", "combining marks", "emoji flags", "hangul jamo"]));
  }, 600_000);
});
