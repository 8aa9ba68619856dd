// The benchmark workload: a fixed, seeded pool of English-like texts whose token lengths are spread like a
// retrieval workload (short queries and passages up to ~256 tokens), tokenized once with the model's tokenizer,
// and the deterministic order in which requests draw from the pool.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "tokenizers";
import { prng } from "./model";

const WORDS = `
the of and to in is that for it as was with be by on not he this are or his from at which but have an they you
were her she there been one all we their has would when if more will other what some can into its only time new
about two may first then do any like my now over such our man me even most made after also did many before must
through back years where much your way well down should because each just those people how too little state good
very make world still own see men work long get here between both life being under never day same another know
while last might us great old year off come since against go came right used take three states himself few house
use during without again place around however home small found thought went say part once general high upon
school every does got united left number course war until always away something fact though water less public
put think almost hand enough far took head yet government system better set told nothing night end why called
didn't eyes find going look asked later knew point next program city business give group toward young days let
room president side social present given several order national second possible rather per face among form
important often things looked early white case large need big four within felt children along saw best church
ever least power development light thing seemed family interest want members others mind country area done
turned although open god service problem certain kind different thus began door help means sense whole matter
perhaps itself york times law human line above name example action company hands local show whether five history
gave today either act feet across taken past quite anything seen having death experience body word half really
week car information already field research market energy storage network model training data query document
retrieval search index vector embedding language text sentence paragraph server request response latency memory
process thread batch token layer attention weight cloud database customer product support price policy report
analysis result method study patient treatment clinical protein cell gene climate ocean forest river mountain
engine software hardware security privacy account payment order shipping delivery return refund warranty manual
`.trim().split(/\s+/);

export interface WorkloadText {
  text: string;
  ids: Int32Array;
}

export interface Workload {
  texts: WorkloadText[];
  seed: number;
}

/** Target token count: ~30% query-like (4-24 tokens), ~70% passage-like (32-256 tokens). */
function targetLength(next: () => number): number {
  const u = next() / 4294967296;
  if (u < 0.3) return 4 + (next() % 21);
  return 32 + (next() % 225);
}

function sentence(next: () => number, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    let w = WORDS[next() % WORDS.length]!;
    if (i === 0) w = w[0]!.toUpperCase() + w.slice(1);
    if (i > 2 && i < words - 2 && next() % 11 === 0) w += ",";
    out.push(w);
  }
  return out.join(" ") + (next() % 7 === 0 ? "?" : ".");
}

/** The model's tokenizer.json in the Rust tokenizers library, as the server runs it (no truncation or padding). */
export function loadTokenizer(modelDir: string): Tokenizer {
  const tok = Tokenizer.fromString(readFileSync(join(modelDir, "tokenizer.json"), "utf8"));
  tok.disableTruncation();
  tok.disablePadding();
  return tok;
}

/** `count` texts for `seed`; every system is sent exactly these. */
export async function makeWorkload(modelDir: string, count: number, seed = 12345): Promise<Workload> {
  const tok = loadTokenizer(modelDir);
  const ids = async (text: string) => (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
  const next = prng(seed, 0xbe4c);
  const texts: WorkloadText[] = [];
  for (let n = 0; n < count; n++) {
    const target = targetLength(next);
    // Words are about 1.1 tokens each here, plus [CLS]/[SEP]; build sentences, then trim words to the target.
    const parts: string[] = [];
    let words = 0;
    while (words < target) {
      const w = Math.min(target - words, 6 + (next() % 18));
      parts.push(sentence(next, Math.max(w, 2)));
      words += Math.max(w, 2);
    }
    let text = parts.join(" ");
    let tokens = await ids(text);
    while (tokens.length > target + 2 && text.includes(" ")) {
      // Drop trailing words until the token count fits the target (queries stay short, passages stay <= ~258).
      const drop = Math.max(1, Math.floor((tokens.length - target - 2) / 2));
      text = text.split(" ").slice(0, -drop).join(" ");
      tokens = await ids(text);
    }
    texts.push({ text, ids: Int32Array.from(tokens.slice(0, 512)) });
  }
  return { texts, seed };
}

export function lengthStats(texts: readonly WorkloadText[]): { mean: number; p10: number; p50: number; p90: number; max: number; min: number } {
  const l = texts.map((t) => t.ids.length).sort((a, b) => a - b);
  const q = (p: number) => l[Math.min(l.length - 1, Math.floor(p * l.length))]!;
  return { mean: l.reduce((a, b) => a + b, 0) / l.length, min: l[0]!, p10: q(0.1), p50: q(0.5), p90: q(0.9), max: l[l.length - 1]! };
}

/** The inputs of request `k` of a cell with `size` inputs per request: a sliding, wrapping window of the pool. */
export function requestTexts(pool: readonly WorkloadText[], size: number, k: number, offset = 0): WorkloadText[] {
  const out: WorkloadText[] = [];
  for (let j = 0; j < size; j++) out.push(pool[(offset + k * size + j) % pool.length]!);
  return out;
}

/** n characters (code points: emoji are two UTF-16 units) drawn from `alphabet` by a seeded LCG: one long word
 * without spaces (bench/tokenize.ts and the long-word tokenizer tests read the same inputs). */
export function letters(n: number, alphabet: string, seed: number): string {
  const chars = [...alphabet];
  const out: string[] = new Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    out[i] = chars[x % chars.length]!;
  }
  return out.join("");
}

/** n CJK ideographs cycling through 20,000 of them (most are not pieces of xlm-roberta's or t5's vocabulary). */
export function cjk(n: number): string {
  const out: string[] = new Array(n);
  for (let i = 0; i < n; i++) out[i] = String.fromCharCode(0x4e00 + ((i * 7919) % 20_000));
  return out.join("");
}

/**
 * n characters of whitespace, or words and one long run of spaces (the
 * at-limit tokenizer tests read the same inputs; n even, at least 1,200).
 */
export function whitespaceInputs(n: number): Record<string, () => string> {
  return {
    spaces: () => " ".repeat(n),
    newlines: () => "\n".repeat(n),
    "space, newline": () => " \n".repeat(n / 2),
    tabs: () => "\t".repeat(n),
    "mixed whitespace": () => letters(n, " \t\n\r\u3000\u00a0", 5),
    "words, then spaces": () => "hello world ".repeat(100) + " ".repeat(n - 1200),
    "spaces, then words": () => " ".repeat(n - 1200) + "hello world ".repeat(100),
    // line breaks after a letter, and after punctuation (Qwen's regex joins those to it)
    "words, then newlines": () => "hello, world".repeat(100) + "\n".repeat(n - 1200),
    "words and a stop, then newlines": () => "hello world.".repeat(100) + "\n".repeat(n - 1200),
  };
}
