// Multi-vector (ColBERT) encoders through the HTTP API: parity with the PyLate-algorithm references (plain torch,
// cross-checked against sentence-transformers' MultiVectorEncoder in the generator) for queries and documents, both
// layouts (PyLate folder with 1_Dense; Stanford-style ONNX with the projection in the graph), float and base64.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RunningServer } from "../../src/server/serve";
import { expectVectorsClose, fixture, maxAbsDiff, postJson, reference, startTestServer } from "../helpers";

interface Case { text: string; input_ids: number[]; attention_mask: number[]; kept: number[]; embeddings: number[][] }
interface Ref { dim: number; queries: Case[]; documents: Case[]; maxsim: number[][] }

const MODELS = ["colbert-pylate", "colbert-stanford"] as const;
let server: RunningServer;
let url: string;
const refs: Record<string, Ref> = {};

beforeAll(async () => {
  for (const m of MODELS) refs[m] = await reference(m);
  // 300 vectors: every reference document in one request (294 vectors) fits, twice that does not.
  server = await startTestServer({ "model-id": MODELS.map(fixture), "batch-size": "4", "max-vectors-per-request": "300" });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

describe("parity with the PyLate algorithm", () => {
  for (const name of MODELS) {
    test(`${name}: documents (default input_type), all in one batched request`, async () => {
      const ref = refs[name]!;
      const { status, json } = await postJson(`${url}/embeddings`, { model: name, input: ref.documents.map((d) => d.text), encoding_format: "float" });
      expect(status).toBe(200);
      ref.documents.forEach((d, i) => expectVectorsClose(json.data[i].embedding, d.embeddings));
      const real = ref.documents.reduce((s, d) => s + d.attention_mask.filter((m) => m === 1).length, 0);
      expect(json.usage.prompt_tokens).toBe(real);
    });

    test(`${name}: queries, expanded to query_length, one request each and concurrently`, async () => {
      const ref = refs[name]!;
      const answers = await Promise.all(ref.queries.map((q) => postJson(`${url}/embeddings`, { model: name, input: q.text, input_type: "query", encoding_format: "float" })));
      answers.forEach(({ status, json }, i) => {
        expect(status).toBe(200);
        expectVectorsClose(json.data[0].embedding, ref.queries[i]!.embeddings);
      });
    });

    test(`${name}: base64 is the row-major float32 matrix with its shape`, async () => {
      const ref = refs[name]!;
      const d = ref.documents[4]!;
      const { json } = await postJson(`${url}/embeddings`, { model: name, input: [d.text], encoding_format: "base64" });
      const [rows, dim] = json.data[0].shape;
      expect([rows, dim]).toEqual([d.embeddings.length, ref.dim]);
      const bytes = Buffer.from(json.data[0].embedding, "base64");
      const flat = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
      expect(flat.length).toBe(rows * dim);
      expect(maxAbsDiff(flat, d.embeddings.flat())).toBeLessThanOrEqual(1e-4);
    });
  }
});

describe("errors", () => {
  test("a request past --max-vectors-per-request is a 413 before it runs, and the server keeps serving", async () => {
    const ref = refs["colbert-pylate"]!;
    const texts = ref.documents.map((d) => d.text);
    const { status, json } = await postJson(`${url}/embeddings`, { model: "colbert-pylate", input: [...texts, ...texts] });
    expect(status).toBe(413);
    expect(json.error.code).toBe("too_many_vectors");
    expect(json.error.message).toContain("588 token vectors; at most 300");
    const ok = await postJson(`${url}/embeddings`, { model: "colbert-pylate", input: texts });
    expect(ok.status).toBe(200);
  });

  test("/rerank past --max-vectors-per-request: scored in chunks of at most 300 document vectors, every score right", async () => {
    // 12 copies of the 15 reference documents: 180 documents, 3,528 vectors (document_length 40: 7 per chunk), 12x
    // the bound. The engine's submissions are watched: no more than 300 document vectors are ever in flight.
    const name = "colbert-pylate";
    const ref = refs[name]!;
    const copies = 12;
    const docs = Array.from({ length: copies }, () => ref.documents.map((d) => d.text)).flat();
    const model = server.ctx.registry.list().find((m) => m.name === name)!;
    const engine = model.engine as unknown as { submit: (inputs: { keep: Uint8Array }[], s: AbortSignal) => Promise<unknown> };
    const original = engine.submit.bind(engine);
    let inFlight = 0;
    let most = 0;
    let submissions = 0;
    engine.submit = async (inputs, s) => {
      const vectors = inputs.reduce((n, x) => n + x.keep.reduce((k, v) => k + v, 0), 0);
      submissions++;
      inFlight += vectors;
      most = Math.max(most, inFlight);
      try {
        return await original(inputs, s);
      } finally {
        inFlight -= vectors;
      }
    };
    try {
      const { status, json } = await postJson(`${url}/rerank`, { model: name, query: ref.queries[1]!.text, documents: docs, raw_scores: true });
      expect(status).toBe(200);
      expect(json.results.length).toBe(docs.length);
      for (const r of json.results) expect(Math.abs(r.relevance_score - ref.maxsim[1]![r.index % ref.documents.length]!)).toBeLessThanOrEqual(1e-3);
      // The query's 32 vectors run beside the first chunk.
      expect(most).toBeLessThanOrEqual(300 + ref.queries[1]!.embeddings.length);
      expect(submissions).toBeGreaterThan(copies);
      const real = ref.documents.reduce((s, d) => s + d.attention_mask.filter((m) => m === 1).length, 0);
      expect(json.usage.total_tokens).toBe(real * copies + ref.queries[1]!.attention_mask.filter((m) => m === 1).length);
    } finally {
      engine.submit = original;
    }
  });

  test("bad input_type, dimensions and token ids answer 400", async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ input: "x", input_type: "clustering" }, /input_type for a multi-vector model must be query or document/],
      [{ input: "x", dimensions: 4 }, /dimensions/],
      // Integer input on /embeddings is OpenAI's cl100k_base ids (decoded to text); one outside that vocabulary is a 400.
      [{ input: [1, 2, 999999] }, /cl100k_base/],
    ];
    for (const [body, message] of cases) {
      const { status, json } = await postJson(`${url}/embeddings`, { model: "colbert-pylate", ...body });
      expect(status).toBe(400);
      expect(json.error.message).toMatch(message);
    }
  });
});
