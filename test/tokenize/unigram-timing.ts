// Run by unigram.test.ts in a fresh process: the 1,000,000-character xlm-roberta cases, each encoded by the Encoder
// (second run timed) and by the Rust library on the whole text, truncated. Prints one JSON line per case. A fresh
// process times the encoder as a server's tokenizer worker runs it, without the heap of the whole test run (inside
// the full suite the same timed run read 1.9-3.3 s where a fresh process reads 0.05-0.15 s).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Tokenizer } from "tokenizers";
import { Encoder } from "../../src/tokenize/encode";
import { letters } from "../../bench/workload";

const path = join(import.meta.dir, "..", "..", "..", "shared", "tokenizers", "xlm-roberta-unigram.tokenizer.json.gz");
if (!existsSync(path)) process.exit(3);
const json = gunzipSync(readFileSync(path)).toString("utf8");
const cases: Array<[string, string, "right" | "left"]> = [
  ["one letter", "a".repeat(1_000_000), "right"],
  ["one letter", "a".repeat(1_000_001), "left"],
  ["words, then Cyrillic", "hello world ".repeat(100) + letters(998_800, "абвгдеёжзийклмнопрст", 3), "left"],
];
const encoder = await Encoder.create(JSON.parse(json), {}, 512);
const rust = Tokenizer.fromString(json);
rust.disablePadding();
for (const [kind, input, direction] of cases) {
  const got = await encoder.encode(input, { direction });
  Bun.gc(true);
  const t0 = performance.now();
  await encoder.encode(input, { direction });
  const t1 = performance.now();
  rust.setTruncation(512, { strategy: "LongestFirst" as never, direction: direction as never });
  const want = (await rust.encode(input, null, { addSpecialTokens: true })).getIds();
  const t2 = performance.now();
  console.log(JSON.stringify({ kind, direction, same: JSON.stringify(Array.from(got.ids)) === JSON.stringify(want), oursMs: t1 - t0, libraryMs: t2 - t1 }));
}
console.log(JSON.stringify({ differ: encoder.wordPathChecks.differ }));
