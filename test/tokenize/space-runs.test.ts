// Runs of whitespace under byte-level BPE (src/tokenize/prefix.ts, SpaceRunPolicy): every window spaceRunWindow
// gives in fuzzed texts of words and short and long whitespace runs, checked against the Rust library on the whole
// text. The proof says one position of a window is a boundary of the whole text's tokens, so the text before it
// (after it) has exactly the whole text's first (last) tokens: checked by ids, offsets and word ids (the pre-tokens),
// for every window; a window of one position (a forced boundary) must be that position. Then the 1,000,000-character
// whitespace inputs (test/tokenize/at-limit.ts) against the library's whole-text truncation, timed in a fresh process.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { Tokenizer } from "tokenizers";
import { cutPolicy, spaceChar, spaceRunWindow, type CutPolicy, type PieceCount } from "../../src/tokenize/prefix";
import { SHARED_TOKENIZERS, textOfPieces, tokenizerText } from "../helpers";
import { expectAtLimit, type LimitCase } from "./at-limit";

const CONTENT = { addSpecialTokens: false } as const;

interface Tokens {
  ids: number[];
  offsets: number[][];
  words: Array<number | null | undefined>;
}

async function tokensOf(rust: Tokenizer, text: string): Promise<Tokens> {
  const e = await rust.encode(text, null, CONTENT);
  return { ids: e.getIds(), offsets: e.getOffsets(), words: e.getWordIds() };
}

const codePoints = (s: string) => [...s].length;

/** Whether `part`'s tokens are the whole text's first ones (part = text before a cut). */
function firstOf(whole: Tokens, part: Tokens): boolean {
  if (part.ids.length > whole.ids.length) return false;
  return part.ids.every((id, i) => id === whole.ids[i] && part.offsets[i]![0] === whole.offsets[i]![0] && part.offsets[i]![1] === whole.offsets[i]![1] && part.words[i] === whole.words[i]);
}

/** Whether `part`'s tokens are the whole text's last ones (part = text after a cut `shift` code points in). */
function lastOf(whole: Tokens, part: Tokens, shift: number): boolean {
  const at = whole.ids.length - part.ids.length;
  if (at < 0) return false;
  const word = (w: number | null | undefined, base: number | null | undefined) => (w === null || w === undefined ? w : w - (base ?? 0));
  return part.ids.every(
    (id, i) =>
      id === whole.ids[at + i] && part.offsets[i]![0]! + shift === whole.offsets[at + i]![0] && part.offsets[i]![1]! + shift === whole.offsets[at + i]![1] &&
      word(part.words[i], part.words.find((w) => w !== null && w !== undefined)) === word(whole.words[at + i], whole.words.slice(at).find((w) => w !== null && w !== undefined)),
  );
}

/** How many first (last) tokens the encodings share by id and offsets (from the end for suffixes, `lengths` in code points). */
function common(parts: Tokens[], side: "right" | "left", lengths: number[]): number {
  const at = (j: number, k: number) => {
    const p = parts[j]!;
    const t = side === "right" ? k : p.ids.length - 1 - k;
    if (t < 0 || t >= p.ids.length) return null;
    const shift = side === "right" ? 0 : lengths[j]!;
    return `${p.ids[t]} ${p.offsets[t]![0]! - shift} ${p.offsets[t]![1]! - shift}`;
  };
  let n = 0;
  while (at(0, n) !== null && parts.every((_, j) => at(j, n) === at(0, n))) n++;
  return n;
}

export interface WindowCounts {
  forced: number;
  wide: number;
  right: number;
  left: number;
}

/**
 * Every window spaceRunWindow gives in `texts` (from every position, both sides), against the whole text: some
 * position of it (the only one of a forced window) has exactly the whole text's first (last) tokens before (after)
 * it, and the tokens every position's part shares are the whole text's.
 */
export async function checkWindows(label: string, json: Record<string, unknown>, texts: string[], policyOf: (json: Record<string, unknown>) => CutPolicy | null = cutPolicy): Promise<WindowCounts> {
  const policy = policyOf(json)!;
  expect(policy?.spaceRuns, label).not.toBeNull();
  const rust = Tokenizer.fromString(JSON.stringify(json));
  const normalizer = rust.getNormalizer();
  const preTokenizer = rust.getPreTokenizer()!;
  const normalize = (ch: string) => (normalizer ? normalizer.normalizeString(ch) : ch);
  const pieces: PieceCount = (s) => preTokenizer.preTokenizeString(s).length;
  const spaces = new Map<number, boolean>();
  const isSpace = (code: number) => {
    let v = spaces.get(code);
    if (v === undefined) spaces.set(code, (v = code < 0xd800 || code > 0xdfff ? spaceChar(String.fromCharCode(code), normalize, pieces) : false));
    return v;
  };
  const counts: WindowCounts = { forced: 0, wide: 0, right: 0, left: 0 };
  for (const text of texts) {
    const whole = await tokensOf(rust, text);
    for (const side of ["right", "left"] as const) {
      const seen = new Set<string>();
      for (let from = 1; from < text.length; from++) {
        const ends = spaceRunWindow(text, from, side, policy, isSpace, normalize, pieces);
        if (!ends || seen.has(ends.join())) continue;
        seen.add(ends.join());
        const parts = await Promise.all(ends.map((e) => tokensOf(rust, side === "right" ? text.slice(0, e) : text.slice(e))));
        const shifts = ends.map((e) => codePoints(text.slice(0, e)));
        const exact = parts.map((p, j) => (side === "right" ? firstOf(whole, p) : lastOf(whole, p, shifts[j]!)));
        const where = JSON.stringify(text.slice(Math.max(0, ends[0]! - 8), ends[ends.length - 1]! + 8));
        expect([label, side, where, ends.length === 1 ? exact[0] : exact.some((x) => x)]).toEqual([label, side, where, true]);
        // the tokens the Encoder keeps from a window
        const n = common(parts, side, parts.map((p, j) => codePoints(text) - shifts[j]!));
        const kept = side === "right" ? { ...parts[0]!, ids: parts[0]!.ids.slice(0, n), offsets: parts[0]!.offsets.slice(0, n), words: parts[0]!.words.slice(0, n) } : null;
        if (kept) expect([label, side, where, firstOf(whole, kept)]).toEqual([label, side, where, true]);
        else {
          const p = parts[0]!;
          const tail = { ids: p.ids.slice(p.ids.length - n), offsets: p.offsets.slice(p.offsets.length - n), words: p.words.slice(p.words.length - n) };
          expect([label, side, where, lastOf(whole, tail, shifts[0]!)]).toEqual([label, side, where, true]);
        }
        counts[ends.length === 1 ? "forced" : "wide"]++;
        counts[side]++;
      }
    }
  }
  return counts;
}

/** Whitespace pieces: short runs, line breaks, whitespace JavaScript and the library count differently, long runs. */
const WS = [" ", "  ", "\n", "\r\n", "\t", "\u3000", "\u00a0", "\u0085", "\u2028", " \n", "\n ", "\n\n", "\ufeff"];
function longRuns(seed: number): string[] {
  const out: string[] = [];
  let x = seed;
  for (let k = 0; k < 12; k++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const n = 5 + (x % 60);
    let run = "";
    // half of them one character repeated, half drawn from the whitespace pieces
    for (let i = 0; i < n; i++) {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      run += k % 2 === 0 ? WS[k % 6]! : WS[x % (WS.length - 1)]!;
    }
    out.push(run);
  }
  return out;
}
const WORDS = ["hello", "a", "xyz", "!", "?!", "1", "23", "'s", ".", "日本", "é", "-"];

function texts(seed: number, n: number, added: string[]): string[] {
  return Array.from({ length: n }, (_, i) => textOfPieces([...WORDS, ...WS, ...longRuns(seed + i), ...longRuns(seed * 7 + i), ...added], seed * 1000 + i, 200 + ((i * 83) % 300)));
}

/** Line breaks after punctuation (Qwen's ` ?[^\s\p{L}\p{N}]+[\r\n]*` takes them) and after letters (it does not). */
const TAKEN = ["!" + "\n".repeat(150) + "x", "hello?!" + "\n".repeat(120) + "   y", "é." + "\n".repeat(90) + " \n \n" + "\n".repeat(60) + "z", "a" + "\n".repeat(100) + "b", "1" + "\r\n".repeat(60), ".\n" + "\n".repeat(80) + "\t\t"];

/**
 * A fixture's tokenizer.json with whitespace merged by its vocabulary (runs, line-break pairs, a token starting inside
 * U+3000's bytes, punctuation with the line breaks after it).
 */
function mergedVariant(name: string): Record<string, any> {
  const json = JSON.parse(tokenizerText(name)!);
  let next = 1 + Math.max(...(Object.values(json.model.vocab) as number[]), ...json.added_tokens.map((t: { id: number }) => t.id));
  // "!" and five line breaks: one token of Qwen's punctuation pre-token that starts before the run
  const merges = [["!", "Ċ"], ["!Ċ", "Ċ"], ["!ĊĊ", "Ċ"], ["!ĊĊĊ", "Ċ"], ["!ĊĊĊĊ", "Ċ"], ["Ġ", "Ġ"], ["ĠĠ", "ĠĠ"], ["Ċ", "Ċ"], ["Ġ", "Ċ"], ["Ċ", "Ġ"], ["č", "Ċ"], ["ĉ", "ĉ"], ["ĠĊ", "Ġ"], ["ĠĠĠĠ", "ĠĠĠĠ"], ["ĊĊ", "ĊĊ"], ["Ģ", "Ġ"], ["ãĢ", "Ģ"], ["ãĢĢ", "ãĢĢ"], ["Ġ", "ãĢĢ"]];
  for (const [a, b] of merges) json.model.vocab[a! + b!] ??= next++;
  json.model.merges = [...merges, ...json.model.merges];
  return json;
}

describe("cuts inside runs of whitespace are boundaries of the whole text's tokens (ids, offsets, pre-tokens; both sides)", () => {
  test("Qwen3 (Split regex with `\\s*[\\r\\n]+`, NFC, byte-level BPE; added tokens yes / no)", async () => {
    const n = await checkWindows("qwen3-embed", JSON.parse(tokenizerText("models/qwen3-embed")!), [...texts(1, 12, ["yes", "<|im_end|>"]), ...TAKEN]);
    expect(n.right).toBeGreaterThan(200);
    expect(n.left).toBeGreaterThan(200);
  }, 120_000);

  test("Qwen3 with whitespace merged by the vocabulary: windows of several positions", async () => {
    const n = await checkWindows("qwen3-embed merged", mergedVariant("models/qwen3-embed"), [...texts(2, 12, ["no"]), ...TAKEN]);
    expect(n.wide).toBeGreaterThan(50);
    expect(n.forced).toBeGreaterThan(50);
  }, 120_000);

  test("GPT-2's regex (roberta-cls: <mask> takes the whitespace before it, lstrip)", async () => {
    const n = await checkWindows("roberta-cls", JSON.parse(tokenizerText("models/roberta-cls")!), texts(3, 12, ["<mask>", " <mask>"]));
    expect(n.right).toBeGreaterThan(200);
  }, 120_000);

  test("GPT-2's regex with whitespace merged", async () => {
    const n = await checkWindows("roberta-cls merged", mergedVariant("models/roberta-cls"), texts(4, 12, ["<mask>"]));
    expect(n.wide).toBeGreaterThan(50);
  }, 120_000);

  test("tokens that end inside U+3000's bytes: a window of several positions holds single-byte characters only", async () => {
    // " \u3000" repeated is Ġ ãĢ ĢĠã Ģ ĢĠã Ģ ...: no position between two characters is a boundary
    const json = JSON.parse(tokenizerText("models/qwen3-embed")!);
    let next = 1 + Math.max(...(Object.values(json.model.vocab) as number[]), ...json.added_tokens.map((t: { id: number }) => t.id));
    const merges = [["Ģ", "Ġ"], ["ĢĠ", "ã"], ["ã", "Ģ"]];
    for (const [a, b] of merges) json.model.vocab[a! + b!] ??= next++;
    json.model.merges = [...merges, ...json.model.merges];
    const runs = [" \u3000".repeat(40), "\u3000 ".repeat(30), "hello" + " \u3000".repeat(25) + " x", "\t \u3000".repeat(20)];
    await checkWindows("qwen3-embed, tokens inside U+3000", json, [...runs, runs.join("a ")]);
  }, 120_000);

  test.skipIf(!existsSync(SHARED_TOKENIZERS))("roberta-base (its vocabulary merges two newlines)", async () => {
    const n = await checkWindows("roberta-base", JSON.parse(tokenizerText("shared/roberta-base.tokenizer.json")!), texts(5, 8, ["<mask>"]));
    expect(n.wide).toBeGreaterThan(0);
  }, 120_000);

  test("refused where the proof does not hold: no policy, or no window", () => {
    const qwen = () => JSON.parse(tokenizerText("models/qwen3-embed")!) as Record<string, any>;
    // ignore_merges, an added token with rstrip, a Strip normaliser, another regex
    const variants: Array<(j: Record<string, any>) => void> = [
      (j) => void (j.model.ignore_merges = true),
      (j) => void (j.added_tokens[3].rstrip = true),
      (j) => void (j.normalizer = { type: "Strip", strip_left: false, strip_right: true }),
      (j) => void (j.pre_tokenizer.pretokenizers[0].pattern.Regex = "\\s+|\\S+"),
    ];
    for (const change of variants) {
      const json = qwen();
      change(json);
      expect(cutPolicy(json)?.spaceRuns ?? null).toBeNull();
    }
    const policy = cutPolicy(qwen())!;
    const yes = () => true;
    const same = (ch: string) => ch;
    // Qwen: a prefix ending after a space that a line break follows in the run is two pre-tokens
    expect(spaceRunWindow(" \n".repeat(50), 41, "right", policy, yes, same)).toEqual([42]);
    expect(spaceRunWindow(" \n".repeat(50), 41, "left", policy, yes, same)).toEqual([41]);
  });
});

// 1,000,000 characters of whitespace, or words and a long run: the library's ids and a fraction of its time.
const WHITESPACE = ["spaces", "newlines", "space, newline", "tabs", "mixed whitespace", "words, then spaces", "spaces, then words", "words, then newlines", "words and a stop, then newlines"];
const both = (kinds: string[]) => kinds.flatMap((k) => [[k, "right"], [k, "left"]] as LimitCase[]);
describe("1,000,000 characters of whitespace, byte-level BPE (timed in a fresh process: at-limit.ts)", () => {
  test.skipIf(!existsSync(SHARED_TOKENIZERS))("roberta-base", () => expectAtLimit("shared/roberta-base.tokenizer.json", both(WHITESPACE)), 600_000);
  test("qwen3-embed", () => expectAtLimit("models/qwen3-embed", both(WHITESPACE)), 600_000);
  test("roberta-cls, clap, colmodernvbert", async () => {
    for (const name of ["roberta-cls", "clap", "colmodernvbert"]) await expectAtLimit(`models/${name}`, both(["spaces", "space, newline", "mixed whitespace"]));
  }, 600_000);
  test("as a reranker's document: qwen3-rerank", () =>
    expectAtLimit("models/qwen3-rerank", [["spaces", "pair", "short query"], ["newlines", "pair", "long query"], ["words, then spaces", "pair", "short query"]]), 600_000);
});
