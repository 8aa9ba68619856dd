// src/memory.ts: freed native memory handed back to the operating system (glibc's malloc_trim).
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { Tokenizer } from "tokenizers";
import { canReturnFreedMemory, returnFreedMemory } from "../src/memory";
import { fixture } from "./helpers";

const glibc = process.platform === "linux" && !readFileSync("/proc/self/maps", "utf8").includes("musl");

test("found on Linux with glibc (CI, the Docker image); nothing to call elsewhere", () => {
  expect(canReturnFreedMemory()).toBe(glibc);
  expect(returnFreedMemory()).toBe(glibc);
});

// The tokenizer worker's case: the Rust library encodes long texts on libuv's pool threads, each allocating in its
// own malloc arena; freed, those pages stay resident until handed back.
test.skipIf(!glibc)("the library's freed encodings leave resident memory that returnFreedMemory hands back", async () => {
  const rust = Tokenizer.fromString(readFileSync(`${fixture("bert-mean-norm")}/tokenizer.json`, "utf8"));
  rust.disablePadding();
  rust.disableTruncation();
  const text = "hello world ".repeat(40_000);
  const encodeAndDrop = async () => {
    for (let round = 0; round < 2; round++) {
      const encodings = await Promise.all([0, 1, 2, 3].map(() => rust.encode(text, null)));
      expect(encodings[3]!.getIds().length).toBe(200_002);
    }
  };
  await encodeAndDrop();
  Bun.gc(true);
  const before = process.memoryUsage.rss();
  expect(returnFreedMemory()).toBe(true);
  const after = process.memoryUsage.rss();
  // eight 200,000-token encodings with their tokens, offsets and words: tens of MiB freed across the arenas
  console.log(`returned ${((before - after) / 1048576).toFixed(0)} MiB`);
  expect(before - after).toBeGreaterThan(16 * 1024 * 1024);
});
