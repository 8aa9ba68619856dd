// Run by fuzz.test.ts in a fresh process: 1,000,000 characters of eight kinds, right and left, on every Qwen3
// fixture's tokenizer, each encoded by the Encoder (the best of three runs after the first, timed) and by the Rust
// library on the whole text, truncated to 512. The five fixtures share two tokenizer.json files: the first of each
// runs every input, timed; the others one input, ids only. Prints one JSON line per case.
import { Tokenizer } from "tokenizers";
import { Encoder } from "../../src/tokenize/encode";
import { letters } from "../../bench/workload";
import { libraryTruncated, tokenizerText } from "../helpers";

const LIMIT = 1_000_000;
const INPUTS: Record<string, () => string> = {
  "one letter": () => "a".repeat(LIMIT),
  "ASCII letters": () => letters(LIMIT, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 1),
  CJK: () => letters(LIMIT, "的一是不了人我在有他这为之大来以个中上们", 4),
  mixed: () => letters(LIMIT, "abcxyzéжд日本語😀🎉1234!?.-", 6),
  "words, then one long word": () => ("hello world ".repeat(100) + "b".repeat(LIMIT)).slice(0, LIMIT),
  digits: () => letters(LIMIT, "0123456789", 7),
  prose: () => "The cat's 12 dogs, and yes: no!\n".repeat(LIMIT / 32),
  "letters of the added tokens yes / no": () => letters(LIMIT, "yesno", 12),
};
const seen = new Set<string>();
for (const name of ["qwen3-embed", "qwen3-embed-qdrant", "qwen3-rerank", "qwen3-rerank-keep", "qwen3-rerank-seq-cls"]) {
  const text = tokenizerText(`models/${name}`)!;
  const timed = !seen.has(text);
  seen.add(text);
  const encoder = await Encoder.create(JSON.parse(text), {}, 512);
  const rust = Tokenizer.fromString(text);
  rust.disablePadding();
  for (const [kind, make] of Object.entries(INPUTS).slice(0, timed ? undefined : 1)) {
    const input = make();
    for (const direction of ["right", "left"] as const) {
      const got = await encoder.encode(input, { direction });
      let oursMs = Infinity;
      for (let run = 0; run < (timed ? 3 : 0); run++) {
        Bun.gc(true);
        const t0 = performance.now();
        await encoder.encode(input, { direction });
        oursMs = Math.min(oursMs, performance.now() - t0);
      }
      Bun.gc(true);
      const t1 = performance.now();
      const want = await libraryTruncated(rust, 512, input, null, direction);
      const libraryMs = performance.now() - t1;
      const same = input.length >= LIMIT - 32 && JSON.stringify(Array.from(got.ids)) === JSON.stringify(want.ids);
      console.log(JSON.stringify({ name, kind, direction, same, timed, oursMs, libraryMs }));
    }
  }
}
