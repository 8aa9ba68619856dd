// Long whitespace runs (src/tokenize/prefix.ts whitespaceRules): shortened where the pipeline drops whitespace
// (BERT, WhitespaceSplit) or collapses a run into one space (CLIP's `\s+`, the SentencePiece exports' ` {2,}`), and a
// space after whitespace taken as a cut where Metaspace splits and the whitespace before it stays apart. Ids must be
// the library's on the whole text, truncated (right, left and as a pair member), for every tokenizer here; texts of
// whitespace of every kind the library counts, around words, marks, Prepend characters and added tokens.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "tokenizers";
import { cutPolicy, shortenSpaceRuns, whitespaceRules, type WhitespaceRules } from "../../src/tokenize/prefix";
import { FIXTURES, SHARED_TOKENIZERS, describeLikeLibrary, expectLibraryIds, textOfPieces, tokenizerText } from "../helpers";
import { expectAtLimit, type LimitCase } from "./at-limit";

const SHARED = ["bert-base-uncased.tokenizer.json", "roberta-base.tokenizer.json", "clip-vit-base-patch32.tokenizer.json", "t5-small.tokenizer.json", "xlm-roberta-unigram.tokenizer.json.gz"];
/** Every fixture's tokenizer.json once (several fixtures share one file). */
function fixtureNames(): string[] {
  const seen = new Set<string>();
  const names: string[] = [];
  for (const dir of readdirSync(FIXTURES).sort()) {
    const text = existsSync(join(FIXTURES, dir, "tokenizer.json")) ? tokenizerText(`models/${dir}`) : null;
    if (text === null || seen.has(text)) continue;
    seen.add(text);
    names.push(`models/${dir}`);
  }
  return names;
}
const NAMES = [...(existsSync(SHARED_TOKENIZERS) ? SHARED.map((f) => `shared/${f}`) : []), ...fixtureNames()];

/** Every character the library counts as whitespace, runs of them, and what may stand next to a run. */
const WHITESPACE = ["\t", "\n", "\v", "\f", "\r", " ", "\u0085", "\u00a0", "\u1680", "\u2000", "\u2003", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"];
const PIECES = [
  ...WHITESPACE,
  ...WHITESPACE.map((w) => w.repeat(5)),
  "  ",
  " ".repeat(41),
  "\n".repeat(23),
  "\r\n",
  " \n".repeat(11),
  "\u3000 ".repeat(7),
  "\n ".repeat(9),
  "a",
  "word",
  "Word",
  "日本",
  "é",
  "e\u0301",
  "\u0301",
  "!",
  "12",
  "\u200b",
  "\u0600",
  "😀",
  "</s>",
  "[SEP]",
];
const LONG = 24_000;

function inputs(seed: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let k = 0; k < 3; k++) out[`pieces, seed ${seed + k}`] = textOfPieces(PIECES, seed * 7919 + k, LONG);
  out.spaces = " ".repeat(LONG);
  out["space, newline"] = " \n".repeat(LONG / 2);
  out["ideographic space, space"] = "\u3000 ".repeat(LONG / 2);
  out["newline, space, tab"] = "\n \t".repeat(LONG / 3);
  out["words, then spaces"] = "hello world ".repeat(100) + " ".repeat(LONG);
  out["spaces, then words"] = " ".repeat(LONG) + "hello world ".repeat(100);
  out["words in runs of whitespace"] = textOfPieces(["word", " ".repeat(300), "\n\n\n\n", "\t \t", "é\u0301"], seed, LONG);
  return out;
}

describeLikeLibrary("long whitespace runs", NAMES, inputs);

/** whitespaceRules of a tokenizer.json, from the library's own normaliser and pre-tokenizer; null when it has no shape. */
function whitespaceRulesOf(json: string): WhitespaceRules | null {
  const shape = cutPolicy(JSON.parse(json))?.whitespace ?? null;
  if (!shape) return null;
  const rust = Tokenizer.fromString(json);
  const n = rust.getNormalizer();
  const p = rust.getPreTokenizer();
  return whitespaceRules(shape, (s) => (n === null ? s : n.normalizeString(s)), (s) => (p === null ? [s] : p.preTokenizeString(s).map(([x]) => x)));
}
const rules = whitespaceRulesOf;
const runOf = (r: WhitespaceRules | null, ch: string) => r?.runs !== null && r?.runs !== undefined && new RegExp(`^(?:${r.runs.source})$`).test(ch.repeat(3));
const CONTENT = { addSpecialTokens: false } as const;

describe("what each pipeline's whitespace allows (whitespaceRules, read from the library's normaliser and pre-tokenizer)", () => {
  const rules = (name: string) => whitespaceRulesOf(tokenizerText(name)!);

  test("byte-level BPE keeps every whitespace character: no rule (its runs are tokens)", () => {
    for (const name of ["models/roberta-cls", "models/qwen3-embed", "models/clap"]) expect([name, rules(name)]).toEqual([name, null]);
  });

  test("BERT drops whitespace: runs of it shortened, a space after it is a cut", () => {
    const r = rules("models/bert-mean-norm");
    for (const ch of [" ", "\t", "\n", "\r", "\u3000", "\u00a0"]) expect([ch, runOf(r, ch), r?.after?.has(ch) ?? false]).toEqual([ch, true, true]);
  });

  test("Metaspace behind NFKC and ` {2,}`: only what becomes a space runs; a space after a line break or tab is a cut", () => {
    const r = rules("models/gemma-embed");
    for (const ch of [" ", "\u3000", "\u00a0"]) expect([ch, runOf(r, ch)]).toEqual([ch, true]);
    for (const ch of ["\n", "\t", "\r"]) expect([ch, runOf(r, ch), r?.after?.has(ch)]).toEqual([ch, false, true]);
    // NFKC makes U+3000 a space, which ` {2,}` joins to the space after it
    expect(r?.after?.has("\u3000")).toBe(false);
  });
});

describe("added tokens that hold whitespace: runs are shortened where each holds single spaces between other characters", () => {
  /** colbert-pylate's tokenizer (BERT with PyLate's normalised "[Q] " and "[D] ") with one more added token. */
  const withToken = (content: string, normalized: boolean): string => {
    const tj = JSON.parse(tokenizerText("models/colbert-pylate")!);
    const id = Math.max(...tj.added_tokens.map((t: { id: number }) => t.id)) + 1;
    tj.added_tokens.push({ id, content, single_word: false, lstrip: false, rstrip: false, normalized, special: false });
    return JSON.stringify(tj);
  };
  const JSONS: Record<string, () => string> = {
    "colbert-pylate": () => tokenizerText("models/colbert-pylate")!,
    "a raw token with a leading space": () => withToken(" [X]", false),
    "a token with two spaces inside": () => withToken("x  y", true),
    "a raw token of a space between letters": () => withToken("x\ty", false),
  };
  const runsOf = (json: string) => {
    const rust = Tokenizer.fromString(json);
    const n = rust.getNormalizer()!;
    const p = rust.getPreTokenizer()!;
    const shape = cutPolicy(JSON.parse(json))?.whitespace ?? null;
    return shape && whitespaceRules(shape, (s) => n.normalizeString(s), (s) => p.preTokenizeString(s).map(([x]) => x)).runs;
  };

  test("which added tokens allow runs", () => {
    expect(Object.entries(JSONS).map(([k, j]) => [k, runsOf(j()) !== null])).toEqual([
      ["colbert-pylate", true],
      ["a raw token with a leading space", true],
      // "x" and "y" around a run of three spaces or more do not match it; around the run shortened to two they would
      ["a token with two spaces inside", false],
      ["a raw token of a space between letters", true],
    ]);
  });

  const PIECES_SPACED = ["[Q] ", "[D] ", "[Q]", "[q]", " [X]", "[X]", "x  y", "x", "y", "x\ty", "\t", " ", "  ", " ".repeat(7), "\n".repeat(5), "\u3000".repeat(3), "word", "hello world"];
  for (const [label, json] of Object.entries(JSONS)) {
    test(`ids identical to the library's whole text, truncated: ${label}`, async () => {
      const inputs: Record<string, string> = {};
      for (let k = 0; k < 4; k++) inputs[`pieces ${k}`] = textOfPieces(PIECES_SPACED, 7 + 31 * k, LONG);
      inputs["[Q] then spaces"] = "[Q]" + " ".repeat(LONG);
      inputs["spaces then [X]"] = " ".repeat(LONG) + "[X] word";
      inputs["x, spaces, y"] = "x" + " ".repeat(LONG) + "y";
      for (const maxLength of [64, 512]) await expectLibraryIds(`${label} ${maxLength}`, json(), maxLength, inputs);
    }, 120_000);
  }
});

// SentencePiece's Precompiled maps (t5-small, xlm-roberta): grapheme-cluster Control characters it maps to a space
// (U+200B, U+FEFF) run like whitespace behind WhitespaceSplit; those it removes (C0 controls) are shortened whatever
// the pre-tokenizer. Every shortening of fuzzed texts (runs among letters, marks, jamo, flags, spaces and added
// tokens) against the library's ids of the text as it is.
describe("runs of controls and format characters under Precompiled (shortened texts against the whole ones)", () => {
  const CONTROL_PIECES = [
    "\u200b", "\ufeff", "\u0001", "\u0007", "\u001f", "\u000b", "\u200b\u200b\u200b", "\u0001\u0002\u0003\u0004", "\ufeff\u200b\ufeff",
    "\u0001".repeat(5), "\u200b".repeat(7), "\u00ad", "\u2060", "\u200d", "\u200c", "a", "b", "word", "\u0301", "a\u0301", "\u0308",
    "\u1100", "\u1161", "🇺🇸", "🇺", "\u0600", " ", "  ", "\n", "\t", "</s>", "<extra_id_1>", "<s>", "▁",
  ];
  for (const name of ["shared/t5-small.tokenizer.json", "shared/xlm-roberta-unigram.tokenizer.json.gz"]) {
    test.skipIf(tokenizerText(name) === null)(name, async () => {
      const json = tokenizerText(name)!;
      const r = rules(json)!;
      for (const ch of ["\u200b", "\ufeff"]) expect([ch, runOf(r, ch)]).toEqual([ch, true]);
      for (const ch of ["\u0001", "\u0007", "\u001f", "\u000b"]) expect([ch, r.vanish !== null && new RegExp(`^(?:${r.vanish.source})$`).test(ch.repeat(3))]).toEqual([ch, true]);
      // a zero-width joiner extends the cluster before it, a soft hyphen and U+2060 stay: none of these is shortened
      for (const ch of ["\u200d", "\u00ad", "\u2060"]) expect([ch, runOf(r, ch) || (r.vanish !== null && new RegExp(`^(?:${r.vanish.source})$`).test(ch.repeat(3)))]).toEqual([ch, false]);
      const rust = Tokenizer.fromString(json);
      let shortened = 0;
      for (let i = 0; i < 200; i++) {
        const text = textOfPieces(CONTROL_PIECES, 9100 + i, 40 + ((i * 53) % 300));
        const short = shortenSpaceRuns(shortenSpaceRuns(text, r.runs!), r.vanish!);
        if (short === text) continue;
        shortened++;
        const [a, b] = await Promise.all([rust.encode(text, null, CONTENT), rust.encode(short, null, CONTENT)]);
        expect([name, JSON.stringify(text), b.getIds()]).toEqual([name, JSON.stringify(text), a.getIds()]);
      }
      expect(shortened).toBeGreaterThan(150);
    }, 120_000);
  }
});

// At the limit: 1,000,000 characters of whitespace, timed in a fresh process against the library (at-limit.ts).
const WHITESPACE_LIMIT: Record<string, string[]> = {
  "models/bert-mean-norm": ["spaces", "space, newline", "mixed whitespace", "spaces, then words"],
  "models/xlmr-max": ["spaces", "space, newline", "mixed whitespace", "words, then spaces"],
  "models/gemma-embed": ["spaces", "space, newline", "mixed whitespace", "spaces, then words"],
  "models/clip": ["spaces", "mixed whitespace", "words, then spaces"],
  "models/colbert-pylate": ["spaces", "space, newline", "mixed whitespace", "words, then spaces"],
  ...(existsSync(SHARED_TOKENIZERS) ? { "shared/t5-small.tokenizer.json": ["zero-width spaces", "byte-order marks", "controls"], "shared/xlm-roberta-unigram.tokenizer.json.gz": ["zero-width spaces", "byte-order marks", "controls"] } : {}),
};
describe("1,000,000 characters of whitespace (timed in a fresh process: at-limit.ts)", () => {
  for (const [name, kinds] of Object.entries(WHITESPACE_LIMIT)) {
    test(name, () => expectAtLimit(name, kinds.flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[])), 600_000);
  }
});
