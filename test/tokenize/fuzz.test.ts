// Token ids identical to the Rust tokenizers library: fuzzed texts (mixed scripts, emoji, BOMs, zero-width and
// combining characters, controls, odd whitespace) against the ids Python's `tokenizers` gave for them
// (test/fixtures/generate/tokenizer_fuzz.py), for every fixture tokenizer and the real ones in ../shared/tokenizers;
// and long texts, which the Encoder tokenizes only up to an exact word boundary (src/tokenize/prefix.ts), against
// the binding's own whole-text encoding with its truncation.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "tokenizers";
import { Encoder, type Encoded } from "../../src/tokenize/encode";
import { cutPolicy, wordPrefixWindow, type PieceCount } from "../../src/tokenize/prefix";
import { TokenizerPool } from "../../src/tokenize/pool";
import { FIXTURES, REFERENCE, ROOT, SHARED_TOKENIZERS, expectLibraryIds, expectLibraryPairIds, libraryTruncated, textOfPieces, tokenizerText } from "../helpers";
import { cjk, letters } from "../../bench/workload";
import { EMOJI, MIXED, expectAtLimit, type LimitCase } from "./at-limit";

interface FuzzReference {
  tokenizers_version: string;
  pair_max_length: number;
  texts: string[];
  pairs: Array<[number, number]>;
  names: Record<string, string>;
  tokenizers: Record<string, { ids: number[][]; pairs: Array<{ ids: number[]; type_ids: number[] }> }>;
}

const REF: FuzzReference = JSON.parse(readFileSync(join(REFERENCE, "tokenizer-fuzz.json"), "utf8"));
const SHARED = SHARED_TOKENIZERS;
const REGENERATE = "regenerate with: /root/fixture-venv/bin/python test/fixtures/generate/generate.py tokenizer-fuzz";

const fixtureNames = Object.keys(REF.names).filter((n) => n.startsWith("models/"));
const sharedNames = Object.keys(REF.names).filter((n) => n.startsWith("shared/"));

test("the reference covers every fixture tokenizer, as it is now", () => {
  const present = readdirSync(FIXTURES).filter((d) => existsSync(join(FIXTURES, d, "tokenizer.json")));
  expect(fixtureNames.map((n) => n.slice("models/".length)).sort(), REGENERATE).toEqual(present.sort());
  for (const name of fixtureNames) {
    // A changed tokenizer.json needs new reference ids.
    const digest = new Bun.CryptoHasher("sha256").update(tokenizerText(name)!).digest("hex").slice(0, 16);
    expect(`${name} ${digest}`, REGENERATE).toBe(`${name} ${REF.names[name]}`);
  }
});

async function checkFuzz(name: string): Promise<void> {
  const json = JSON.parse(tokenizerText(name)!);
  const expected = REF.tokenizers[REF.names[name]!]!;
  const whole = await Encoder.create(json, {}, 1_000_000);
  const got = await whole.encodeBatch(REF.texts);
  let same = 0;
  const diffs: string[] = [];
  got.forEach((e, i) => {
    const ids = Array.from(e.ids);
    if (JSON.stringify(ids) === JSON.stringify(expected.ids[i])) same++;
    else if (diffs.length < 3) diffs.push(`${JSON.stringify(REF.texts[i])}: ${JSON.stringify(ids)} != ${JSON.stringify(expected.ids[i])}`);
  });
  expect(`${name}: ${same}/${REF.texts.length} identical\n${diffs.join("\n")}`).toBe(`${name}: ${REF.texts.length}/${REF.texts.length} identical\n`);
  // Pairs, truncated longest-first to an odd length: ids and token type ids.
  const truncated = await Encoder.create(json, {}, REF.pair_max_length);
  const pairs = await truncated.encodeBatch(
    REF.pairs.map(([, b]) => REF.texts[b]!),
    REF.pairs.map(([a]) => REF.texts[a]!),
  );
  let odd = 0;
  pairs.forEach((e, i) => {
    if (expectPair(`${name} pair ${REF.pairs[i]}`, e, { ids: expected.pairs[i]!.ids, types: expected.pairs[i]!.type_ids })) odd++;
  });
  expect(odd, `${name}: pairs differing in the odd token`).toBeLessThanOrEqual(2);
}

/**
 * A pair's ids and token type ids equal the library's, or differ only in which side got the odd token of a halved
 * budget: the library's length comparison is reproduced (encode.ts, countedLength) except around added tokens
 * (special-token strings inside a text) at the truncation point, seen in 1-2 of the 60 fuzzed pairs on 5 of the 20
 * tokenizers. The differing stretch is then the same tokens shifted by one place, and such pairs stay rare.
 */
function shiftedByOne(a: number[], b: number[]): boolean {
  if (a.length !== b.length) return false;
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  if (i === a.length) return true;
  let j = a.length - 1;
  while (a[j] === b[j]) j--;
  const same = (x: number[], y: number[]) => JSON.stringify(x) === JSON.stringify(y);
  return same(a.slice(i, j), b.slice(i + 1, j + 1)) || same(a.slice(i + 1, j + 1), b.slice(i, j));
}

/** Checks one pair; true when it differs only in the odd token. */
function expectPair(label: string, got: Encoded, want: { ids: number[]; types: number[] }): boolean {
  const ids = Array.from(got.ids);
  const types = Array.from(got.typeIds ?? new Int32Array(ids.length));
  if (JSON.stringify(ids) === JSON.stringify(want.ids) && JSON.stringify(types) === JSON.stringify(want.types)) return false;
  const oddOnly = shiftedByOne(ids, want.ids) && shiftedByOne(types, want.types);
  expect(oddOnly ? "same but for the odd token" : { ids, types }, label).toEqual(oddOnly ? "same but for the odd token" : want);
  return true;
}

describe(`fuzzed texts: ids of the Rust tokenizers ${REF.tokenizers_version}`, () => {
  test("generated with the version the server runs", async () => {
    const pkg = await Bun.file(join(ROOT, "node_modules", "tokenizers", "package.json")).json();
    expect(pkg.version).toBe(REF.tokenizers_version);
  });
  for (const name of fixtureNames) test(name, () => checkFuzz(name));
});

describe.skipIf(!existsSync(SHARED))("fuzzed texts, real published tokenizers (../shared/tokenizers)", () => {
  for (const name of sharedNames) test(name, () => checkFuzz(name));
});

describe("tokenizer workers give the same ids", () => {
  test("every fixture tokenizer through a pool of two workers", async () => {
    const pool = new TokenizerPool(2);
    try {
      for (const name of fixtureNames) {
        await pool.load(name, JSON.parse(tokenizerText(name)!), {}, 1_000_000);
        const got = await pool.encode(name, REF.texts);
        const expected = REF.tokenizers[REF.names[name]!]!.ids;
        got.forEach((e, i) => expect([name, i, Array.from(e.ids)]).toEqual([name, i, expected[i]!]));
      }
    } finally {
      pool.close();
    }
  });
});

// Long texts: the Encoder's prefix tokenization against the whole text through the binding, truncated by the Rust
// library itself (its own LongestFirst strategy and post-processor).
function longTexts(): string[] {
  let joined = "";
  let glued = "";
  for (let i = 0; joined.length < 40_000; i++) {
    joined += REF.texts[i % REF.texts.length] + " ";
    glued += REF.texts[(i * 7) % REF.texts.length];
  }
  let cjk = "";
  for (let i = 0; i < 30_000; i++) cjk += String.fromCharCode(0x4e00 + ((i * 7919) % 20_000)) + (i % 997 === 0 ? " " : "");
  return [
    joined,
    glued,
    cjk,
    "a".repeat(50_000) + " tail",
    "word ".repeat(10_000),
    "x".repeat(300) + " " + "abc1".repeat(20_000),
    REF.texts.slice(0, 60).join("\u3000").repeat(20),
    " ".repeat(20_000) + "hello world ".repeat(3_000),
  ];
}

async function checkLong(name: string, maxLength: number): Promise<void> {
  const text = tokenizerText(name)!;
  const encoder = await Encoder.create(JSON.parse(text), {}, maxLength);
  const rust = Tokenizer.fromString(text);
  rust.disablePadding();
  const texts = longTexts();
  for (const direction of ["right", "left"] as const) {
    // left: TEI's truncation_direction, from suffixes after a cut (cutAtOrBefore)
    const singles = await encoder.encodeBatch(texts, undefined, { direction });
    for (let i = 0; i < texts.length; i++) {
      const want = await libraryTruncated(rust, maxLength, texts[i]!, null, direction);
      expect([name, direction, i, Array.from(singles[i]!.ids)]).toEqual([name, direction, i, want.ids]);
    }
  }
  // Pairs: a short query with a long document, and two long members (whose exact lengths decide the odd token).
  const firsts = ["what is this?", texts[0]!, texts[2]!.slice(0, 20_001), texts[1]!];
  const seconds = [texts[0]!, texts[4]!, texts[2]!, texts[6]!];
  const pairs = await encoder.encodeBatch(seconds, firsts);
  for (let i = 0; i < firsts.length; i++) {
    const want = await libraryTruncated(rust, maxLength, firsts[i]!, seconds[i]!);
    expectPair(`${name} long pair ${i}`, pairs[i]!, want);
  }
}

describe("long texts: prefix tokenization equals the whole text's, truncated", () => {
  test("the fixture kinds cut their texts (the policy accepts them)", () => {
    for (const name of ["models/bert-mean-norm", "models/roberta-cls", "models/xlmr-max", "models/clip"]) {
      expect([name, cutPolicy(JSON.parse(tokenizerText(name)!)) !== null]).toEqual([name, true]);
    }
  });
  for (const name of fixtureNames) test(name, () => checkLong(name, 61));
});

describe.skipIf(!existsSync(SHARED))("long texts, real published tokenizers", () => {
  for (const name of sharedNames) test(name, () => checkLong(name, 509));
});

// Long words (no space anywhere): BPE and Unigram texts are cut inside the word where prefixes ending in a window
// agree, or after a character no Unigram piece holds; WordPiece runs that become one [UNK] are shortened; regex
// pre-tokenizers are cut between classes (src/tokenize/prefix.ts). Against the whole text through the binding,
// truncated by the library.
const LONG_WORDS: Record<string, string> = {
  "one letter": "a".repeat(60_000),
  "ASCII letters": letters(60_000, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 1),
  "Latin with accents": letters(60_000, "abcdeéüßøåçñ", 2),
  "Cyrillic": letters(60_000, "абвгдеёжзийклмнопрст", 3),
  "CJK": letters(60_000, "的一是不了人我在有他这为之大来以个中上们", 4),
  "CJK, 20,000 ideographs": cjk(60_000),
  "emoji": letters(30_000, EMOJI, 9),
  "mixed scripts, emoji, digits and punctuation": letters(60_000, MIXED, 6),
  "words, then one long word": "hello world ".repeat(100) + "b".repeat(60_000),
  "words, then Cyrillic to the end": "hello world ".repeat(100) + letters(60_000, "абвгд", 10),
  "Cyrillic, then Latin": letters(30_000, "абвгд", 10) + letters(30_000, "abcde", 11),
  "one long word, then words": letters(60_000, "abcdefg", 12) + " hello world".repeat(100),
  "letters with a digit and a mark now and then": letters(60_000, "abcdefghij", 5).replace(/a(?=b)/g, "7").replace(/cd/g, "c\u0301d"),
  "a special-token string inside": letters(30_000, "sx", 6) + "</s><s>" + letters(30_000, "sx", 7),
  // GPT-2's regex keeps a run of numbers in one pre-token (` ?\p{N}+`): windows of numbers there
  digits: letters(60_000, "0123456789", 7),
  "one digit": "7".repeat(60_000),
  "digits, then letters": letters(30_000, "0123456789", 8) + letters(30_000, "abcde", 9),
  "numbers of other kinds": letters(60_000, "²³¹⁴٣Ⅻ½", 3),
};

async function checkLongWords(name: string, maxLength: number, inputs: Record<string, string> = LONG_WORDS): Promise<void> {
  await expectLibraryIds(name, tokenizerText(name)!, maxLength, inputs);
}

describe("long words without spaces: cut inside the word, identical to the whole text truncated", () => {
  for (const name of ["models/roberta-cls", "models/xlmr-max", "models/qwen3-embed", "models/clip", "models/bert-mean-norm", "models/jina-v3"]) {
    test(name, () => checkLongWords(name, 61));
  }

  test("Unigram behind a pre-tokenizer that splits punctuation: a run of unknown punctuation is many tokens, never cut to two", async () => {
    const json = JSON.parse(tokenizerText("models/xlmr-max")!);
    json.pre_tokenizer = { type: "Sequence", pretokenizers: [json.pre_tokenizer, { type: "Punctuation", behavior: "Isolated" }] };
    const text = JSON.stringify(json);
    const encoder = await Encoder.create(json, {}, 61);
    const rust = Tokenizer.fromString(text);
    rust.disablePadding();
    // unknown punctuation: each character its own pre-token, so its own unknown token
    const input = "hello " + "\u203D\u2042".repeat(20_000);
    const want = await libraryTruncated(rust, 61, input, null);
    expect(Array.from((await encoder.encode(input)).ids)).toEqual(want.ids);
  });
});

// One character repeated to a word's end, cut on the left: suffixes starting in a window never agree (a run's
// tokens shift with its length), so the run's period is used (encode.ts runSuffix / runPeriod): each residue of the
// run's length, behind characters that join its first tokens (" " before "a" merges first in the variant), and with a
// cut after it.
const RUN_LEADS = ["", " ", "x", "hé", "😀", "hello world ", "!"];
const RUN_TAILS = ["", " hello", "!!", " world!"];
function runInputs(ch: string, period: number, leads = RUN_LEADS, tails = RUN_TAILS): Record<string, string> {
  const out: Record<string, string> = {};
  for (const lead of leads) for (const tail of tails) for (let d = 0; d < period; d++) out[`${JSON.stringify(lead)} + ${ch} x ${17_000 + d} + ${JSON.stringify(tail)}`] = lead + ch.repeat(17_000 + d) + tail;
  return out;
}

/** roberta-cls with runs of "a" merged up to 8 (its own tokens are single letters there) and " a" merged first. */
function periodicVariant(): string {
  const json = JSON.parse(tokenizerText("models/roberta-cls")!);
  let next = 1 + Math.max(...(Object.values(json.model.vocab) as number[]), ...json.added_tokens.map((t: { id: number }) => t.id));
  for (const t of ["aa", "aaa", "aaaa", "aaaaaaa", "aaaaaaaa", "Ġaa", "Ġaaaa"]) json.model.vocab[t] = next++;
  json.model.merges = [["Ġ", "a"], ["a", "a"], ["aa", "aa"], ["aa", "a"], ["aaaa", "aaaa"], ["aaaa", "aaa"], ["Ġ", "aa"], ["Ġaa", "aa"], ...json.model.merges.slice(1)];
  return JSON.stringify(json);
}

describe("one character repeated, cut on the right or the left through the run's period", () => {
  test("roberta-cls with runs of a merged (period 8)", async () => {
    const encoder = await expectLibraryIds("periodic roberta-cls", periodicVariant(), 61, runInputs("a", 8));
    expect(encoder.wordPathChecks.differ).toBe(0);
    expect(encoder.wordPathChecks.same).toBeGreaterThan(0);
  });
});

describe.skipIf(!existsSync(SHARED))("one character repeated, cut on the left, real published tokenizers", () => {
  for (const name of ["shared/roberta-base.tokenizer.json", "shared/clip-vit-base-patch32.tokenizer.json"]) {
    test(name, async () => {
      // "a": period 4 (roberta) / 8 (CLIP), "!": 8 / 16; "0": 16 on roberta (its first token, 16 zeros, is longer
      // than the prefixes of a window at the run's start: the window further in)
      // ".": 64 on roberta, found 256 characters into the run (65 dots are 32 + 24 + 9 there); "=": 64, whose windows
      // are more than 64 positions wide (65 "=" are a token)
      // (at max length 61: 17,000 characters hold more than 60 tokens of 64 units)
      // and runs of "." shorter than the tokens asked for (their tokens then end before the max length)
      const zeros = name.includes("roberta") ? { ...runInputs("0", 16, ["", "x"], ["", "!!"]), ...runInputs(".", 64, [""], [""]) } : {};
      const encoder = await expectLibraryIds(name, tokenizerText(name)!, 509, { ...runInputs("a", 8, [" ", "hé", "hello world "], ["", "!!"]), ...runInputs("!", 16, ["", "x"], ["", " hello"]), ...zeros });
      expect(encoder.wordPathChecks.differ).toBe(0);
      expect(encoder.wordPathChecks.same).toBeGreaterThan(0);
      if (name.includes("roberta")) await expectLibraryIds(name, tokenizerText(name)!, 61, { ...runInputs(".", 64, ["", "hello world "], ["", " hello"]), ...runInputs("=", 64, ["x"], ["", "!!"]) });
    });
  }
});

// A pair's member counted through the run's period (runPrefix with word ids; countedExactly goes on from its end):
// runs of "." and "=" (64 units a token on roberta-base, no window) and "a", behind and before other words, as the
// query or the document, with short and long partners, at a small and the usual max length.
describe.skipIf(!existsSync(SHARED))("one character repeated as a pair's member, real published tokenizers", () => {
  test("shared/roberta-base.tokenizer.json", async () => {
    const name = "shared/roberta-base.tokenizer.json";
    const runs = Object.values({ ...runInputs(".", 64, ["", "hello world "], [""]), ...runInputs("=", 64, ["x"], ["!!"]), ...runInputs("a", 8, [" ", "hé"], ["", "!"]) });
    const partners = ["what is this?", "hello world ".repeat(30), "=".repeat(9_000), "a".repeat(20_001)];
    const others = runs.map((_, i) => partners[i % partners.length]!);
    await expectLibraryPairIds(name, tokenizerText(name)!, 61, others, runs);
    await expectLibraryPairIds(name, tokenizerText(name)!, 61, runs, others);
    await expectLibraryPairIds(name, tokenizerText(name)!, 509, others.slice(0, 96), runs.slice(0, 96));
  }, 300_000);
});

describe.skipIf(!existsSync(SHARED))("1,000,000 characters, one letter cut on the left through the run's period", () => {
  for (const name of ["shared/roberta-base.tokenizer.json", "shared/clip-vit-base-patch32.tokenizer.json"]) {
    test(`${name} (timed in a fresh process: at-limit.ts)`, () => expectAtLimit(name, [["one letter", "left"], ["words, then one letter", "left"], ["one zero", "left"], ["dots", "right"], ["dots", "left"], ["equals signs", "right"], ["equals signs", "left"], ["dots", "pair", "short query"], ["equals signs", "pair", "short query"]]));
  }
});

describe.skipIf(!existsSync(SHARED))("long words without spaces, real published tokenizers", () => {
  for (const name of sharedNames) test(name, () => checkLongWords(name, 509));

  test("the in-word cut is taken (a window is found) where it applies, and refused where it does not", () => {
    const usable = (ch: string) => ch;
    const policy = (name: string) => cutPolicy(JSON.parse(tokenizerText(name)!))?.inWord ?? null;
    // tokenizer.json files without a model `type` (roberta-base, t5-small) are read as the library reads them
    expect(policy("shared/roberta-base.tokenizer.json")?.model).toBe("bpe-bytes");
    expect(policy("shared/t5-small.tokenizer.json")?.model).toBe("unigram");
    expect(policy("shared/xlm-roberta-unigram.tokenizer.json.gz")?.model).toBe("unigram");
    // CLIP's </w>: prefixes go through the model without it; WordPiece turns a too long word into one [UNK]
    expect(policy("shared/clip-vit-base-patch32.tokenizer.json")?.endOfWordSuffix).toBe(true);
    expect(policy("shared/bert-base-uncased.tokenizer.json")).toBeNull();
    // the library's pre-tokenizer (byte-level windows are only found with it: libraryClass)
    const pieces = (name: string): PieceCount => {
      const pre = Tokenizer.fromString(tokenizerText(name)!).getPreTokenizer();
      return (s) => (pre ? pre.preTokenizeString(s).length : 1);
    };
    const found = (name: string, text: string) => wordPrefixWindow(text, 1026, policy(name)!, usable, 64, pieces(name)) !== null;
    expect(found("shared/roberta-base.tokenizer.json", LONG_WORDS["ASCII letters"]!)).toBe(true);
    expect(found("shared/t5-small.tokenizer.json", LONG_WORDS["one letter"]!)).toBe(true);
    expect(found("shared/xlm-roberta-unigram.tokenizer.json.gz", LONG_WORDS["Cyrillic"]!)).toBe(true);
    // byte-level BPE windows hold any letters (a character is several symbols: the window is 2 wider)
    expect(found("shared/roberta-base.tokenizer.json", LONG_WORDS["Cyrillic"]!)).toBe(true);
    expect(found("shared/clip-vit-base-patch32.tokenizer.json", LONG_WORDS["CJK"]!)).toBe(true);
    // a window holds one class under a regex pre-tokenizer (it splits between them), any under Metaspace; never a mark
    expect(found("shared/roberta-base.tokenizer.json", "abcd!".repeat(12_000))).toBe(false);
    expect(found("shared/xlm-roberta-unigram.tokenizer.json.gz", "abcd!".repeat(12_000))).toBe(true);
    expect(found("shared/xlm-roberta-unigram.tokenizer.json.gz", "abcd\u0301".repeat(12_000))).toBe(false);
    // numbers: one pre-token under GPT-2's ` ?\p{N}+`; cut into threes (Llama 3) or ones (Qwen, CLIP) by Split regexes
    expect(found("shared/roberta-base.tokenizer.json", LONG_WORDS.digits!)).toBe(true);
    expect(found("shared/clip-vit-base-patch32.tokenizer.json", LONG_WORDS.digits!)).toBe(false);
    expect(policy("models/qwen3-embed")?.numberRuns).toBe(false);
  });
});

// At the limit: 1,000,000 characters (--max-input-chars' default) without a space, per tokenizer kind, the inputs
// that were tokenized whole (2-12 s) before, cut on the right and (TEI's truncation_direction) on the left (Unigram
// words on the left through the model replicated: unigram.ts, more in unigram.test.ts). The server's ids against the
// whole text truncated by the library, and
// the time: the whole text costs the library 1-9 s here, the server a small part of it.
const AT_LIMIT: Record<string, LimitCase[]> = {
  "shared/bert-base-uncased.tokenizer.json": [["Cyrillic", "right"], ["emoji", "left"]],
  "shared/roberta-base.tokenizer.json": [["CJK, 20,000 ideographs", "right"], ["emoji", "left"], ["digits", "right"], ["digits", "left"]],
  "shared/clip-vit-base-patch32.tokenizer.json": [["CJK, 20,000 ideographs", "right"], ["mixed", "left"]],
  "shared/t5-small.tokenizer.json": [["CJK, 20,000 ideographs", "right"], ["Cyrillic", "right"], ["Cyrillic", "left"]],
  "shared/xlm-roberta-unigram.tokenizer.json.gz": [["CJK, 20,000 ideographs", "right"], ["mixed", "right"]],
};
describe.skipIf(!existsSync(SHARED))("1,000,000 characters without a space, real published tokenizers", () => {
  for (const [name, kinds] of Object.entries(AT_LIMIT)) test(`${name} (timed in a fresh process: at-limit.ts)`, () => expectAtLimit(name, kinds));
});

// The Qwen3 / Qwen2.5 pipeline (NFC; Split with Qwen's regex, numbers one by one; byte-level BPE; added tokens,
// here also the letters-only yes / no of the reranker fixtures): 1,000,000 characters of each kind, both directions,
// ids identical to the library's whole-text truncation and a fraction of its time (in a fresh process: at-limit.ts).
// The five fixtures share two tokenizer.json files: every input on the first of each, one on the others.
const QWEN3_LIMIT = ["one letter", "ASCII letters", "CJK", "mixed", "words, then one letter", "digits", "prose", "letters of the added tokens yes / no"];
describe("1,000,000 characters, Qwen3 fixtures (Split regex, byte-level BPE; timed in a fresh process: at-limit.ts)", () => {
  for (const name of ["qwen3-embed", "qwen3-embed-qdrant", "qwen3-rerank", "qwen3-rerank-keep", "qwen3-rerank-seq-cls"]) {
    const kinds = name === "qwen3-embed" || name === "qwen3-rerank" ? QWEN3_LIMIT : QWEN3_LIMIT.slice(0, 1);
    test(name, () => expectAtLimit(`models/${name}`, kinds.flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[])), 600_000);
  }
});

// Around the cut: texts of Qwen3's awkward pieces (whitespace runs before letters and digits, newlines after
// punctuation, contractions, NFC-composable sequences, added tokens, Unicode 16 letters) long enough to be cut,
// at lengths that move the cut, against the library (test/tokenize/prefix.test.ts checks every cut point itself).
const AROUND_CUT = ["  ", " ", "\n", "\r\n", "\t", "'s", "'LL", "'", "1", "23", "!", "?!\n", "..", "a", "bc", "DEF", "日本", "😀", "é", "e\u0301", "\u0301", "A\u030a", "\u1100\u1161", "\u0085  ", "\u00a0", "\u3000", "\u{10940}", "yes", "no", "<|im_end|>", "<|endoftext|>"];
describe("Qwen3 texts cut near their awkward pieces, identical to the whole text truncated", () => {
  for (const maxLength of [61, 512, 2048, 4097]) {
    test(`max length ${maxLength}`, async () => {
      const inputs: Record<string, string> = {};
      for (let seed = 1; seed <= 6; seed++) inputs[`seed ${seed}`] = textOfPieces(AROUND_CUT, seed * 7919 + maxLength, 40_000);
      inputs["spaces before the cut"] = "word ".repeat(3276) + " ".repeat(200) + "tail".repeat(5_000);
      inputs["digits and apostrophes"] = "it's 1234567890's ".repeat(3_000);
      await checkLongWords("models/qwen3-embed", maxLength, inputs);
    }, 120_000);
  }
});
