// Pairs whose members both end, at their max-th token, inside one long word (a query and a document without spaces)
// with an odd budget: the odd token of the halves goes to the member whose counted length (tokens up to the end of
// the word holding its max-th token) is larger, so the Encoder counts both long words exactly without tokenizing
// the texts whole (encode.ts countedExactly: the Unigram replica's path, byte-level BPE cut at proven boundaries).
// Grids of word lengths around the decision (either member longer by a few characters, equal texts), against the
// library's own truncation of the whole pair (test/helpers.ts libraryPairTruncated, checked against the library's
// truncation in pairs.test.ts): ids and type ids.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../../src/tokenize/encode";
import { SHARED_TOKENIZERS as SHARED, libraryPairTruncated, tokenizerText } from "../helpers";
import { letters } from "../../bench/workload";
import { cutPolicy } from "../../src/tokenize/prefix";
import { EMOJI, expectAtLimit, type LimitCase } from "./at-limit";

const AZ = "abcdefghijklmnopqrstuvwxyz";
const CYRILLIC = "абвгдеёжзийклмнопрст";

/** The Encoder of max length 512 or 511 whose pair budget (max length less the pair's special tokens) is odd. */
async function oddEncoder(json: string): Promise<{ encoder: Encoder; budget: number }> {
  for (const max of [512, 511]) {
    const encoder = await Encoder.create(JSON.parse(json), {}, max);
    const rust = Tokenizer.fromString(json);
    const specials = (await rust.encode("a", "b", { addSpecialTokens: true })).getLength() - (await rust.encode("a", "b", { addSpecialTokens: false })).getLength();
    if ((max - specials) % 2 === 1) return { encoder, budget: max - specials };
  }
  throw new Error("no odd budget");
}

/**
 * Each pair through the Encoder (one batch) and through the library; every one of them must have been decided by
 * exact counts (pairDecisions), none tokenized whole, and the replicas never disagree with the library.
 */
async function expectPairs(name: string, pairs: Array<[string, string]>): Promise<void> {
  const json = tokenizerText(name)!;
  const { encoder, budget } = await oddEncoder(json);
  const rust = Tokenizer.fromString(json);
  rust.disablePadding();
  const got = await encoder.encodeBatch(pairs.map((p) => p[1]), pairs.map((p) => p[0]));
  const kept = new Set<string>();
  for (const [i, [a, b]] of pairs.entries()) {
    const want = await libraryPairTruncated(rust, encoder.maxLength, a, b);
    const label = `${name} max ${encoder.maxLength} pair ${i} (${a.length} / ${b.length} chars)`;
    expect([label, Array.from(got[i]!.ids), Array.from(got[i]!.typeIds!)]).toEqual([label, want.ids, want.types]);
    // which member kept the odd token: the first's ids run on past half the budget
    const first = (await rust.encode(a, null, { addSpecialTokens: false })).getIds();
    const at = want.ids.findIndex((_, k) => first.slice(0, 4).every((id, j) => want.ids[k + j] === id));
    const half = (budget - 1) / 2;
    kept.add(want.ids[at + half] === first[half] ? "first" : "second");
  }
  // each member's counted length is the library's (a wrong count could still pick the same side)
  for (const text of new Set(pairs.flat())) {
    const e = await rust.encode(text, null, { addSpecialTokens: false });
    const words = e.getWordIds();
    let k = encoder.maxLength - 1;
    while (k + 1 < words.length && words[k + 1] === words[k]) k++;
    expect([name, text.length, await encoder.pairMemberLength(text)]).toEqual([name, text.length, { n: k + 1, atLeast: false }]);
  }
  // both sides of the odd token were seen
  expect([name, kept.size]).toEqual([name, 2]);
  expect([name, encoder.pairDecisions]).toEqual([name, { counted: pairs.length, whole: 0 }]);

  expect([name, encoder.wordPathChecks.differ]).toEqual([name, 0]);
}

/**
 * Prefixes of one long word a few characters apart, each way round, and the same text twice (equal counts: the
 * first member is the shorter), of `chars` characters or so; a word of other letters; words before the long word.
 */
function grid(word: string, other: string, chars: number): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  const base = word.slice(0, chars);
  for (const d of [-3, -2, -1, 0, 1, 2, 3]) {
    const near = word.slice(0, chars + d);
    pairs.push([base, near], [near, base]);
  }
  pairs.push([base, other.slice(0, chars)], [other.slice(0, chars), base]);
  const lead = "hello world ".repeat(30) + word.slice(0, chars - 360);
  pairs.push([lead, base.slice(0, chars - 1)], [base.slice(0, chars - 1), lead]);
  // a long run of spaces first (shortened before tokenizing where the pipeline collapses it: the counts go on in the
  // shortened text)
  const spaced = "hello" + " ".repeat(300) + word.slice(0, chars - 300);
  pairs.push([spaced, base.slice(0, chars - 2)], [base.slice(0, chars - 2), spaced]);
  return pairs;
}

const WORD = letters(120_000, AZ, 1);
const OTHER = letters(120_000, AZ, 2);
const CYR = letters(120_000, CYRILLIC, 3);
const EMOJIS = letters(70_000, EMOJI, 9);

const BPE = ["models/roberta-cls", "models/clap", "models/clip"];
const UNIGRAM = ["models/deberta-rerank", "models/jina-v3", "models/xlmr-max"];
const SHARED_KINDS = ["shared/roberta-base.tokenizer.json", "shared/clip-vit-base-patch32.tokenizer.json", "shared/t5-small.tokenizer.json", "shared/xlm-roberta-unigram.tokenizer.json.gz"];

describe("two long-word members, odd budget: exact counts decide the odd token", () => {
  // 20,000 characters: past the 16,384 a text is tokenized whole below, so both are cut inside their words
  for (const name of [...BPE, ...UNIGRAM]) {
    test(`${name}: letters, prefixes a few characters apart`, () => expectPairs(name, grid(WORD, OTHER, 20_000)));
    test(`${name}: Cyrillic`, () => expectPairs(name, grid(CYR, WORD, 20_000).slice(0, 6)));
  }
  // 70,000 characters: byte-level BPE words cut at a proven boundary (one every 32,768 characters; printable ASCII
  // through tokenWindow, other characters through wordPrefixWindow), astral characters too
  for (const name of BPE) {
    test(`${name}: words cut at proven boundaries`, () => expectPairs(name, [...grid(WORD, OTHER, 70_000).slice(5, 10), ...grid(CYR, WORD, 70_000).slice(6, 8), [EMOJIS.slice(0, 69_998), EMOJIS.slice(0, 70_000)], [EMOJIS.slice(0, 70_000), EMOJIS.slice(0, 69_998)]]));
  }
});

// WhitespaceSplit drops whitespace, so a run of 20,000 spaces is shortened before tokenizing: the long word after it
// is counted in the shortened text (where the cut ends), not at the same index of the input
const SPACED = "hello" + " ".repeat(20_000) + WORD.slice(0, 20_000);
const SPACED_PAIRS: Array<[string, string]> = [[SPACED, WORD.slice(0, 20_003)], [WORD.slice(0, 20_003), SPACED], [SPACED, WORD.slice(0, 19_990)], [WORD.slice(0, 19_990), SPACED]];
test("models/xlmr-max: a long run of spaces before the word", () => expectPairs("models/xlmr-max", SPACED_PAIRS));

describe.skipIf(!existsSync(SHARED))("two long-word members, odd budget, real published tokenizers", () => {
  test("shared/t5-small.tokenizer.json: a long run of spaces before the word", () => expectPairs("shared/t5-small.tokenizer.json", SPACED_PAIRS));
  for (const name of SHARED_KINDS) test(`${name}: letters, prefixes a few characters apart`, () => expectPairs(name, grid(WORD, OTHER, 20_000).slice(0, 8)));
  for (const name of SHARED_KINDS.slice(0, 2)) test(`${name}: words cut at proven boundaries`, () => expectPairs(name, grid(WORD, OTHER, 100_000).slice(4, 10)));
});

// At the limit: two 1,000,000-character words (a query and a document without spaces), max length 512 and 511 (an
// even and an odd budget with every template here), timed in a fresh process (at-limit.ts) against the library's
// truncation of the whole pair. Byte-level BPE counts both words' tokens (in parts, on the binding's threads): about
// 0.4 of the library's CPU time, 0.25-0.5 of its wall time on two busy cores, so those cases are held to half; the
// Unigram replica and WordPiece (one [UNK] per long word) to a quarter.
const TWO_WORDS: LimitCase[] = [["letters a-z", "pair", "letters a-z, another"], ["letters a-z", "pair", "letters a-z"]];
describe.skipIf(!existsSync(SHARED))("two 1,000,000-character one-word members in a pair", () => {
  for (const name of ["shared/roberta-base.tokenizer.json", "shared/clip-vit-base-patch32.tokenizer.json", "shared/t5-small.tokenizer.json", "shared/xlm-roberta-unigram.tokenizer.json.gz", "shared/bert-base-uncased.tokenizer.json"]) {
    const bpe = cutPolicy(JSON.parse(tokenizerText(name) ?? "{}"))?.inWord?.model === "bpe-bytes";
    for (const max of [512, 511]) test(`${name}, max ${max} (timed in a fresh process: at-limit.ts)`, () => expectAtLimit(name, TWO_WORDS, max, bpe ? 1 / 2 : 1 / 4));
  }
});
