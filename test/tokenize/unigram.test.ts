// Long Unigram words through the model replicated in JavaScript (src/tokenize/unigram.ts; encode.ts unigramPrefix /
// unigramSuffix): runs of one letter (whose best path shifts with the run's length, so no window of prefixes agrees),
// periodic and random words, words before and after short words, cut on the right and on the left, against the Rust
// binding encoding the whole text and truncating it (the library's own truncation).
import { describe, expect, test } from "bun:test";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../../src/tokenize/encode";
import { serdeF64, unigramWordPath } from "../../src/tokenize/unigram";
import { letters } from "../../bench/workload";
import { expectLibraryIds, libraryPairTruncated, libraryTruncated, tokenizerText } from "../helpers";
import { expectAtLimit } from "./at-limit";

/** Long words: runs of one letter at lengths whose remainders differ, periodic and random words, words around them. */
function longWords(n: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let d = 0; d < 4; d++) out[`"a" x ${n + d}`] = "a".repeat(n + d);
  out[`"b" x ${n + 5}`] = "b".repeat(n + 5);
  out[`"s" x ${n + 7}`] = "s".repeat(n + 7);
  out["ab repeated"] = "ab".repeat(n / 2);
  out["aab repeated"] = "aab".repeat(Math.floor(n / 3)) + "a";
  out["ASCII letters"] = letters(n, "abcdefghijklmnopqrstuvwxyz", 21);
  out["Latin with accents"] = letters(n, "abcdeéüßøåçñ", 22);
  out["Cyrillic"] = letters(n, "абвгдеёжзийклмнопрст", 23);
  out["mixed letters, digits, punctuation"] = letters(n, "abcxyzéжд1234!?.-", 24);
  out["words, then one letter"] = "hello world ".repeat(50) + "a".repeat(n);
  out["one letter, then words"] = "a".repeat(n) + " hello world".repeat(50);
  out["a word, two spaces, one letter"] = "x  " + "a".repeat(n + 1);
  out["one letter, words, one letter"] = "a".repeat(n) + " the end of it " + "a".repeat(n + 2);
  return out;
}

const UNIGRAMS = ["models/xlmr-max", "models/jina-v3", "shared/xlm-roberta-unigram.tokenizer.json.gz", "shared/t5-small.tokenizer.json"];
const XLMR = "shared/xlm-roberta-unigram.tokenizer.json.gz";

describe("long Unigram words: the model replicated on the word, identical to the whole text truncated", () => {
  for (const label of UNIGRAMS) {
    test.skipIf(tokenizerText(label) === null)(label, async () => {
      const encoder = await expectLibraryIds(label, tokenizerText(label)!, label.startsWith("models/") ? 61 : 509, longWords(40_000));
      // the replica was used (and agreed with the binding on every word it covered)
      expect(encoder.wordPathChecks.same).toBeGreaterThan(10);
      expect(encoder.wordPathChecks.differ).toBe(0);
    });
  }
});

/** A small Unigram tokenizer.json: equal sums on purpose ("a" + "a" = "aa"), "c" in no piece (unknown). */
function tieJson(pre: unknown = { type: "Sequence", pretokenizers: [{ type: "WhitespaceSplit" }, { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true }] }): string {
  const vocab: Array<[string, number]> = [
    ["<unk>", 0], ["\u2581", -1], ["a", -1], ["b", -1.5], ["aa", -2], ["ab", -2.5], ["ba", -2.5], ["aaa", -3], ["\u2581a", -1.5],
    ["\u2581aa", -3], ["bab", -4], ["x", -2], ["aab", -4], ["d", -3],
  ];
  return JSON.stringify({
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [{ id: 0, content: "<unk>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: null,
    pre_tokenizer: pre,
    post_processor: null,
    decoder: null,
    model: { type: "Unigram", unk_id: 0, vocab, byte_fallback: false },
  });
}

describe("the replica's rules, on a vocabulary with exact ties", () => {
  const inputs: Record<string, string> = {
    ...longWords(20_000),
    "a and b at random": letters(20_000, "ab", 31),
    "unknown c among them": letters(20_000, "aabbc", 32),
    "runs of unknown c and d": letters(20_000, "acccd", 33),
  };

  test("ties keep the earliest start; the marker; unknown characters fused", async () => {
    const encoder = await expectLibraryIds("ties", tieJson(), 61, inputs);
    expect(encoder.wordPathChecks.differ).toBe(0);
    expect(encoder.wordPathChecks.same).toBeGreaterThan(20);
  });

  // the marker follows Metaspace's prepend scheme: after WhitespaceSplit only "always" marks words after a space
  for (const scheme of ["always", "first", "never"]) {
    for (const whitespaceFirst of [true, false]) {
      const metaspace = { type: "Metaspace", replacement: "\u2581", prepend_scheme: scheme, split: true };
      const pre = whitespaceFirst ? { type: "Sequence", pretokenizers: [{ type: "WhitespaceSplit" }, metaspace] } : metaspace;
      test(`Metaspace prepend_scheme ${scheme}${whitespaceFirst ? " after WhitespaceSplit" : ""}`, async () => {
        const words = { "one letter": "a".repeat(20_001), "a word, then one letter": "b " + "a".repeat(70_002), "two spaces, then a run": "  " + "a".repeat(20_003) };
        const encoder = await expectLibraryIds(`${scheme} ${whitespaceFirst}`, tieJson(pre), 61, words);
        // after WhitespaceSplit, which drops whitespace, the second space of "two spaces, then a run" is a cut
        // (whitespaceRules): its run cut on the left is the text after it, tokenized without the replica
        expect(encoder.wordPathChecks).toEqual({ same: whitespaceFirst ? 5 : 6, differ: 0 });
      });
    }
  }

  test("pairs (/rerank): a query and a one-letter document, longest-first as the library truncates", async () => {
    const json = tieJson();
    const rust = Tokenizer.fromString(json);
    rust.disablePadding();
    for (const max of [61, 62]) {
      const encoder = await Encoder.create(JSON.parse(json), {}, max);
      const queries = ["what is this?", "ab ".repeat(12), "ab ".repeat(40), "b".repeat(30_000)];
      const documents = ["a".repeat(20_001), "a".repeat(20_002), "b " + "a".repeat(20_003)];
      const firsts = queries.flatMap((q) => documents.map(() => q));
      const seconds = queries.flatMap(() => documents);
      const got = await encoder.encodeBatch(seconds, firsts);
      for (let i = 0; i < firsts.length; i++) {
        const want = await libraryPairTruncated(rust, max, firsts[i]!, seconds[i]!);
        const label = `max ${max} pair ${i}`;
        expect([label, Array.from(got[i]!.ids), Array.from(got[i]!.typeIds ?? [])]).toEqual([label, want.ids, want.types]);
      }
      expect(encoder.wordPathChecks.differ).toBe(0);
      expect(encoder.wordPathChecks.same).toBeGreaterThan(0);
    }
  });

  test("a replica that disagrees with the binding is caught: the text is tokenized as before, exactly", async () => {
    const json = tieJson();
    const encoder = await Encoder.create(JSON.parse(json), {}, 61);
    const rust = Tokenizer.fromString(json);
    rust.disablePadding();
    // the replica's view of the vocabulary, made wrong: "a" now outscores every longer piece
    const scores = (encoder as unknown as { cuts: { inWord: { unigram: { vocab: { scores: Float64Array } } } } }).cuts.inWord.unigram.vocab.scores;
    scores[2] = -0.1;
    for (const direction of ["right", "left"] as const) {
      const input = "a".repeat(30_001);
      expect(Array.from((await encoder.encode(input, { direction })).ids)).toEqual((await libraryTruncated(rust, 61, input, null, direction)).ids);
    }
    expect(encoder.wordPathChecks).toEqual({ same: 0, differ: 2 });
  });

  test("ties and fusing, on the replica alone", () => {
    const vocab = { pieces: ["<unk>", "\u2581", "a", "aa", "b"], scores: Float64Array.from([0, -1, -1, -2, -1]), unknownId: 0, byteFallback: false };
    const path = (word: string, marker: boolean) => {
      const symbols = Int32Array.from([...(marker ? "\u2581" : ""), ...word].map((ch) => ch.codePointAt(0)!));
      const p = unigramWordPath(symbols, vocab, marker ? 0x2581 : -1)!;
      return { ends: Array.from(p.ends), ids: Array.from(p.ids) };
    };
    // "a" + "a" = "aa": the earlier start (the piece from position 0) wins
    expect(path("aa", false)).toEqual({ ends: [2], ids: [3] });
    // "a" + "aa" = "aa" + "a" at 3: the path through position 1 (the earlier start of the last piece) wins
    expect(path("aaa", false)).toEqual({ ends: [1, 3], ids: [2, 3] });
    expect(path("aa", true)).toEqual({ ends: [1, 3], ids: [1, 3] });
    // "c" and "d" are in no piece: one unknown node each, fused
    expect(path("acdb", false)).toEqual({ ends: [1, 3, 4], ids: [2, 0, 4] });
    // byte fallback is not replicated
    expect(unigramWordPath(Int32Array.from([0x63]), { ...vocab, byteFallback: true }, -1)).toBeNull();
  });

  test("scores as the library reads them: serde_json's two roundings, not JSON.parse's one", async () => {
    // JSON.parse: "ab" = v ties with "a" + "b" = -1 + (v + 1), so the earlier start ("ab") would win; serde_json
    // reads v one bit lower (digits rounded to f64, then divided by a power of ten), so "a" + "b" wins
    const v = -7.7354778052096345;
    expect(serdeF64(v)).toBeLessThan(v);
    expect(-1 + (v + 1)).toBe(v);
    const json = JSON.parse(tieJson());
    json.model.vocab = [["<unk>", 0], ["\u2581", -1], ["a", -1], ["b", v + 1], ["ab", v]];
    const text = JSON.stringify(json);
    const rust = Tokenizer.fromString(text);
    expect((await rust.encode("ab", null, { addSpecialTokens: false })).getIds()).toEqual([1, 2, 3]);
    const encoder = await expectLibraryIds("serde", text, 61, { "ab repeated": "ab".repeat(20_000), "aab repeated": "aab".repeat(10_000) });
    // cut on the left by the replica (on the right, windows of prefixes agree on these)
    expect(encoder.wordPathChecks).toEqual({ same: 2, differ: 0 });
  });
});

// At the limit: 1,000,000 characters, the inputs the window method could not cut (xlm-roberta: one letter on the
// right; any word on the left), against the library's whole-text time (second runs; the first fills caches).
describe.skipIf(tokenizerText(XLMR) === null)("1,000,000 characters, one Unigram word (xlm-roberta)", () => {
  test("identical ids, a fraction of the whole text's time (timed in a fresh process: at-limit.ts)", () =>
    expectAtLimit(XLMR, [["one letter", "right"], ["one letter, one more", "left"], ["words, then Cyrillic", "left"]]));
});

