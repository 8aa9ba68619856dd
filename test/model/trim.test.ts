import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { Tokenizer } from "tokenizers";
import { fixture } from "../helpers";
import { IdleTrim, collect, returnFreedMemory } from "../../src/model/trim";

test("glibc's malloc_trim is reachable on Linux (the unloaded models' memory is handed back)", () => {
  // The test machines and the container image are glibc Linux; elsewhere the call is a no-op that says so.
  expect(returnFreedMemory()).toBe(process.platform === "linux");
});

// The tokenizer worker's case (it collects after a batch of >= 200,000 characters): the Rust library encodes on
// libuv's pool threads, each allocating in its own malloc arena; freed, those pages stay resident until handed back.
test.skipIf(process.platform !== "linux")("the library's freed encodings leave resident memory that collect hands back", async () => {
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
  expect(collect()).toBe(true);
  const after = process.memoryUsage.rss();
  // eight 200,000-token encodings with their tokens, offsets and words: 71 MiB handed back here each time
  expect(before - after).toBeGreaterThan(16 * 1024 * 1024);
});

describe("IdleTrim (inference workers hand freed memory back after a burst)", () => {
  test("trims once after enough tokens and a quiet delay; a run meanwhile postpones it; small runs never trim", async () => {
    let trims = 0;
    const t = new IdleTrim(40, 1000, () => (trims++, true));
    t.busy();
    t.ran(600);
    await Bun.sleep(80);
    expect(trims).toBe(0); // 600 < 1000 tokens
    t.busy();
    t.ran(600);
    // A run starts before the delay passes: nothing while it runs, however long.
    await Bun.sleep(20);
    t.busy();
    await Bun.sleep(80);
    expect(trims).toBe(0);
    t.ran(10);
    await Bun.sleep(80);
    expect(trims).toBe(1);
    // The count starts again after a trim.
    t.busy();
    t.ran(900);
    await Bun.sleep(80);
    expect(trims).toBe(1);
    t.ran(200);
    t.stop();
    await Bun.sleep(80);
    expect(trims).toBe(1);
  });
});
