// Tokenizing one 1,000,000-character input without spaces, truncated to 512 tokens on the right and (TEI's
// truncation_direction) on the left: the server's Encoder (which cuts long texts before tokenizing: at word and
// class boundaries, inside one long word where src/tokenize/prefix.ts says the first or last tokens cannot change,
// after unknown Unigram characters; WordPiece runs that become one [UNK] are shortened) against the Rust tokenizers
// encoding the whole text and truncating it. Checks that both give the same ids and prints milliseconds per case
// (the server's on a second run: the first also fills per-character caches, shown as "first"; garbage is collected
// before each timed run). Reads the real
// tokenizers in ../shared/tokenizers, and fixture tokenizers named `models/<fixture>` (the Qwen3 ones:
// `models/qwen3-embed`). `--before DIR` adds another checkout's Encoder (e.g. main before a change), timed the same.
// `--whitespace` runs the whitespace inputs instead (spaces, newlines, tabs, mixed, a long run before or after words).
//
//   bun bench/long-word.ts [characters] [tokenizer...] [--before DIR]   (default 1000000 and the five shared ones;
//   e.g. `bun bench/long-word.ts 1000000 t5-small xlm-roberta-unigram` for the Unigram rows, `bun bench/long-word.ts
//   1000000 models/qwen3-embed --before /work/main`; needs a quiet machine for stable numbers)
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../src/tokenize/encode";
import { cutPolicy } from "../src/tokenize/prefix";
import { cjk, letters, whitespaceInputs } from "./workload";

const SHARED = join(import.meta.dir, "..", "..", "shared", "tokenizers");
const FIXTURES = join(import.meta.dir, "..", "test", "fixtures", "models");
const FILES = ["bert-base-uncased.tokenizer.json", "roberta-base.tokenizer.json", "clip-vit-base-patch32.tokenizer.json", "t5-small.tokenizer.json", "xlm-roberta-unigram.tokenizer.json.gz"];
const beforeAt = process.argv.indexOf("--before");
const Before: typeof Encoder | null = beforeAt > 0 ? (await import(join(process.argv[beforeAt + 1]!, "src", "tokenize", "encode.ts"))).Encoder : null;
const args = process.argv.slice(2).filter((_, i, all) => all[i] !== "--before" && all[i - 1] !== "--before" && all[i] !== "--whitespace");
const N = Number(args[0] ?? 1_000_000);
const ONLY = args.slice(1);
const fixtureNames = ONLY.filter((n) => n.startsWith("models/"));
const sharedNames = ONLY.filter((n) => !n.startsWith("models/"));

const WHITESPACE = process.argv.includes("--whitespace");
const INPUTS: Record<string, string> = WHITESPACE ? Object.fromEntries(Object.entries(whitespaceInputs(N)).map(([k, f]) => [k, f()])) : {
  "one letter": "a".repeat(N),
  "ASCII letters": letters(N, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 1),
  "Latin with accents": letters(N, "abcdeéüßøåçñ", 2),
  Cyrillic: letters(N, "абвгдеёжзийклмнопрст", 3),
  "CJK (20,000 ideographs)": cjk(N),
  "CJK (20 common characters)": letters(N, "的一是不了人我在有他这为之大来以个中上们", 4),
  "words, then one long word": ("hello world ".repeat(100) + "b".repeat(N)).slice(0, N),
  "one long word, then words": letters(N - 1200, "abcdefg", 12) + " hello world".repeat(100),
  emoji: letters(N, "😀🎉🚀🔥💡🌍🍕🐱", 9),
  "mixed scripts, emoji, digits, punctuation": letters(N, "abcxyzéжд日本語😀🎉1234!?.-", 6),
  digits: letters(N, "0123456789", 7),
  "prose (words, digits, punctuation, lines)": "The cat's 12 dogs, and yes: no!\n".repeat(Math.ceil(N / 32)).slice(0, N),
};

const sources: Array<[string, string]> = [];
for (const file of FILES.filter((f) => sharedNames.includes(f.split(".")[0]!) || ONLY.length === 0)) sources.push([file.split(".")[0]!, join(SHARED, file)]);
for (const name of fixtureNames) sources.push([name, join(FIXTURES, name.slice("models/".length), "tokenizer.json")]);
for (const [, path] of sources) {
  if (!existsSync(path)) {
    console.error(`${path} is missing`);
    process.exit(1);
  }
}
console.log(`| tokenizer | in-word cut | input (${N} chars) | cut | server ms (first) | ${Before ? "before ms | " : ""}whole + truncate ms | same ids |`);
console.log(`|---|---|---|---|---|${Before ? "---|" : ""}---|---|`);
for (const [name, path] of sources) {
  const raw = readFileSync(path);
  const text = (path.endsWith(".gz") ? gunzipSync(raw) : raw).toString("utf8");
  const encoder = await Encoder.create(JSON.parse(text), {}, 512);
  const before = Before ? await Before.create(JSON.parse(text), {}, 512) : null;
  const rust = Tokenizer.fromString(text);
  rust.disablePadding();
  const inWord = cutPolicy(JSON.parse(text))?.inWord?.model ?? "no";
  for (const [kind, input] of Object.entries(INPUTS)) {
    for (const direction of ["right", "left"] as const) {
      rust.setTruncation(512, { strategy: "LongestFirst" as never, direction: direction as never });
      // each timed run starts with the earlier runs' garbage collected (1M-character encodings leave plenty)
      Bun.gc(true);
      const t0 = performance.now();
      const got = await encoder.encode(input, { direction });
      const first = performance.now() - t0;
      Bun.gc(true);
      const t1 = performance.now();
      await encoder.encode(input, { direction });
      const second = performance.now() - t1;
      let was = "";
      if (before) {
        await before.encode(input, { direction });
        Bun.gc(true);
        const tb = performance.now();
        await before.encode(input, { direction });
        was = `${(performance.now() - tb).toFixed(0)} | `;
      }
      Bun.gc(true);
      const t2 = performance.now();
      const want = (await rust.encode(input, null, { addSpecialTokens: true })).getIds();
      const whole = performance.now() - t2;
      const same = JSON.stringify(Array.from(got.ids)) === JSON.stringify(want);
      console.log(`| ${name} | ${inWord} | ${kind} | ${direction} | ${second.toFixed(0)} (${first.toFixed(0)}) | ${was}${whole.toFixed(0)} | ${same ? "yes" : "NO"} |`);
    }
  }
}
