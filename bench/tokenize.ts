// Tokenizing one long input (default 1,000,000 characters, the default --max-input-chars) truncated to 512 tokens,
// right and left: the server's Encoder (a cut at whitespace where the tokenizer allows it, else the whole text:
// docs/tokenization.md) against the Rust tokenizers encoding the whole text with its own truncation. Prints one row
// per tokenizer x input kind x direction: milliseconds of each (best of three, the two alternating, garbage collected
// before each run), their ratio, and whether the ids are identical. The target: identical ids everywhere, and no row
// over 1.10.
//
//   bun bench/tokenize.ts [characters] [tokenizer...]   (default: the five in ../shared/tokenizers and the Qwen3
//   fixture; a tokenizer is a file name stem there or models/<fixture>)
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../src/tokenize/encode";
import { cjk, letters } from "./workload";

const SHARED = join(import.meta.dir, "..", "..", "shared", "tokenizers");
const FIXTURES = join(import.meta.dir, "..", "test", "fixtures", "models");
const FILES: Record<string, string> = {
  "bert-base-uncased": "bert-base-uncased.tokenizer.json",
  "roberta-base": "roberta-base.tokenizer.json",
  "clip-vit-base-patch32": "clip-vit-base-patch32.tokenizer.json",
  "t5-small": "t5-small.tokenizer.json",
  "xlm-roberta": "xlm-roberta-unigram.tokenizer.json.gz",
};
const N = Number(process.argv[2] ?? 1_000_000);
const names = process.argv.length > 3 ? process.argv.slice(3) : [...Object.keys(FILES), "models/qwen3-embed"];

const INPUTS: Record<string, string> = {
  "prose (cut)": "The cat's 12 dogs, and yes: no! Über café naïve. ".repeat(Math.ceil(N / 50)).slice(0, N),
  "one letter": "a".repeat(N),
  "ASCII letters": letters(N, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 1),
  Cyrillic: letters(N, "абвгдеёжзийклмнопрст", 3),
  "CJK, no spaces": cjk(N),
  emoji: letters(N, "😀🎉🚀🔥💡🌍🍕🐱", 9),
  "mixed scripts, digits, punctuation": letters(N, "abcxyzéжд日本語😀🎉1234!?.-", 6),
  digits: letters(N, "0123456789", 7),
  "marks of several classes": ("a" + "\u0301\u0323\u0308".repeat(40)).repeat(Math.ceil(N / 121)).slice(0, N),
};

function tokenizerJson(name: string): string {
  const path = name.startsWith("models/") ? join(FIXTURES, name.slice(7), "tokenizer.json") : join(SHARED, FILES[name] ?? name);
  if (!existsSync(path)) throw new Error(`${path} is missing`);
  const raw = readFileSync(path);
  return (path.endsWith(".gz") ? gunzipSync(raw) : raw).toString("utf8");
}

interface Timed {
  ms: number;
  ids: number[];
}

/** One run, after a collection, against the best so far. */
async function timed(run: () => Promise<number[]>, best: Timed): Promise<void> {
  Bun.gc(true);
  const t0 = performance.now();
  best.ids = await run();
  best.ms = Math.min(best.ms, performance.now() - t0);
}

console.log(`| tokenizer | input (${N} chars) | direction | server ms | library ms | ratio | same ids |`);
console.log("|---|---|---|---|---|---|---|");
let worst = 0;
let differ = 0;
for (const name of names) {
  const json = tokenizerJson(name);
  const encoder = await Encoder.create(JSON.parse(json), {}, 512);
  const rust = Tokenizer.fromString(json);
  rust.disablePadding();
  for (const [kind, input] of Object.entries(INPUTS)) {
    for (const direction of ["right", "left"] as const) {
      rust.setTruncation(512, { strategy: "LongestFirst" as never, direction: direction as never });
      const ours: Timed = { ms: Infinity, ids: [] };
      const library: Timed = { ms: Infinity, ids: [] };
      // alternating, so a slow spell of the machine hits both alike
      for (let i = 0; i < 3; i++) {
        await timed(async () => Array.from((await encoder.encode(input, { direction })).ids), ours);
        await timed(async () => (await rust.encode(input, null, { addSpecialTokens: true })).getIds(), library);
      }
      const same = JSON.stringify(ours.ids) === JSON.stringify(library.ids);
      const ratio = ours.ms / library.ms;
      worst = Math.max(worst, ratio);
      if (!same) differ++;
      console.log(`| ${name} | ${kind} | ${direction} | ${ours.ms.toFixed(0)} | ${library.ms.toFixed(0)} | ${ratio.toFixed(2)} | ${same ? "yes" : "NO"} |`);
    }
  }
}
console.log(`\nworst ratio ${worst.toFixed(2)} (target <= 1.10); rows with different ids: ${differ}`);
