// Pairs whose member is one long word (a /rerank document or a pair classifier input without spaces): the member is
// cut inside the word (in-word windows, src/tokenize/prefix.ts), so the length the library compares for
// longest-first (tokens up to the end of the word holding the max-th: encode.ts, countedLength) is only known as a
// lower bound. That decides the pair wherever every length the bound allows gives the same kept lengths
// (longestFirstBounded: always for an even budget); the others (odd budgets) are counted further or tokenized whole. Against the Rust library's own truncation of the whole pair (its
// encoding of the whole pair, cut by its longest-first rule: test/helpers.ts libraryPairTruncated, checked below
// against setTruncation(max, LongestFirst) on encode(first, second) where that is cheap): ids and token type ids.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { Tokenizer } from "tokenizers";
import { Encoder, longestFirst, longestFirstBounded, type Counted } from "../../src/tokenize/encode";
import { cutPolicy } from "../../src/tokenize/prefix";
import { SHARED_TOKENIZERS as SHARED, libraryPairTruncated, tokenizerText } from "../helpers";
import { letters } from "../../bench/workload";
import { expectAtLimit } from "./at-limit";


describe("longest-first with lower bounds", () => {
  test("decides exactly when every length the bounds allow gives the same kept lengths", () => {
    // every true length from the bound up to the bound + SPAN: past max(other, budget) longestFirst no longer changes
    // with a bounded length, and SPAN reaches past that (both orders of two bounded members included), so the
    // outcomes seen here are all the outcomes the bounds allow
    const TOP = 24;
    const SPAN = 30;
    let decided = 0;
    let open = 0;
    for (let budget = 0; budget <= 16; budget++) {
      for (let x = 0; x <= TOP; x++) {
        for (let y = 0; y <= TOP; y++) {
          for (const [ax, ay] of [[false, false], [false, true], [true, false], [true, true]] as const) {
            const got = longestFirstBounded({ n: x, atLeast: ax }, { n: y, atLeast: ay }, budget);
            const outcomes = new Set<number>();
            for (let dx = 0; dx <= (ax ? SPAN : 0); dx++) {
              for (let dy = 0; dy <= (ay ? SPAN : 0); dy++) {
                const [kx, ky] = longestFirst(x + dx, y + dy, budget);
                outcomes.add(kx * 1000 + ky);
              }
            }
            const label = `budget ${budget}, ${x}${ax ? "+" : ""} / ${y}${ay ? "+" : ""}`;
            // the kept lengths where every allowed length gives the same, null (open) exactly where they differ
            const only = outcomes.size === 1 ? [...outcomes][0]! : null;
            const want: [number, number] | null = only === null ? null : [Math.floor(only / 1000), only % 1000];
            expect([label, got]).toEqual([label, want]);
            if (ax || ay) got ? decided++ : open++;
          }
        }
      }
    }
    // both kinds occur among the bounded cases
    expect(decided).toBeGreaterThan(17 * 25 * 25);
    expect(open).toBeGreaterThan(17 * 25 * 25);
  });

  test("a short exact member and a bound at the budget (no special tokens: colpali's budget is its max length)", () => {
    // any length at least 512 gives [6, 506]: decided, not tokenized whole
    expect(longestFirstBounded({ n: 6, atLeast: false }, { n: 512, atLeast: true }, 512)).toEqual([6, 506]);
    expect(longestFirstBounded({ n: 512, atLeast: true }, { n: 6, atLeast: false }, 512)).toEqual([506, 6]);
    expect(longestFirstBounded({ n: 6, atLeast: false }, { n: 506, atLeast: true }, 512)).toEqual([6, 506]);
    // 505 + 6 may stay under the budget (both kept whole)
    expect(longestFirstBounded({ n: 6, atLeast: false }, { n: 505, atLeast: true }, 512)).toBeNull();
    // an odd budget with the bound at the exact count: a tie keeps the first the shorter, so a bounded second decides
    // ([256, 257] for every length at least 257) and a bounded first does not (257: [256, 257]; 258: [257, 256])
    expect(longestFirstBounded({ n: 257, atLeast: false }, { n: 257, atLeast: true }, 513)).toEqual([256, 257]);
    expect(longestFirstBounded({ n: 257, atLeast: true }, { n: 257, atLeast: false }, 513)).toBeNull();
    expect(longestFirstBounded({ n: 258, atLeast: true }, { n: 257, atLeast: false }, 513)).toEqual([257, 256]);
    // even budgets: halves are the same either way round once both members hold half
    expect(longestFirstBounded({ n: 601, atLeast: false }, { n: 600, atLeast: true }, 508)).toEqual([254, 254]);
    expect(longestFirstBounded({ n: 254, atLeast: true }, { n: 254, atLeast: true }, 508)).toEqual([254, 254]);
    expect(longestFirstBounded({ n: 253, atLeast: true }, { n: 254, atLeast: true }, 508)).toBeNull();
  });

  test("the usual /rerank case: a short exact query and a long bounded document", () => {
    expect(longestFirstBounded({ n: 10, atLeast: false }, { n: 600, atLeast: true }, 509)).toEqual([10, 499]);
    expect(longestFirstBounded({ n: 600, atLeast: true }, { n: 254, atLeast: false }, 509)).toEqual([255, 254]);
    expect(longestFirstBounded({ n: 255, atLeast: false }, { n: 600, atLeast: true }, 509)).toEqual([254, 255]);
    // both bounded: halves; the odd token is open for an odd budget only
    expect(longestFirstBounded({ n: 600, atLeast: true }, { n: 700, atLeast: true }, 508)).toEqual([254, 254]);
    expect(longestFirstBounded({ n: 600, atLeast: true }, { n: 700, atLeast: true }, 509)).toBeNull();
    // an exact count over the bound, or the second one at it: which is longer is open (ties keep the first shorter)
    expect(longestFirstBounded({ n: 601, atLeast: false }, { n: 600, atLeast: true }, 509)).toBeNull();
    expect(longestFirstBounded({ n: 600, atLeast: true }, { n: 600, atLeast: false }, 509)).toBeNull();
    expect(longestFirstBounded({ n: 600, atLeast: false }, { n: 600, atLeast: true }, 509)).toEqual([254, 255]);
  });
});

const rust = new Map<string, Tokenizer>();
async function rustPair(name: string, maxLength: number, a: string, b: string) {
  let t = rust.get(name);
  if (!t) {
    t = Tokenizer.fromString(tokenizerText(name)!);
    t.disablePadding();
    rust.set(name, t);
  }
  return libraryPairTruncated(t, maxLength, a, b);
}

/** Words ("hello", then "world", ...) making a text of exactly `tokens` content tokens where one is found. */
async function wordsOf(name: string, tokens: number): Promise<string> {
  const t = rust.get(name) ?? Tokenizer.fromString(tokenizerText(name)!);
  rust.set(name, t);
  t.disableTruncation();
  const vocab = ["hello", "world", "the", "cat", "sat", "on", "mat"];
  let text = "";
  for (let i = 0; ; i++) {
    const next = text + (i ? " " : "") + vocab[i % vocab.length];
    if ((await t.encode(next, null, { addSpecialTokens: false })).getLength() > tokens) return text;
    text = next;
  }
}

// A long word is 17,000 characters here (past the 16,384 a text is tokenized whole below): the library's own pair
// truncation builds every overflowing piece of both members (pieces of one x pieces of the other), which for two
// such words takes seconds and gigabytes at small max lengths, so they stay this short and the max length real.
const WORD = letters(17_000, "abcdefghijklmnopqrstuvwxyz", 1);
const CYRILLIC = letters(17_000, "абвгдеёжзийклмнопрст", 3);

async function checkPairs(name: string, maxLength: number): Promise<void> {
  const encoder = await Encoder.create(JSON.parse(tokenizerText(name)!), {}, maxLength);
  const specials = (await encoder.encodePair("a", "b")).ids.length - (await encoder.countContent("a")) - (await encoder.countContent("b"));
  const half = Math.floor((maxLength - specials) / 2);
  const others: string[] = ["what is this?"];
  // the other member's length around where the odd token of a halved budget flips, and around the max length
  for (const k of [half - 2, half - 1, half, half + 1, half + 2, maxLength - 2, maxLength + 1]) others.push(await wordsOf(name, k));
  // words, then one long word: the max-th token in the long word, or before it
  const firsts: string[] = [];
  const seconds: string[] = [];
  for (const other of others) {
    firsts.push(other, WORD);
    seconds.push(WORD, other);
  }
  // words then a long word; words past the max length, then one; a whole first member whose count (its max-th token
  // in a word of 6,000 letters) is past the document's bound (the document is cut further); both members long words
  // (the same first tokens, the first member longer: its window's count ties with the second's but the word is longer)
  firsts.push("hello world ".repeat(20) + WORD, "hello world ".repeat(maxLength) + WORD, "hello ".repeat(maxLength - 20) + WORD.slice(0, 6000), WORD, WORD, WORD + WORD.slice(0, 3000));
  seconds.push("what is this?", WORD, WORD, CYRILLIC, WORD + "x", WORD);
  const got = await encoder.encodeBatch(seconds, firsts);
  for (let i = 0; i < firsts.length; i++) {
    const want = await rustPair(name, maxLength, firsts[i]!, seconds[i]!);
    const label = `${name} max ${maxLength} pair ${i} (${firsts[i]!.length} / ${seconds[i]!.length} chars)`;
    expect([label, Array.from(got[i]!.ids), Array.from(got[i]!.typeIds ?? new Int32Array(got[i]!.ids.length))]).toEqual([label, want.ids, want.types]);
    // every one of these pairs is over the max length
    expect([label, got[i]!.fullLength! > maxLength]).toEqual([label, true]);
  }
}

const FIXTURE_KINDS = ["models/roberta-cls", "models/clip", "models/xlmr-max", "models/jina-v3", "models/deberta-rerank"];
const SHARED_KINDS = ["shared/roberta-base.tokenizer.json", "shared/clip-vit-base-patch32.tokenizer.json", "shared/t5-small.tokenizer.json", "shared/xlm-roberta-unigram.tokenizer.json.gz"];

// The reference: the library's own pair truncation builds every combination of both members' overflowing pieces,
// gigabytes for two long members, so the tests cut the library's whole-pair encoding by its rule. Here both are
// run where that is cheap, on every length split around the budget, both directions, odd and even budgets.
test("the reference (libraryPairTruncated) is the library's own truncation", async () => {
  const words = (n: number, w: string) => Array.from({ length: n }, () => w).join(" ");
  for (const [name, a, b] of [["models/roberta-cls", "y", "y"], ["models/roberta-cls", "hello", "world"], ["models/bert-rerank", "x", "y"], ["models/bert-rerank", "hello", "world"], ["models/xlmr-max", "hello", "world"]] as const) {
    const rust = Tokenizer.fromString(tokenizerText(name)!);
    rust.disablePadding();
    for (const max of [12, 13]) {
      for (const direction of ["right", "left"] as const) {
        for (let na = 1; na <= 16; na += 1) {
          for (const nb of [1, 4, 5, 9, 11, 12, 13, 14, 16]) {
            const [ta, tb] = [words(na, a), words(nb, b)];
            const got = await libraryPairTruncated(rust, max, ta, tb, direction);
            rust.setTruncation(max, { strategy: "LongestFirst" as never, direction: direction as never });
            const e = await rust.encode(ta, tb, { addSpecialTokens: true });
            expect([name, a, max, direction, na, nb, got.ids, got.types]).toEqual([name, a, max, direction, na, nb, e.getIds(), e.getTypeIds()]);
          }
        }
      }
    }
  }
});

describe("pairs with a long-word member: identical to the library's longest-first truncation", () => {
  test("every kind here cuts inside words (in-word windows)", () => {
    for (const name of [...FIXTURE_KINDS, ...SHARED_KINDS]) {
      const text = tokenizerText(name);
      if (text) expect([name, cutPolicy(JSON.parse(text))?.inWord?.model ?? null]).not.toEqual([name, null]);
    }
  });
  // odd and even budgets (the odd token of halves)
  for (const name of FIXTURE_KINDS) for (const max of [509, 512]) test(`${name}, max ${max}`, () => checkPairs(name, max));
});

describe.skipIf(!existsSync(SHARED))("pairs with a long-word member, real published tokenizers", () => {
  for (const name of SHARED_KINDS) for (const max of [509, 512]) test(`${name}, max ${max}`, () => checkPairs(name, max));
});

// At the limit: a 1,000,000-character document without spaces with a short query, and with a query whose counted
// length is past the document's bound (a word of 3,000 letters holds the max-th token: the document is then cut
// further, not whole), against the library's truncation of the whole pair.
describe.skipIf(!existsSync(SHARED))("a 1,000,000-character one-word document in a pair", () => {
  for (const name of ["shared/roberta-base.tokenizer.json", "shared/xlm-roberta-unigram.tokenizer.json.gz"]) {
    test(`${name} (timed in a fresh process: at-limit.ts)`, () => expectAtLimit(name, [["letters a-z", "pair", "short query"], ["letters a-z", "pair", "long query"]]));
  }
});

// A pair template without special tokens (colpali): the budget is the max length itself, so a 1,000,000-character
// document cut inside its word counts at least 512 = the budget. With a short exact query every length at least that
// gives the same kept lengths (longestFirstBounded), so the pair is decided, not tokenized whole (about 1 s, as slow
// as the library, before).
describe("a pair template without special tokens, a 1,000,000-character one-word document", () => {
  test("models/colpali (timed in a fresh process: at-limit.ts)", () =>
    expectAtLimit("models/colpali", [["arabic harakat", "pair", "short query"], ["hangul jamo", "pair", "short query"]]));
});
