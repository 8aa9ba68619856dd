// The result cache for sparse and multi-vector outputs and for /rerank through embedding models: hits answer
// exactly what a cache-less server computes, a mixed request runs only its misses (counted by the model's batch
// inputs in /metrics), top_k / threshold / encoding apply after the cache, and all three backends store both kinds.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunningServer } from "../../src/server/serve";
import { fixture, postJson, startTestServer } from "../helpers";
import { startRedis, type TestRedis } from "../redis-server";

const MODELS = [fixture("splade"), fixture("colbert-pylate"), fixture("bert-mean-norm")];
const texts = Array.from({ length: 6 }, (_, i) => `document ${i}: cats sit on warm mats number ${i * 3}`);

async function metric(url: string, prefix: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(prefix)).reduce((s, l) => s + Number(l.split(" ").pop()), 0);
}

/** Inputs that went through a model's session since the server started (the batches' sizes summed). */
const modelInputs = (url: string, model: string) => metric(url, `infinity_batch_size_sum{model="${model}"}`);

let plain: RunningServer;
beforeAll(async () => {
  plain = await startTestServer({ "model-id": MODELS });
});
afterAll(async () => {
  await plain?.shutdown();
});

/** Requests twice (cold, then all hits) and against the cache-less server: the same answers each time. */
async function sameTwice(url: string, path: string, body: Record<string, unknown>, inputs: number): Promise<any> {
  const first = await postJson(`${url}${path}`, body);
  expect(first.status).toBe(200);
  const again = await postJson(`${url}${path}`, body);
  expect(again.headers.get("x-cache-hits")).toBe(String(inputs));
  const reference = await postJson(`${plain.url}${path}`, body);
  for (const r of [first, again]) {
    expect(r.json.data ?? r.json.results ?? r.json).toEqual(reference.json.data ?? reference.json.results ?? reference.json);
    if (reference.json.usage) expect(r.json.usage).toEqual(reference.json.usage);
  }
  return again;
}

describe("result cache (memory): sparse and multi-vector outputs", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startTestServer({ "model-id": MODELS, "result-cache": "memory" });
  });
  afterAll(async () => {
    await server?.shutdown();
  });

  test("sparse: a mixed request runs only its misses; top_k and threshold apply after the cache", async () => {
    const full = await sameTwice(server.url, "/embed_sparse", { model: "splade", inputs: texts.slice(0, 4) }, 4);
    expect(full.json.length).toBe(4);
    const before = await modelInputs(server.url, "splade");
    const mixed = await postJson(`${server.url}/embed_sparse`, { model: "splade", inputs: [...texts.slice(0, 4), texts[4]] });
    expect(mixed.headers.get("x-cache-hits")).toBe("4");
    expect((await modelInputs(server.url, "splade")) - before).toBe(1);
    expect(mixed.json).toEqual((await postJson(`${plain.url}/embed_sparse`, { model: "splade", inputs: [...texts.slice(0, 4), texts[4]] })).json);
    // Pruned answers from the unpruned entries: hits, equal to what a cache-less server prunes.
    await sameTwice(server.url, "/embed_sparse", { model: "splade", inputs: texts.slice(0, 4), top_k: 3 }, 4);
    await sameTwice(server.url, "/embed_sparse", { model: "splade", inputs: texts.slice(0, 4), threshold: 0.5 }, 4);
    // /embeddings on a sparse model reads the same entries (same input, same prompt).
    const viaOpenAi = await postJson(`${server.url}/embeddings`, { model: "splade", input: texts.slice(0, 4), top_k: 5 });
    expect(viaOpenAi.headers.get("x-cache-hits")).toBe("4");
    expect(viaOpenAi.json.data).toEqual((await postJson(`${plain.url}/embeddings`, { model: "splade", input: texts.slice(0, 4), top_k: 5 })).json.data);
    expect(await metric(server.url, 'infinity_result_cache_hits_total{model="splade"}')).toBeGreaterThanOrEqual(4 * 5);
  });

  test("multi-vector: queries and documents are separate entries; base64 applies after the cache", async () => {
    await sameTwice(server.url, "/embeddings", { model: "colbert-pylate", input: texts.slice(0, 3), input_type: "document" }, 3);
    // The same texts as queries are encoded differently (prefix, expansion): not served by the document entries.
    const q = await postJson(`${server.url}/embeddings`, { model: "colbert-pylate", input: texts.slice(0, 3), input_type: "query" });
    expect(q.headers.get("x-cache-hits")).toBe("0");
    await sameTwice(server.url, "/embeddings", { model: "colbert-pylate", input: texts.slice(0, 3), input_type: "query" }, 3);
    await sameTwice(server.url, "/embeddings", { model: "colbert-pylate", input: texts.slice(0, 3), encoding_format: "base64" }, 3);
    const before = await modelInputs(server.url, "colbert-pylate");
    const mixed = await postJson(`${server.url}/embeddings`, { model: "colbert-pylate", input: [texts[5], ...texts.slice(0, 3)] });
    expect(mixed.headers.get("x-cache-hits")).toBe("3");
    expect((await modelInputs(server.url, "colbert-pylate")) - before).toBe(1);
  });

  test("/rerank through sparse, multi-vector and dense embedders: query and documents cached, scores identical", async () => {
    for (const model of ["splade", "colbert-pylate", "bert-mean-norm"]) {
      const body = { model, query: "where do cats sit?", documents: texts, return_documents: true };
      await sameTwice(server.url, "/rerank", body, texts.length + 1);
      const before = await modelInputs(server.url, model);
      const more = await postJson(`${server.url}/rerank`, { ...body, documents: [...texts, "a rocket to the moon"] });
      expect(more.headers.get("x-cache-hits")).toBe(String(texts.length + 1));
      expect((await modelInputs(server.url, model)) - before).toBe(1);
      expect(more.json.results).toEqual((await postJson(`${plain.url}/rerank`, { ...body, documents: [...texts, "a rocket to the moon"] })).json.results);
    }
    // A dense model's rerank documents are the same entries as its /embeddings documents (input_type document).
    const docs = await postJson(`${server.url}/embeddings`, { model: "bert-mean-norm", input: texts, input_type: "document" });
    expect(docs.headers.get("x-cache-hits")).toBe(String(texts.length));
  });

  test("the vector limit still holds for cached multi-vector inputs", async () => {
    const small = await startTestServer({ "model-id": fixture("colbert-pylate"), "result-cache": "memory", "max-vectors-per-request": "40" });
    try {
      const one = await postJson(`${small.url}/embeddings`, { input: texts[0], input_type: "query" });
      expect(one.status).toBe(200);
      const rows = one.json.data[0].embedding.length;
      const n = Math.floor(40 / rows) + 1;
      const many = await postJson(`${small.url}/embeddings`, { input: Array(n).fill(texts[0]), input_type: "query" });
      expect(many.status).toBe(413);
      expect(many.json.error.message).toContain("--max-vectors-per-request");
    } finally {
      await small.shutdown();
    }
  });
});

describe("result cache: sparse and multi-vector entries in sqlite and redis", () => {
  let redis: TestRedis;
  let dir: string;
  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), "infinity-cache-outputs-"));
  });
  afterAll(async () => {
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const backend of ["sqlite", "redis"] as const) {
    test(`${backend}: hits give identical sparse vectors and token matrices`, async () => {
      const where = backend === "sqlite" ? `sqlite:${join(dir, "results.db")}` : redis.url;
      const server = await startTestServer({ "model-id": MODELS.slice(0, 2), "result-cache": where });
      try {
        await sameTwice(server.url, "/embed_sparse", { model: "splade", inputs: texts.slice(0, 3) }, 3);
        await sameTwice(server.url, "/embeddings", { model: "colbert-pylate", input: texts.slice(0, 3), input_type: "query" }, 3);
        await sameTwice(server.url, "/rerank", { model: "colbert-pylate", query: "cats?", documents: texts.slice(0, 3) }, 4);
      } finally {
        await server.shutdown();
      }
    });
  }
});

describe("result cache: a hybrid (bge-m3) model", () => {
  // One cached and one cache-less server for both tests; each test asks for texts the other does not.
  const model = fixture("bge-m3-onnx");
  let server: RunningServer;
  let reference: RunningServer;
  beforeAll(async () => {
    [server, reference] = await Promise.all([startTestServer({ "model-id": model, "result-cache": "memory" }), startTestServer({ "model-id": model })]);
  });
  afterAll(async () => {
    await Promise.all([server?.shutdown(), reference?.shutdown()]);
  });

  test("its lexical weights on /embed_sparse are cached apart from its dense vectors", async () => {
    const body = { inputs: texts.slice(0, 3), top_k: 4 };
    const first = await postJson(`${server.url}/embed_sparse`, body);
    const again = await postJson(`${server.url}/embed_sparse`, body);
    expect(again.headers.get("x-cache-hits")).toBe("3");
    const want = (await postJson(`${reference.url}/embed_sparse`, body)).json;
    expect(first.json).toEqual(want);
    expect(again.json).toEqual(want);
    // The same texts' dense vectors are other entries.
    const dense = await postJson(`${server.url}/embeddings`, { input: texts.slice(0, 3) });
    expect(dense.headers.get("x-cache-hits")).toBe("0");
  });

  test("each `output` of /embeddings is its own entry: no kind answers another's, all equal a cache-less server", async () => {
    // texts the test above did not cache
    const input = texts.slice(3, 6);
    const call = async (url: string, body: Record<string, unknown>) => {
      const r = await postJson(`${url}/embeddings`, { input, ...body });
      expect(r.status).toBe(200);
      return r;
    };
    // Cold, one kind after another over the same texts: every kind misses (a collision would hit).
    const kinds: Record<string, unknown>[] = [
      { output: "sparse" },
      { output: "multi_vector" },
      { output: ["dense", "sparse"] },
      { output: ["sparse", "multi_vector"] },
      { output: ["dense", "sparse", "multi_vector"] },
      {},
    ];
    for (const body of kinds) {
      const cold = await call(server.url, body);
      expect([JSON.stringify(body), cold.headers.get("x-cache-hits")]).toEqual([JSON.stringify(body), "0"]);
      const want = await call(reference.url, body);
      expect(cold.json.data).toEqual(want.json.data);
      const hot = await call(server.url, body);
      expect(hot.headers.get("x-cache-hits")).toBe("3");
      expect(hot.json.data).toEqual(want.json.data);
      expect(hot.json.usage).toEqual(want.json.usage);
    }
    // A list in another order is the same entry; pruning, dimensions and base64 apply after the cache.
    for (const body of [
      { output: ["multi_vector", "sparse", "dense"], encoding_format: "base64" },
      { output: ["sparse", "dense"], dimensions: 8, top_k: 3 },
      { output: "multi_vector", encoding_format: "base64" },
    ]) {
      const hot = await call(server.url, body);
      expect(hot.headers.get("x-cache-hits")).toBe("3");
      expect(hot.json.data).toEqual((await call(reference.url, body)).json.data);
    }
    // output "sparse" on /embeddings and /embed_sparse share entries (same arrays, same key).
    const tei = await postJson(`${server.url}/embed_sparse`, { inputs: input });
    expect(tei.headers.get("x-cache-hits")).toBe("3");
    expect(tei.json).toEqual((await postJson(`${reference.url}/embed_sparse`, { inputs: input })).json);
  });
});

describe("result cache: an inference-free sparse model (OpenSearch)", () => {
  test("queries (static weights, not cached) and documents (cached) of the same text never share an entry", async () => {
    const model = fixture("opensearch-sparse");
    const [server, reference] = await Promise.all([startTestServer({ "model-id": model, "result-cache": "memory" }), startTestServer({ "model-id": model })]);
    const input = texts.slice(0, 3);
    try {
      const sparse = (url: string, inputType?: string) => postJson(`${url}/embed_sparse`, { inputs: input, ...(inputType ? { input_type: inputType } : {}) });
      const docs = await sparse(server.url, "document");
      expect(docs.headers.get("x-cache-hits")).toBe("0");
      const wantDocs = (await sparse(reference.url, "document")).json;
      expect(docs.json).toEqual(wantDocs);
      // The same texts as queries: the static encoding, never the cached document vectors.
      const wantQueries = (await sparse(reference.url, "query")).json;
      expect(wantQueries).not.toEqual(wantDocs);
      for (let i = 0; i < 2; i++) {
        const q = await sparse(server.url, "query");
        expect(q.headers.get("x-cache-hits")).toBe("0");
        expect(q.json).toEqual(wantQueries);
      }
      // Documents hit, through both routes and the default route (document for this model).
      for (const r of [await sparse(server.url, "document"), await sparse(server.url)]) {
        expect(r.headers.get("x-cache-hits")).toBe("3");
        expect(r.json).toEqual(wantDocs);
      }
      const viaOpenAi = await postJson(`${server.url}/embeddings`, { input, input_type: "search_document" });
      expect(viaOpenAi.headers.get("x-cache-hits")).toBe("3");
      // /rerank: the query from its weights, the documents from the cache; scores as a cache-less server's.
      const body = { query: input[0], documents: input };
      const ranked = await postJson(`${server.url}/rerank`, body);
      expect(ranked.headers.get("x-cache-hits")).toBe("3");
      expect(ranked.json.results).toEqual((await postJson(`${reference.url}/rerank`, body)).json.results);
    } finally {
      await Promise.all([server.shutdown(), reference.shutdown()]);
    }
  });
});
