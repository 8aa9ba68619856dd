// Run by at-limit.ts (expectAtLimit) in a fresh process: `bun at-limit-run.ts <tokenizer> <max length> <kind|direction>...`
// (direction right, left, or pair|<query kind>). Each case encoded by the Encoder (the best of three runs after the
// first timed, each after a collection) and by the Rust library on the whole text (pair), truncated to the max length (test/helpers.ts); one JSON line per case, then the
// Encoder's wordPathChecks.differ and pairDecisions.whole.
import { Tokenizer } from "tokenizers";
import { Encoder } from "../../src/tokenize/encode";
import { libraryPairTruncated, libraryTruncated, tokenizerText } from "../helpers";
import { LIMIT_INPUTS } from "./at-limit";

const [name, max, ...cases] = process.argv.slice(2);
const maxLength = Number(max);
const json = tokenizerText(name!);
if (json === null) process.exit(3);
const encoder = await Encoder.create(JSON.parse(json), {}, maxLength);
const rust = Tokenizer.fromString(json);
rust.disablePadding();
for (const c of cases) {
  // "kind|right", "kind|left", or "kind|pair|query": a pair (query, kind) cut longest-first, type ids compared too
  const [kind, direction, queryKind] = c.split("|") as [string, "right" | "left" | "pair", string | undefined];
  const input = LIMIT_INPUTS[kind]!();
  const query = queryKind === undefined ? null : LIMIT_INPUTS[queryKind]!();
  const run = () => (query === null ? encoder.encode(input, { direction: direction as "right" | "left" }) : encoder.encodePair(query, input));
  const got = await run();
  // the best of three runs after the first (which also fills the per-character caches): load on the shared machine
  let oursMs = Infinity;
  for (let k = 0; k < 3; k++) {
    Bun.gc(true);
    const t0 = performance.now();
    await run();
    oursMs = Math.min(oursMs, performance.now() - t0);
  }
  Bun.gc(true);
  const t1 = performance.now();
  // a pair through libraryPairTruncated: the library's encode with truncation would build every combination of both
  // members' overflowing pieces (gigabytes for a long query with this document)
  const want = query === null ? await libraryTruncated(rust, maxLength, input, null, direction as "right" | "left") : await libraryPairTruncated(rust, maxLength, query, input);
  const t2 = performance.now();
  const same = JSON.stringify(Array.from(got.ids)) === JSON.stringify(want.ids) && (query === null || JSON.stringify(Array.from(got.typeIds!)) === JSON.stringify(want.types));
  console.log(JSON.stringify({ kind, direction: c.slice(kind.length + 1), same, atLeast: got.fullLengthAtLeast === true, cut: got.fullLength !== undefined, oursMs, libraryMs: t2 - t1 }));
  Bun.gc(true);
}
console.log(JSON.stringify({ differ: encoder.wordPathChecks.differ, whole: encoder.pairDecisions.whole }));
