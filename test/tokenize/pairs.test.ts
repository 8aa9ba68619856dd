// Pairs (a /rerank query and document, a pair classifier's input): truncated longest-first as the Rust library does,
// its compared lengths counted up to the end of the word holding the max-th token (encode.ts countedLength). Members
// that are one long word are tokenized whole; long members with spaces are cut (src/tokenize/cut.ts). Against the
// library's own truncation of the whole pair (test/helpers.ts libraryPairTruncated, checked below against
// setTruncation(max, LongestFirst) where that is cheap): ids and token type ids.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../../src/tokenize/encode";
import { SHARED_TOKENIZERS as SHARED, libraryPairTruncated, textOfPieces, tokenizerText } from "../helpers";
import { letters } from "../../bench/workload";

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
/** Long members with spaces, which are cut: words of every length around a few long ones. */
const PROSE = textOfPieces(["hello ", "world, ", "the ", "cat ", "sat ", "on ", "mat. ", "\n", "antidisestablishment ", "日本語 ", "😀 "], 11, 40_000);
const PROSE_LONG_WORDS = textOfPieces(["a ", "b ", letters(900, "abcdefgh", 2) + " ", "x\n"], 12, 40_000);

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
  // long members with spaces (cut), before and after words and long words
  firsts.push(PROSE, "what is this?", PROSE_LONG_WORDS, others[3]!, PROSE, WORD);
  seconds.push("what is this?", PROSE, others[5]!, PROSE_LONG_WORDS, PROSE_LONG_WORDS, PROSE);
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

const FIXTURE_KINDS = ["models/roberta-cls", "models/xlmr-max", "models/deberta-rerank"];
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

describe("pairs with long members: identical to the library's longest-first truncation", () => {
  // odd and even budgets (the odd token of halves)
  for (const name of FIXTURE_KINDS) for (const max of [509, 512]) test(`${name}, max ${max}`, () => checkPairs(name, max));
});

describe.skipIf(!existsSync(SHARED))("pairs with a long-word member, real published tokenizers", () => {
  for (const [i, name] of SHARED_KINDS.entries()) test(`${name}, max ${509 + (i % 2) * 3}`, () => checkPairs(name, 509 + (i % 2) * 3));
});
