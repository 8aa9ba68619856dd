// bge-m3 (hybrid) models through the HTTP API: dense, lexical weights and multi-vectors from one run, compared with
// the generator's plain-torch reference of FlagEmbedding's algorithm (test/fixtures/generate/bgem3.py), in both
// layouts (aapot/bge-m3-onnx: heads in the graph; Xenova/bge-m3: last_hidden_state only), batched and alone.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunningServer } from "../../src/server/serve";
import { fixture, maxAbsDiff, postJson, reference, sparseDiff, startTestServer } from "../helpers";

interface Case {
  text: string;
  input_ids: number[];
  dense: number[];
  sparse: { indices: number[]; values: number[] };
  multi_vector: number[][];
}
let ref: { cases: Case[]; query: Case; rerank_dense_cosine: number[]; unused_token_ids: number[] };
let server: RunningServer;
let url: string;
let baai: string;
let xenova: string;

beforeAll(async () => {
  ref = await reference("bge-m3");
  // BAAI/bge-m3's own layout: an encoder export with the heads beside it as pickled torch files (never read: these
  // stand-ins are not even valid pickles).
  const tmp = mkdtempSync(join(tmpdir(), "bge-m3-"));
  baai = join(tmp, "bge-m3-baai");
  cpSync(fixture("bge-m3-xenova"), baai, { recursive: true });
  for (const f of ["sparse_linear.pt", "colbert_linear.pt"]) writeFileSync(join(baai, f), "not a pickle");
  // Xenova/bge-m3's config.json as published: 8194 positions (the tiny fixture's graph has 130; no input reaches them).
  xenova = join(tmp, "bge-m3-xenova-8194");
  cpSync(fixture("bge-m3-xenova"), xenova, { recursive: true });
  const config = JSON.parse(readFileSync(join(xenova, "config.json"), "utf8"));
  writeFileSync(join(xenova, "config.json"), JSON.stringify({ ...config, max_position_embeddings: 8194 }));
  server = await startTestServer({
    "model-id": [fixture("bge-m3-onnx"), fixture("bge-m3-xenova"), baai, xenova],
    "pooling-method": ["auto", "cls", "auto", "auto"],
    "batch-size": "4",
    // The 15 reference texts hold 516 vectors after CLS: one request of them passes, two of them do not.
    "max-vectors-per-request": "600",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
  rmSync(join(baai, ".."), { recursive: true, force: true });
});

function expectMulti(got: number[][], want: number[][]) {
  expect(got.length).toBe(want.length);
  got.forEach((v, i) => expect(maxAbsDiff(v, want[i]!)).toBeLessThanOrEqual(1e-4));
}

function fromBase64(s: string): Float32Array {
  const bytes = Buffer.from(s, "base64");
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

describe("bge-m3-onnx (aapot layout): parity with FlagEmbedding's algorithm", () => {
  test("dense by default on /embeddings, batched and alone", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model: "bge-m3-onnx", input: ref.cases.map((c) => c.text) });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => expect(maxAbsDiff(json.data[i].embedding, c.dense)).toBeLessThanOrEqual(1e-4));
    expect(json.usage.prompt_tokens).toBe(ref.cases.reduce((s, c) => s + c.input_ids.length, 0));
    for (const c of ref.cases.slice(0, 5)) {
      const one = await postJson(`${url}/embeddings`, { model: "bge-m3-onnx", input: c.text, output: "dense" });
      expect(maxAbsDiff(one.json.data[0].embedding, c.dense)).toBeLessThanOrEqual(1e-4);
    }
  });

  test('output "sparse": lexical weights as {indices, values}, ascending, special tokens dropped', async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model: "bge-m3-onnx", input: ref.cases.map((c) => c.text), output: "sparse" });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => {
      const e = json.data[i].embedding;
      expect(e.indices).toEqual([...e.indices].sort((a: number, b: number) => a - b));
      for (const id of ref.unused_token_ids) expect(e.indices).not.toContain(id);
      expect(sparseDiff(e, c.sparse)).toBeLessThanOrEqual(1e-4);
      expect(e.indices).toEqual(c.sparse.indices);
    });
    for (const c of ref.cases.slice(0, 6)) {
      const one = await postJson(`${url}/embeddings`, { model: "bge-m3-onnx", input: [c.text], output: "sparse" });
      expect(sparseDiff(one.json.data[0].embedding, c.sparse)).toBeLessThanOrEqual(1e-4);
    }
  });

  test("/embed_sparse answers bge-m3's lexical weights in TEI's shape", async () => {
    const { status, json } = await postJson(`${url}/embed_sparse`, { model: "bge-m3-onnx", inputs: ref.cases.map((c) => c.text) });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => {
      const got = { indices: json[i].map((x: { index: number }) => x.index), values: json[i].map((x: { value: number }) => x.value) };
      expect(sparseDiff(got, c.sparse)).toBeLessThanOrEqual(1e-4);
    });
    const top = await postJson(`${url}/embed_sparse`, { model: "bge-m3-onnx", inputs: ref.cases[4]!.text, top_k: 3 });
    const best = ref.cases[4]!.sparse.values.map((v, k) => [v, ref.cases[4]!.sparse.indices[k]!] as const).sort((a, b) => b[0] - a[0]).slice(0, 3);
    expect(top.json[0].map((x: { index: number }) => x.index)).toEqual(best.map((x) => x[1]).sort((a, b) => a - b));
  });

  test('output "multi_vector": one normalised vector per token after CLS, float and base64', async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model: "bge-m3-onnx", input: ref.cases.map((c) => c.text), output: "multi_vector" });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => expectMulti(json.data[i].embedding, c.multi_vector));
    const c = ref.cases[3]!;
    const b64 = await postJson(`${url}/embeddings`, { model: "bge-m3-onnx", input: c.text, output: "multi_vector", encoding_format: "base64" });
    const [rows, dim] = b64.json.data[0].shape;
    expect([rows, dim]).toEqual([c.multi_vector.length, 32]);
    const flat = fromBase64(b64.json.data[0].embedding);
    expectMulti(Array.from({ length: rows }, (_, r) => Array.from(flat.subarray(r * dim, (r + 1) * dim))), c.multi_vector);
  });

  test("a multi-vector answer past --max-vectors-per-request is a 413 before it runs; dense and sparse are not bounded", async () => {
    const texts = [...ref.cases, ...ref.cases].map((c) => c.text);
    const { status, json } = await postJson(`${url}/embeddings`, { model: "bge-m3-onnx", input: texts, output: ["dense", "multi_vector"] });
    expect(status).toBe(413);
    expect(json.error.code).toBe("too_many_vectors");
    expect(json.error.message).toMatch(/1032 token vectors/);
    expect((await postJson(`${url}/embeddings`, { model: "bge-m3-onnx", input: texts, output: ["dense", "sparse"] })).status).toBe(200);
  });

  test("all three outputs from one request (one run per batch)", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, {
      model: "bge-m3-onnx", input: ref.cases.map((c) => c.text), output: ["dense", "sparse", "multi_vector"],
    });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => {
      const e = json.data[i].embedding;
      expect(Object.keys(e).sort()).toEqual(["dense", "multi_vector", "sparse"]);
      expect(maxAbsDiff(e.dense, c.dense)).toBeLessThanOrEqual(1e-4);
      expect(sparseDiff(e.sparse, c.sparse)).toBeLessThanOrEqual(1e-4);
      expectMulti(e.multi_vector, c.multi_vector);
    });
    const two = await postJson(`${url}/embeddings`, { model: "bge-m3-onnx", input: ref.cases[0]!.text, output: ["sparse", "dense"], encoding_format: "base64" });
    expect(Object.keys(two.json.data[0].embedding).sort()).toEqual(["dense", "sparse"]);
    expect(maxAbsDiff(fromBase64(two.json.data[0].embedding.dense), ref.cases[0]!.dense)).toBeLessThanOrEqual(1e-4);
  });

  test("/rerank ranks by dense cosine", async () => {
    const docs = ref.cases.map((c) => c.text);
    const { status, json } = await postJson(`${url}/rerank`, { model: "bge-m3-onnx", query: ref.query.text, documents: docs });
    expect(status).toBe(200);
    const want = ref.rerank_dense_cosine.map((s, i) => [s, i] as const).sort((a, b) => b[0] - a[0]);
    expect(json.results.map((r: { index: number }) => r.index)).toEqual(want.map((x) => x[1]));
    for (const r of json.results) expect(Math.abs(r.relevance_score - ref.rerank_dense_cosine[r.index]!)).toBeLessThanOrEqual(1e-4);
  });

  test("/models reports a hybrid model with its routes", async () => {
    const models = await (await fetch(`${url}/models`)).json();
    const m = models.data.find((x: { id: string }) => x.id === "bge-m3-onnx");
    expect(m.task).toBe("hybrid");
    expect(m.capabilities).toEqual(["embed", "embed_sparse", "rerank"]);
    expect(m.dimensions).toBe(32);
  });

  test("bad output options answer 400 in the one error shape", async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ["/embeddings", { model: "bge-m3-onnx", input: "x", output: "colbert" }, /`output` must be one of dense, sparse, multi_vector/],
      ["/embeddings", { model: "bge-m3-onnx", input: "x", output: [] }, /`output` must be/],
      ["/embeddings", { model: "bge-m3-onnx", input: "x", output: ["dense", "dense"] }, /twice/],
      ["/embeddings", { model: "bge-m3-onnx", input: "x", output: "sparse", dimensions: 8 }, /dense output only/],
      ["/embeddings", { model: "bge-m3-onnx", input: "x", output: "multi_vector", encoding_format: "int8" }, /float or base64/],
      ["/embeddings", { model: "bge-m3-onnx", input: "x", output: "sparse", top_k: 0 }, /top_k/],
    ];
    for (const [route, body, message] of cases) {
      const { status, json } = await postJson(`${url}${route}`, body);
      expect(status).toBe(400);
      expect(json.error.message).toMatch(message);
    }
  });
});

describe("encoder-only layouts", () => {
  test("Xenova/bge-m3 layout: dense = CLS + normalise (with --pooling-method cls), batched and alone", async () => {
    const { json } = await postJson(`${url}/embeddings`, { model: "bge-m3-xenova", input: ref.cases.map((c) => c.text) });
    ref.cases.forEach((c, i) => expect(maxAbsDiff(json.data[i].embedding, c.dense)).toBeLessThanOrEqual(1e-4));
    const one = await postJson(`${url}/embeddings`, { model: "bge-m3-xenova", input: ref.cases[5]!.text });
    expect(maxAbsDiff(one.json.data[0].embedding, ref.cases[5]!.dense)).toBeLessThanOrEqual(1e-4);
    const sparse = await postJson(`${url}/embeddings`, { model: "bge-m3-xenova", input: "x", output: "sparse" });
    expect(sparse.status).toBe(400);
    expect(sparse.json.error.message).toMatch(/gives dense vectors only/);
  });

  test("Xenova/bge-m3 layout without --pooling-method: taken for bge-m3 (XLMRobertaModel, 8194 positions), CLS + normalise", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model: "bge-m3-xenova-8194", input: ref.cases.map((c) => c.text) });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => expect(maxAbsDiff(json.data[i].embedding, c.dense)).toBeLessThanOrEqual(1e-4));
    const one = await postJson(`${url}/embeddings`, { model: "bge-m3-xenova-8194", input: ref.cases[5]!.text });
    expect(maxAbsDiff(one.json.data[0].embedding, ref.cases[5]!.dense)).toBeLessThanOrEqual(1e-4);
    const models = await (await fetch(`${url}/models`)).json();
    expect(models.data.find((m: { id: string }) => m.id === "bge-m3-xenova-8194").pooling).toBe("cls");
  });

  test("BAAI layout (pickled heads beside the export): CLS dense without flags; sparse and multi-vector refused with the reason", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model: "bge-m3-baai", input: ref.cases.map((c) => c.text) });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => expect(maxAbsDiff(json.data[i].embedding, c.dense)).toBeLessThanOrEqual(1e-4));
    for (const [route, body] of [
      ["/embeddings", { model: "bge-m3-baai", input: "x", output: "multi_vector" }],
      ["/embeddings", { model: "bge-m3-baai", input: "x", output: ["dense", "sparse"] }],
      ["/embed_sparse", { model: "bge-m3-baai", inputs: "x" }],
    ] as const) {
      const res = await postJson(`${url}${route}`, body);
      expect(res.status).toBe(400);
      expect(res.json.error.message).toMatch(/pickled PyTorch files, which this server does not load/);
    }
    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(200);
  });
});
