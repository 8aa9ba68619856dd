// bge-m3 (hybrid) models through the HTTP API: dense, lexical weights and multi-vectors from one run, compared with
// the generator's plain-torch reference of FlagEmbedding's algorithm (test/fixtures/generate/bgem3.py), in its
// layouts (aapot/bge-m3-onnx: heads in the graph; BAAI/bge-m3: token_embeddings export + torch.save'd heads, read by
// the server and run as a head graph; Xenova/bge-m3: last_hidden_state only), batched and alone.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildConfig } from "../../src/config";
import { Registry } from "../../src/engine/registry";
import type { RunningServer } from "../../src/server/serve";
import { TokenizerPool } from "../../src/tokenize/pool";
import { fixture, maxAbsDiff, offlineHub, postJson, reference, ROOT, sparseDiff, startTestServer } from "../helpers";

const PICKLES = join(ROOT, "test", "fixtures", "torch-state-dict");

interface Case {
  text: string;
  input_ids: number[];
  dense: number[];
  sparse: { indices: number[]; values: number[] };
  multi_vector: number[][];
}
let ref: { cases: Case[]; query: Case; rerank_dense_cosine: number[]; unused_token_ids: number[] };
let fp16: { cases: Array<Pick<Case, "text" | "sparse" | "multi_vector">> };
let server: RunningServer;
let url: string;
let tmp: string;
let baaiFp16: string;
let xenova: string;

beforeAll(async () => {
  ref = await reference("bge-m3");
  fp16 = await reference("bge-m3-fp16-heads");
  tmp = mkdtempSync(join(tmpdir(), "bge-m3-"));
  // BAAI's layout with the heads saved in float16 (the reference loads them into float32 nn.Linear, as FlagEmbedding).
  baaiFp16 = join(tmp, "bge-m3-baai-fp16");
  cpSync(fixture("bge-m3-baai"), baaiFp16, { recursive: true });
  for (const f of ["sparse_linear", "colbert_linear"]) copyFileSync(join(PICKLES, `${f}.fp16.pt`), join(baaiFp16, `${f}.pt`));
  // Xenova/bge-m3's config.json as published: 8194 positions (the tiny fixture's graph has 130; no input reaches them).
  xenova = join(tmp, "bge-m3-xenova-8194");
  cpSync(fixture("bge-m3-xenova"), xenova, { recursive: true });
  const config = JSON.parse(readFileSync(join(xenova, "config.json"), "utf8"));
  writeFileSync(join(xenova, "config.json"), JSON.stringify({ ...config, max_position_embeddings: 8194 }));
  server = await startTestServer({
    "model-id": [fixture("bge-m3-onnx"), fixture("bge-m3-xenova"), fixture("bge-m3-baai"), xenova, baaiFp16],
    "pooling-method": ["auto", "cls", "auto", "auto", "auto"],
    "batch-size": "4",
    // warm-up stays on: this family's warm-up hook (src/engine/families/) runs here and nowhere else in the suite
    // The 15 reference texts hold 516 vectors after CLS: one request of them passes, two of them do not.
    "max-vectors-per-request": "600",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
  rmSync(tmp, { recursive: true, force: true });
});

function expectMulti(got: number[][], want: number[][]) {
  expect(got.length).toBe(want.length);
  got.forEach((v, i) => expect(maxAbsDiff(v, want[i]!)).toBeLessThanOrEqual(1e-4));
}

function fromBase64(s: string): Float32Array {
  const bytes = Buffer.from(s, "base64");
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

for (const [model, layout] of [["bge-m3-onnx", "aapot layout: heads in the graph"], ["bge-m3-baai", "BAAI layout: torch.save'd heads run by the server"]] as const) describe(`${model} (${layout}): parity with FlagEmbedding's algorithm`, () => {
  test("dense by default on /embeddings, batched and alone", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model, input: ref.cases.map((c) => c.text) });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => expect(maxAbsDiff(json.data[i].embedding, c.dense)).toBeLessThanOrEqual(1e-4));
    expect(json.usage.prompt_tokens).toBe(ref.cases.reduce((s, c) => s + c.input_ids.length, 0));
    for (const c of ref.cases.slice(0, 5)) {
      const one = await postJson(`${url}/embeddings`, { model, input: c.text, output: "dense" });
      expect(maxAbsDiff(one.json.data[0].embedding, c.dense)).toBeLessThanOrEqual(1e-4);
    }
  });

  test('output "sparse": lexical weights as {indices, values}, ascending, special tokens dropped', async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model, input: ref.cases.map((c) => c.text), output: "sparse" });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => {
      const e = json.data[i].embedding;
      expect(e.indices).toEqual([...e.indices].sort((a: number, b: number) => a - b));
      for (const id of ref.unused_token_ids) expect(e.indices).not.toContain(id);
      expect(sparseDiff(e, c.sparse)).toBeLessThanOrEqual(1e-4);
      expect(e.indices).toEqual(c.sparse.indices);
    });
    for (const c of ref.cases.slice(0, 6)) {
      const one = await postJson(`${url}/embeddings`, { model, input: [c.text], output: "sparse" });
      expect(sparseDiff(one.json.data[0].embedding, c.sparse)).toBeLessThanOrEqual(1e-4);
    }
  });

  test("/embed_sparse answers bge-m3's lexical weights in TEI's shape", async () => {
    const { status, json } = await postJson(`${url}/embed_sparse`, { model, inputs: ref.cases.map((c) => c.text) });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => {
      const got = { indices: json[i].map((x: { index: number }) => x.index), values: json[i].map((x: { value: number }) => x.value) };
      expect(sparseDiff(got, c.sparse)).toBeLessThanOrEqual(1e-4);
    });
    const top = await postJson(`${url}/embed_sparse`, { model, inputs: ref.cases[4]!.text, top_k: 3 });
    const best = ref.cases[4]!.sparse.values.map((v, k) => [v, ref.cases[4]!.sparse.indices[k]!] as const).sort((a, b) => b[0] - a[0]).slice(0, 3);
    expect(top.json[0].map((x: { index: number }) => x.index)).toEqual(best.map((x) => x[1]).sort((a, b) => a - b));
  });

  test('output "multi_vector": one normalised vector per token after CLS, float and base64', async () => {
    const { status, json } = await postJson(`${url}/embeddings`, { model, input: ref.cases.map((c) => c.text), output: "multi_vector" });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => expectMulti(json.data[i].embedding, c.multi_vector));
    const c = ref.cases[3]!;
    const b64 = await postJson(`${url}/embeddings`, { model, input: c.text, output: "multi_vector", encoding_format: "base64" });
    const [rows, dim] = b64.json.data[0].shape;
    expect([rows, dim]).toEqual([c.multi_vector.length, 32]);
    const flat = fromBase64(b64.json.data[0].embedding);
    expectMulti(Array.from({ length: rows }, (_, r) => Array.from(flat.subarray(r * dim, (r + 1) * dim))), c.multi_vector);
  });

  test("a multi-vector answer past --max-vectors-per-request is a 413 before it runs; dense and sparse are not bounded", async () => {
    const texts = [...ref.cases, ...ref.cases].map((c) => c.text);
    const { status, json } = await postJson(`${url}/embeddings`, { model, input: texts, output: ["dense", "multi_vector"] });
    expect(status).toBe(413);
    expect(json.error.code).toBe("too_many_vectors");
    expect(json.error.message).toMatch(/1032 token vectors/);
    expect((await postJson(`${url}/embeddings`, { model, input: texts, output: ["dense", "sparse"] })).status).toBe(200);
  });

  test("all three outputs from one request (one run per batch)", async () => {
    const { status, json } = await postJson(`${url}/embeddings`, {
      model, input: ref.cases.map((c) => c.text), output: ["dense", "sparse", "multi_vector"],
    });
    expect(status).toBe(200);
    ref.cases.forEach((c, i) => {
      const e = json.data[i].embedding;
      expect(Object.keys(e).sort()).toEqual(["dense", "multi_vector", "sparse"]);
      expect(maxAbsDiff(e.dense, c.dense)).toBeLessThanOrEqual(1e-4);
      expect(sparseDiff(e.sparse, c.sparse)).toBeLessThanOrEqual(1e-4);
      expectMulti(e.multi_vector, c.multi_vector);
    });
    const two = await postJson(`${url}/embeddings`, { model, input: ref.cases[0]!.text, output: ["sparse", "dense"], encoding_format: "base64" });
    expect(Object.keys(two.json.data[0].embedding).sort()).toEqual(["dense", "sparse"]);
    expect(maxAbsDiff(fromBase64(two.json.data[0].embedding.dense), ref.cases[0]!.dense)).toBeLessThanOrEqual(1e-4);
  });

  test("/rerank ranks by dense cosine", async () => {
    const docs = ref.cases.map((c) => c.text);
    const { status, json } = await postJson(`${url}/rerank`, { model, query: ref.query.text, documents: docs });
    expect(status).toBe(200);
    const want = ref.rerank_dense_cosine.map((s, i) => [s, i] as const).sort((a, b) => b[0] - a[0]);
    expect(json.results.map((r: { index: number }) => r.index)).toEqual(want.map((x) => x[1]));
    for (const r of json.results) expect(Math.abs(r.relevance_score - ref.rerank_dense_cosine[r.index]!)).toBeLessThanOrEqual(1e-4);
  });

  test("/models reports a hybrid model with its routes", async () => {
    const models = await (await fetch(`${url}/models`)).json();
    const m = models.data.find((x: { id: string }) => x.id === model);
    expect(m.task).toBe("hybrid");
    expect(m.capabilities).toEqual(["embed", "embed_sparse", "rerank"]);
    expect(m.dimensions).toBe(32);
  });

  test("bad output options answer 400 in the one error shape", async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ["/embeddings", { model, input: "x", output: "colbert" }, /`output` must be one of dense, sparse, multi_vector/],
      ["/embeddings", { model, input: "x", output: [] }, /`output` must be/],
      ["/embeddings", { model, input: "x", output: ["dense", "dense"] }, /twice/],
      ["/embeddings", { model, input: "x", output: "sparse", dimensions: 8 }, /dense output only/],
      ["/embeddings", { model, input: "x", output: "multi_vector", encoding_format: "int8" }, /float or base64/],
      ["/embeddings", { model, input: "x", output: "sparse", top_k: 0 }, /top_k/],
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

  test("BAAI layout with float16 heads: read as float32 nn.Linear weights, as FlagEmbedding loads them", async () => {
    const texts = fp16.cases.map((c) => c.text);
    const { status, json } = await postJson(`${url}/embeddings`, { model: "bge-m3-baai-fp16", input: texts, output: ["dense", "sparse", "multi_vector"] });
    expect(status).toBe(200);
    fp16.cases.forEach((c, i) => {
      const e = json.data[i].embedding;
      expect(maxAbsDiff(e.dense, ref.cases[i]!.dense)).toBeLessThanOrEqual(1e-4);
      expect(e.sparse.indices).toEqual(c.sparse.indices);
      expect(sparseDiff(e.sparse, c.sparse)).toBeLessThanOrEqual(1e-4);
      expectMulti(e.multi_vector, c.multi_vector);
    });
    // The float16 rounding is visible: the float32 heads' reference differs by more than the tolerance somewhere.
    const drift = fp16.cases.map((c, i) => Math.max(...c.multi_vector.map((v, r) => maxAbsDiff(v, ref.cases[i]!.multi_vector[r]!))));
    expect(Math.max(...drift)).toBeGreaterThan(1e-4);
    const one = await postJson(`${url}/embed_sparse`, { model: "bge-m3-baai-fp16", inputs: texts[2] });
    const got = { indices: one.json[0].map((x: { index: number }) => x.index), values: one.json[0].map((x: { value: number }) => x.value) };
    expect(sparseDiff(got, fp16.cases[2]!.sparse)).toBeLessThanOrEqual(1e-4);
  });
});

describe("BAAI layout: heads that cannot be read are refused at load, naming the file", () => {
  /** A copy of bge-m3-baai with one head file replaced, loaded alone; resolves to the load error's message. */
  async function loadWith(head: string, contents: Uint8Array): Promise<string> {
    const dir = mkdtempSync(join(tmpdir(), "bge-m3-bad-"));
    const pool = new TokenizerPool(1);
    try {
      cpSync(fixture("bge-m3-baai"), dir, { recursive: true });
      writeFileSync(join(dir, head), contents);
      const config = buildConfig({ flags: new Map([["model-id", [dir]], ["num-threads", ["1"]]]), env: {}, file: null, cpuCount: 2 });
      const registry = new Registry(pool, null);
      const error = await registry.loadAll(config.models, offlineHub).then(() => registry.close(), (e: Error) => e);
      if (!(error instanceof Error)) throw new Error(`${head} was accepted`);
      expect(error.message).toContain(head);
      return error.message;
    } finally {
      pool.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const pickle = (name: string) => readFileSync(join(PICKLES, `${name}.pt`));

  test("a truncated archive, an unknown opcode, a non-tensor entry, a whole pickled module", async () => {
    const good = readFileSync(join(fixture("bge-m3-baai"), "colbert_linear.pt"));
    expect(await loadWith("colbert_linear.pt", good.subarray(0, good.length - 200))).toMatch(/colbert_linear\.pt is not read as a torch state_dict: .*truncated/);
    expect(await loadWith("sparse_linear.pt", pickle("unknown-opcode"))).toMatch(/sparse_linear\.pt is not read as a torch state_dict: data\.pkl has opcode 0x49/);
    expect(await loadWith("sparse_linear.pt", pickle("list"))).toMatch(/entry weight is a list, not a tensor/);
    expect(await loadWith("colbert_linear.pt", pickle("module"))).toMatch(/refers to torch\.nn\.modules\.linear\.Linear/);
  });

  test("heads of the wrong shape for the encoder's hidden size, or other tensors than a Linear's", async () => {
    expect(await loadWith("colbert_linear.pt", pickle("colbert_linear.h16"))).toMatch(/colbert_linear\.pt: weight has shape 16x16, expected nx32 \(nn\.Linear\(32, n\) for the encoder's hidden size 32\)/);
    expect(await loadWith("sparse_linear.pt", pickle("sparse_linear.out2"))).toMatch(/sparse_linear\.pt: weight has shape 2x32, expected 1x32/);
    expect(await loadWith("sparse_linear.pt", pickle("float32"))).toMatch(/sparse_linear\.pt: weight has shape 3x4, expected 1x32/);
    expect(await loadWith("sparse_linear.pt", pickle("bfloat16"))).toMatch(/sparse_linear\.pt holds weight; an nn\.Linear state_dict holds weight and bias/);
  });
});
