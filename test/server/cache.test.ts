// The result cache seen from HTTP: per-input hits, output options applied after the cache, the sqlite file across
// a restart, a corrupt file, Redis shared by two server processes, and Redis down.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunningServer } from "../../src/server/serve";
import { fixture, fixtureBytes, postJson, startTestServer } from "../helpers";
import { getEncoding } from "js-tiktoken";

const threads = ["--tokenizer-workers", "1", "--num-threads", "1"];
import { freePort, startServer } from "../../bench/process";
import { startRedis, type TestRedis } from "../redis-server";

const inputs = Array.from({ length: 32 }, (_, i) => `input number ${i}: the cat sat on mat ${i * 7}`);

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(name)).reduce((s, l) => s + Number(l.split(" ").pop()), 0);
}

describe("result cache (memory)", () => {
  let server: RunningServer;
  let plain: RunningServer;
  beforeAll(async () => {
    server = await startTestServer({ "model-id": [fixture("bert-mean-norm"), fixture("bert-rerank"), fixture("bert-classify")], "result-cache": "memory" });
    plain = await startTestServer({ "model-id": fixture("bert-mean-norm") });
  });
  afterAll(async () => {
    await server?.shutdown();
    await plain?.shutdown();
  });

  test("a request with 31 cached inputs and 1 new runs one input, with identical vectors and usage", async () => {
    const body = { model: "bert-mean-norm", input: inputs };
    const first = await postJson(`${server.url}/embeddings`, body);
    expect(first.status).toBe(200);
    expect(first.headers.get("x-cache-hits")).toBe("0");
    const tokensBefore = await metric(server.url, "infinity_tokens_total");
    const mixed = [...inputs.slice(0, 31), "a new input"];
    const second = await postJson(`${server.url}/embeddings`, { ...body, input: mixed });
    expect(second.headers.get("x-cache-hits")).toBe("31");
    const reference = await postJson(`${plain.url}/embeddings`, { input: mixed });
    expect(second.json.data.map((d: any) => d.embedding)).toEqual(reference.json.data.map((d: any) => d.embedding));
    expect(second.json.usage).toEqual(reference.json.usage);
    // Only the new input reached the model.
    const newTokens = reference.json.data.length && (await postJson(`${plain.url}/embeddings`, { input: "a new input" })).json.usage.prompt_tokens;
    expect((await metric(server.url, "infinity_tokens_total")) - tokensBefore).toBe(newTokens);
    expect(await metric(server.url, "infinity_result_cache_hits_total")).toBeGreaterThanOrEqual(31);
    expect(await metric(server.url, "infinity_result_cache_bytes")).toBeGreaterThan(32 * 4 * 32);
    expect(plain.ctx.cache.enabled).toBe(false);
    expect(reference.headers.get("x-cache-hits")).toBeNull();
  });

  test("dimensions and base64 are applied after the cache: one entry serves them all", async () => {
    const body = { model: "bert-mean-norm", input: inputs.slice(0, 4), dimensions: 8, encoding_format: "base64" };
    const cached = await postJson(`${server.url}/embeddings`, body);
    expect(cached.headers.get("x-cache-hits")).toBe("4");
    const computed = await postJson(`${plain.url}/embeddings`, { ...body, model: undefined });
    expect(cached.json.data).toEqual(computed.json.data);
  });

  test("prompts are part of the key", async () => {
    const a = await postJson(`${server.url}/embeddings`, { model: "bert-mean-norm", input: ["query: " + inputs[0]] });
    expect(a.headers.get("x-cache-hits")).toBe("0");
  });

  test("token ids: OpenAI's cl100k_base ids share the entry of the text they decode to; the same numbers as model-vocabulary ids (TEI /embed) are apart", async () => {
    // Ids that are valid in both vocabularies (bert-mean-norm's has 1600 ids).
    const ids = [2, 50, 1148, 374, 3];
    const decoded = getEncoding("cl100k_base").decode(ids);
    const openai = await postJson(`${server.url}/embeddings`, { model: "bert-mean-norm", input: [ids] });
    expect(openai.status).toBe(200);
    expect(openai.headers.get("x-cache-hits")).toBe("0");
    const text = await postJson(`${server.url}/embeddings`, { model: "bert-mean-norm", input: [decoded] });
    expect(text.headers.get("x-cache-hits")).toBe("1");
    expect(text.json.data).toEqual(openai.json.data);
    const tei = await postJson(`${server.url}/embed`, { model: "bert-mean-norm", inputs: [ids] });
    expect(tei.status).toBe(200);
    expect(tei.headers.get("x-cache-hits")).toBe("0");
    const uncached = await postJson(`${plain.url}/embed`, { inputs: [ids] });
    expect(tei.json).toEqual(uncached.json);
    expect(tei.json[0]).not.toEqual(openai.json.data[0].embedding);
  });

  test("rerank caches per (query, document) pair", async () => {
    const body = { model: "bert-rerank", query: "where do cats sit?", documents: inputs.slice(0, 6), return_documents: true };
    const first = await postJson(`${server.url}/rerank`, body);
    expect(first.headers.get("x-cache-hits")).toBe("0");
    const again = await postJson(`${server.url}/rerank`, { ...body, documents: [...inputs.slice(0, 6), "a rocket"] });
    expect(again.headers.get("x-cache-hits")).toBe("6");
    const scoreOf = (r: any, i: number) => r.json.results.find((x: any) => x.index === i).relevance_score;
    for (let i = 0; i < 6; i++) expect(scoreOf(again, i)).toBe(scoreOf(first, i));
    const otherQuery = await postJson(`${server.url}/rerank`, { ...body, query: "rockets" });
    expect(otherQuery.headers.get("x-cache-hits")).toBe("0");
    const raw = await postJson(`${server.url}/rerank`, { ...body, raw_scores: true });
    expect(raw.headers.get("x-cache-hits")).toBe("6");
    expect(first.json.usage).toEqual(raw.json.usage);
  });

  test("TEI routes (/embed, /rerank {query, texts}, /predict, /similarity) hit the entries of the OpenAI/Cohere routes", async () => {
    const texts = Array.from({ length: 4 }, (_, i) => `a TEI client asks about mat ${i * 11}`);
    const viaOpenAi = await postJson(`${server.url}/embeddings`, { model: "bert-mean-norm", input: texts });
    expect(viaOpenAi.headers.get("x-cache-hits")).toBe("0");
    // TEI /embed: the same entries (same prompt, same truncation); vectors as a cache-less server computes them.
    const tei = await postJson(`${server.url}/embed`, { model: "bert-mean-norm", inputs: texts });
    expect(tei.status).toBe(200);
    expect(tei.headers.get("x-cache-hits")).toBe("4");
    expect(tei.json).toEqual((await postJson(`${plain.url}/embed`, { inputs: texts })).json);
    // TEI-shaped rerank reads the (query, document) pairs the Cohere shape stored, and the other way round.
    const query = "which mat did the cat sit on?";
    const cohere = await postJson(`${server.url}/rerank`, { model: "bert-rerank", query, documents: texts, raw_scores: true });
    expect(cohere.headers.get("x-cache-hits")).toBe("0");
    const teiRerank = await postJson(`${server.url}/rerank`, { model: "bert-rerank", query, texts, raw_scores: true });
    expect(teiRerank.status).toBe(200);
    expect(teiRerank.headers.get("x-cache-hits")).toBe("4");
    const scores = (items: { index: number; score?: number; relevance_score?: number }[]) => items.map((x) => [x.index, x.score ?? x.relevance_score]);
    expect(scores(teiRerank.json)).toEqual(scores(cohere.json.results));
    // /predict reads /classify's entries.
    const classified = await postJson(`${server.url}/classify`, { model: "bert-classify", input: texts });
    expect(classified.headers.get("x-cache-hits")).toBe("0");
    const predicted = await postJson(`${server.url}/predict`, { model: "bert-classify", inputs: texts.map((t) => [t]) });
    expect(predicted.status).toBe(200);
    expect(predicted.headers.get("x-cache-hits")).toBe("4");
    // /similarity embeds its sentences through the same entries.
    const similar = await postJson(`${server.url}/similarity`, { model: "bert-mean-norm", inputs: { source_sentence: texts[0], sentences: texts.slice(1) } });
    expect(similar.status).toBe(200);
    expect(similar.headers.get("x-cache-hits")).toBe("4");
    expect(similar.json).toEqual((await postJson(`${plain.url}/similarity`, { inputs: { source_sentence: texts[0], sentences: texts.slice(1) } })).json);
  });

  test("classify caches per input", async () => {
    const body = { model: "bert-classify", input: inputs.slice(0, 3) };
    const first = await postJson(`${server.url}/classify`, body);
    const again = await postJson(`${server.url}/classify`, body);
    expect(again.headers.get("x-cache-hits")).toBe("3");
    expect(again.json.data).toEqual(first.json.data);
  });
});

describe("result cache (media)", () => {
  test("image inputs are keyed by their bytes, apart from text", async () => {
    const s = await startTestServer({ "model-id": fixture("clip"), "result-cache": "memory", "media-workers": "1" });
    try {
      const png = `data:image/png;base64,${Buffer.from(await fixtureBytes("media/landscape.png")).toString("base64")}`;
      const jpg = `data:image/jpeg;base64,${Buffer.from(await fixtureBytes("media/portrait.jpg")).toString("base64")}`;
      const first = await postJson(`${s.url}/embeddings`, { input: [png], modality: "image" });
      expect(first.status).toBe(200);
      expect(first.headers.get("x-cache-hits")).toBe("0");
      const again = await postJson(`${s.url}/embeddings`, { input: [jpg, png], modality: "image" });
      expect(again.headers.get("x-cache-hits")).toBe("1");
      expect(again.json.data[1].embedding).toEqual(first.json.data[0].embedding);
      // The same bytes as text are another input.
      const text = await postJson(`${s.url}/embeddings`, { input: [png.slice(0, 200)] });
      expect(text.headers.get("x-cache-hits")).toBe("0");
    } finally {
      await s.shutdown();
    }
  });
});

describe("result cache (sqlite)", () => {
  test("survives a restart; a corrupt file is moved aside and never fails a request", async () => {
    const dir = mkdtempSync(join(tmpdir(), "infinity-cache-"));
    const path = join(dir, "results.db");
    try {
      // three starts of the same model: no warm-up's timed runs (the cache is under test)
      const flags = { "model-id": fixture("bert-mean-norm"), "result-cache": `sqlite:${path}`, "model-warmup": "false" };
      let s = await startTestServer(flags);
      const first = await postJson(`${s.url}/embeddings`, { input: inputs });
      expect(first.headers.get("x-cache-hits")).toBe("0");
      await s.shutdown();
      s = await startTestServer(flags);
      const second = await postJson(`${s.url}/embeddings`, { input: inputs });
      expect(second.headers.get("x-cache-hits")).toBe("32");
      expect(second.json.data).toEqual(first.json.data);
      await s.shutdown();

      writeFileSync(path, Buffer.alloc(16384, 0x42));
      s = await startTestServer(flags);
      try {
        const third = await postJson(`${s.url}/embeddings`, { input: inputs });
        expect(third.status).toBe(200);
        expect(third.headers.get("x-cache-hits")).toBe("0");
        expect(third.json.data).toEqual(first.json.data);
        expect((await postJson(`${s.url}/embeddings`, { input: inputs })).headers.get("x-cache-hits")).toBe("32");
        expect(readdirSync(dir).some((f) => f.startsWith("results.db.corrupt-"))).toBe(true);
      } finally {
        await s.shutdown();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an sqlite path that cannot be opened serves without a cache", async () => {
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), "result-cache": "sqlite:/nonexistent-dir/sub/results.db", "model-warmup": "false" });
    try {
      const r = await postJson(`${s.url}/embeddings`, { input: inputs.slice(0, 2) });
      expect(r.status).toBe(200);
      expect(r.headers.get("x-cache-hits")).toBe("0");
      expect(await metric(s.url, 'infinity_result_cache_errors_total{op="open"}')).toBe(1);
    } finally {
      await s.shutdown();
    }
  });
});

describe("result cache (redis)", () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  test("two server processes share it: one fills, the other hits", async () => {
    const args = ["--model-id", fixture("bert-mean-norm"), "--result-cache", redis.url];
    const [a, b] = await Promise.all([startServer([...threads, ...args]), startServer([...threads, ...args])]);
    try {
      const filled = await postJson(`${a.url}/embeddings`, { input: inputs });
      expect(filled.headers.get("x-cache-hits")).toBe("0");
      const warmupTokens = await metric(b.url, "infinity_tokens_total");
      const hit = await postJson(`${b.url}/embeddings`, { input: inputs });
      expect(hit.headers.get("x-cache-hits")).toBe("32");
      expect(hit.json.data).toEqual(filled.json.data);
      expect(await metric(b.url, "infinity_result_cache_hits_total")).toBe(32);
      // Nothing reached b's model.
      expect(await metric(b.url, "infinity_tokens_total")).toBe(warmupTokens);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  test("Redis down never fails a request: computed, logged and counted", async () => {
    const dead = `redis://127.0.0.1:${freePort()}`;
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), "result-cache": dead, "model-warmup": "false" });
    try {
      const r = await postJson(`${s.url}/embeddings`, { input: inputs.slice(0, 3) });
      expect(r.status).toBe(200);
      expect(r.json.data.length).toBe(3);
      expect(r.headers.get("x-cache-hits")).toBe("0");
      expect(await metric(s.url, "infinity_result_cache_errors_total")).toBeGreaterThanOrEqual(1);
    } finally {
      await s.shutdown();
    }
  });
});
