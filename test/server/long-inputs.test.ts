// 1,000,000-character inputs through HTTP: a /rerank document that is one long word (tokenized whole) scores as the
// same document cut by hand where the library keeps the same tokens; `truncate: false` answers 413 naming a lower
// bound of the token count ("at least"): the tokens of the part before a cut at whitespace for a text of words, one
// past the max length for one long word (truncated by the library: docs/tokenization.md).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "tokenizers";
import type { RunningServer } from "../../src/server/serve";
import { fixture, postJson, startTestServer } from "../helpers";
import { letters } from "../../bench/workload";

const LIMIT = 1_000_000;
let server: RunningServer;

beforeAll(async () => {
  server = await startTestServer({ "model-id": [fixture("deberta-rerank"), fixture("roberta-cls")], "model-warmup": "false" });
});
afterAll(async () => {
  await server.shutdown();
});

const DOC = letters(LIMIT, "abcdefghijklmnopqrstuvwxyz", 1);
const QUERY = "what is this about?";

function rustTokenizer(model: string): Tokenizer {
  const t = Tokenizer.fromString(readFileSync(join(fixture(model), "tokenizer.json"), "utf8"));
  t.disablePadding();
  return t;
}

describe("a 1,000,000-character one-word document", () => {
  test("/rerank: 200, scored as the document cut by hand where the library keeps the same tokens", async () => {
    const max = (await server.ctx.registry.lookup("deberta-rerank", "rerank")).layout.maxLength;
    // The library's own truncation of the whole pair, and of the pair with the document's first 20,000 characters.
    const rust = rustTokenizer("deberta-rerank");
    rust.setTruncation(max, { strategy: "LongestFirst" as never });
    const cut = DOC.slice(0, 20_000);
    const whole = (await rust.encode(QUERY, DOC, { addSpecialTokens: true })).getIds();
    expect((await rust.encode(QUERY, cut, { addSpecialTokens: true })).getIds()).toEqual(whole);
    const r = await postJson(`${server.url}/rerank`, { model: "deberta-rerank", query: QUERY, documents: [DOC, cut], raw_scores: true });
    expect(r.status).toBe(200);
    const byIndex = new Map<number, number>(r.json.results.map((x: { index: number; relevance_score: number }) => [x.index, x.relevance_score]));
    expect(Math.abs(byIndex.get(0)! - byIndex.get(1)!)).toBeLessThanOrEqual(1e-6);
    expect(r.json.usage.prompt_tokens).toBe(2 * whole.length);
    expect(r.headers.get("x-truncated-inputs")).toBe("0,1");
  }, 300_000);

  test("truncate false: 413 with a lower bound of the token count, for a cut text and a whole one", async () => {
    const rust = rustTokenizer("roberta-cls");
    rust.disableTruncation();
    const words = "the quick brown fox jumps over the lazy dog ".repeat(LIMIT / 44).padEnd(LIMIT, "x");
    const cases: Array<[string, Record<string, unknown>, string, string, boolean]> = [
      ["/rerank", { model: "deberta-rerank", query: QUERY, documents: ["short", words], truncate: false }, "documents[1]", words, true],
      ["/embeddings", { model: "roberta-cls", input: ["short", words], truncate: false }, "input[1]", words, true],
      ["/embeddings", { model: "roberta-cls", input: [DOC], truncate: false }, "input[0]", DOC, false],
    ];
    // a cut text counts its part's tokens, far past the max length; a whole one counts to one past it
    for (const [route, body, param, text, cut] of cases) {
      const r = await postJson(`${server.url}${route}`, body);
      expect([route, param, r.status]).toEqual([route, param, 413]);
      expect(r.json.error.param).toBe(param);
      expect(r.json.error.code).toBe("input_too_long");
      expect(r.json.error.message).toMatch(/^`[a-z]+\[\d\]` has (at least )?\d+ tokens; model "[a-z-]+" takes at most \d+ \(allow truncation to have it cut\)$/);
      expect([route, param, r.json.error.message.includes("at least")]).toEqual([route, param, true]);
      const [, n] = /has (?:at least )?(\d+) tokens/.exec(r.json.error.message)!;
      const max = (await server.ctx.registry.lookup(body.model as string, route === "/rerank" ? "rerank" : "embed")).layout.maxLength;
      expect(Number(n)).toBeGreaterThan(max);
      expect([route, param, Number(n) > max + 1]).toEqual([route, param, cut]);
      // a lower bound of the library's count
      expect(Number(n)).toBeLessThanOrEqual((await rust.encode(text, null, { addSpecialTokens: true })).getLength());
    }
    // a short input still names its exact count (tokenized whole)
    const short = await postJson(`${server.url}/embeddings`, { model: "roberta-cls", input: "word ".repeat(300), truncate: false });
    expect(short.status).toBe(413);
    expect(short.json.error.message).toMatch(/^`input` has \d+ tokens/);
    expect(short.json.error.message).not.toContain("at least");
  }, 300_000);
});
