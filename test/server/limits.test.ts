// Inputs at the documented limit (--max-input-chars, default 1,000,000) succeed on every tokenizer kind: ordinary
// words (cut at whitespace) and, by turns, a long CJK document without spaces or one long token (tokenized whole),
// through /embeddings (WordPiece, byte-level BPE, Unigram, CLIP's BPE). One character over answers 413 naming the flag.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RunningServer } from "../../src/server/serve";
import { fixture, postJson, startTestServer } from "../helpers";
import { cjk } from "../../bench/workload";

const MODELS = ["bert-mean-norm", "roberta-cls", "xlmr-max", "clip"] as const;
const LIMIT = 1_000_000;
let server: RunningServer;

beforeAll(async () => {
  // The default --max-input-chars is the limit under test.
  server = await startTestServer({ "model-id": MODELS.map(fixture), "model-warmup": "false" });
});
afterAll(async () => {
  await server.shutdown();
});

const INPUTS: Record<string, string> = {
  "CJK without spaces": cjk(LIMIT),
  "one long token": "a".repeat(LIMIT),
  "words": "the quick brown fox jumps over the lazy dog ".repeat(LIMIT / 44).padEnd(LIMIT, "x"),
};

describe("1,000,000-character inputs", () => {
  for (const [m, model] of MODELS.entries()) {
    test(model, async () => {
      for (const [kind, input] of Object.entries(INPUTS).filter(([kind], k) => kind === "words" || k === m % 2)) {
        expect(input.length).toBe(LIMIT);
        const t0 = performance.now();
        const { status, json } = await postJson(`${server.url}/embeddings`, { model, input, encoding_format: "float" });
        const ms = performance.now() - t0;
        console.log(`${model} ${kind}: ${status} in ${ms.toFixed(0)} ms`);
        expect([model, kind, status]).toEqual([model, kind, 200]);
        const v = json.data[0].embedding as number[];
        expect(v.length).toBeGreaterThan(0);
        expect(v.every(Number.isFinite)).toBe(true);
        // Truncated to the model's max length, not counted whole.
        expect(json.usage.prompt_tokens).toBeLessThanOrEqual((await server.ctx.registry.lookup(model, "embed")).layout.maxLength);
      }
      // One character over is refused with the one error shape, not tokenized.
      const over = await postJson(`${server.url}/embeddings`, { model, input: "a".repeat(LIMIT + 1) });
      expect(over.status).toBe(413);
      expect(over.json.error.param).toBe("input");
      expect(over.json.error.message).toContain("at most 1000000 are accepted (--max-input-chars)");
    }, 300_000);
  }
});
