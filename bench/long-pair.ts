// A (query, document) pair whose document is one 1,000,000-character word (a /rerank document without spaces),
// truncated longest-first to 512 and to 511 tokens (an even and an odd budget): the server's Encoder (the document
// cut inside the word; its counted length a lower bound that decides longest-first; with a query that is one long
// word too and an odd budget, both words counted exactly: src/tokenize/encode.ts countedExactly) against the Rust
// tokenizers encoding the whole pair, cut by its longest-first rule (test/helpers.ts libraryPairTruncated), and
// optionally against another checkout's Encoder (`--before DIR`: e.g. main before a change). Checks the ids and
// prints milliseconds (the server's on a second run).
//
//   bun bench/long-pair.ts [--before /path/to/checkout]
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../src/tokenize/encode";
import { libraryPairTruncated } from "../test/helpers";
import { letters } from "./workload";

const SHARED = join(import.meta.dir, "..", "..", "shared", "tokenizers");
const FILES = ["roberta-base.tokenizer.json", "clip-vit-base-patch32.tokenizer.json", "t5-small.tokenizer.json", "xlm-roberta-unigram.tokenizer.json.gz"];
const at = process.argv.indexOf("--before");
const Before: typeof Encoder | null = at > 0 ? (await import(join(process.argv[at + 1]!, "src", "tokenize", "encode.ts"))).Encoder : null;
const DOC = letters(1_000_000, "abcdefghijklmnopqrstuvwxyz", 1);
const QUERIES: Record<string, string> = { "short query": "what is this about?", "query of 200 words": "hello world ".repeat(100), "1,000,000-letter query": letters(1_000_000, "abcdefghijklmnopqrstuvwxyz", 2) };

if (!existsSync(SHARED)) {
  console.error(`${SHARED} is missing`);
  process.exit(1);
}
const timed = async <T>(f: () => Promise<T>): Promise<[T, number]> => {
  const t0 = performance.now();
  const v = await f();
  return [v, performance.now() - t0];
};
console.log(`| tokenizer | max | query | server ms (first) | ${Before ? "before ms | " : ""}library whole pair ms | same ids |`);
console.log(`|---|---|---|---|${Before ? "---|" : ""}---|---|`);
for (const file of FILES) {
  const raw = readFileSync(join(SHARED, file));
  const text = (file.endsWith(".gz") ? gunzipSync(raw) : raw).toString("utf8");
  const rust = Tokenizer.fromString(text);
  rust.disablePadding();
  for (const max of [512, 511]) {
    const encoder = await Encoder.create(JSON.parse(text), {}, max);
    const before = Before ? await Before.create(JSON.parse(text), {}, max) : null;
    for (const [kind, query] of Object.entries(QUERIES)) {
      const [, first] = await timed(() => encoder.encodePair(query, DOC));
      const [got, ms] = await timed(() => encoder.encodePair(query, DOC));
      let was = "";
      if (before) {
        await before.encodePair(query, DOC);
        was = `${(await timed(() => before.encodePair(query, DOC)))[1].toFixed(0)} | `;
      }
      const [want, lib] = await timed(() => libraryPairTruncated(rust, max, query, DOC));
      const same = JSON.stringify(Array.from(got.ids)) === JSON.stringify(want.ids) && JSON.stringify(Array.from(got.typeIds!)) === JSON.stringify(want.types);
      console.log(`| ${file.split(".")[0]} | ${max} | ${kind} | ${ms.toFixed(0)} (${first.toFixed(0)}) | ${was}${lib.toFixed(0)} | ${same ? "yes" : "NO"} |`);
    }
  }
}
