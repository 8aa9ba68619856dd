// /embeddings against a live server: parity with the sentence-transformers references (single and concurrent,
// so batches really merge and pad), the openai SDK, and a table of bad inputs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import type { RunningServer } from "../../src/server/serve";
import { fixture, l2, maxAbsDiff, postJson, reference, startTestServer } from "../helpers";
import { INLINE_TOKENIZE_CHARS } from "../../src/engine/load-model";
import { Value } from "@sinclair/typebox/value";
import { EmbeddingsResponse } from "../../src/server/schemas";
import { getEncoding } from "js-tiktoken";

const EMBEDDERS = ["bert-mean-norm", "roberta-cls", "xlmr-max"] as const;
let server: RunningServer;
let url: string;

beforeAll(async () => {
  server = await startTestServer({
    "model-id": [...EMBEDDERS.map(fixture), fixture("bert-rerank")],
    "batch-size": "8",
    "max-inputs-per-request": "64",
    "max-input-chars": "5000",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

const embed = (body: Record<string, unknown>) => postJson(`${url}/embeddings`, { encoding_format: "float", ...body });

describe("parity with sentence-transformers references", () => {
  for (const name of EMBEDDERS) {
    test(`${name}: one request per text`, async () => {
      const ref = await reference(name);
      for (const c of ref.cases) {
        const { status, json } = await embed({ model: name, input: c.text });
        expect(status).toBe(200);
        expect(maxAbsDiff(json.data[0].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4);
        expect(json.usage.prompt_tokens).toBe(c.input_ids.length);
      }
    });

    test(`${name}: all texts in one request and as concurrent requests of mixed lengths`, async () => {
      const ref = await reference(name);
      const texts = ref.cases.map((c: { text: string }) => c.text);
      // Repeated past INLINE_TOKENIZE_CHARS in total: this request is tokenized by the worker pool.
      const reps = Math.ceil((INLINE_TOKENIZE_CHARS + 1) / texts.join("").length);
      const repeated = Array.from({ length: reps }, () => texts).flat();
      expect(repeated.join("").length).toBeGreaterThan(INLINE_TOKENIZE_CHARS);
      const one = await embed({ model: name, input: repeated });
      expect(one.status).toBe(200);
      expect(one.json.data.length).toBe(repeated.length);
      repeated.forEach((_: string, i: number) => {
        const c = ref.cases[i % texts.length];
        expect(one.json.data[i].index).toBe(i);
        expect(maxAbsDiff(one.json.data[i].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4);
      });
      expect(one.json.usage.total_tokens).toBe(reps * ref.cases.reduce((s: number, c: { input_ids: number[] }) => s + c.input_ids.length, 0));
      // Many concurrent requests with texts in rotated order: the batcher merges and pads across requests.
      const requests = Array.from({ length: 24 }, (_, r) => {
        const order = texts.map((_: string, i: number) => (i + r) % texts.length).slice(0, 1 + (r % 5));
        return embed({ model: name, input: order.map((i: number) => texts[i]) }).then((res) => ({ res, order }));
      });
      for (const { res, order } of await Promise.all(requests)) {
        expect(res.status).toBe(200);
        order.forEach((refIndex: number, i: number) => {
          expect(maxAbsDiff(res.json.data[i].embedding, l2(ref.cases[refIndex].embedding))).toBeLessThanOrEqual(1e-4);
        });
      }
    });
  }

  test("prompt_name prepends the model's prompt (reference from encode(prompt_name=...))", async () => {
    const ref = await reference("bert-mean-norm");
    expect(ref.prompt_cases.length).toBeGreaterThan(0);
    for (const c of ref.prompt_cases) {
      const { status, json } = await embed({ model: "bert-mean-norm", input: c.text, prompt_name: c.prompt_name });
      expect(status).toBe(200);
      expect(maxAbsDiff(json.data[0].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4);
      expect(json.usage.prompt_tokens).toBe(c.input_ids.length);
    }
  });

  test("integer input on /embeddings is OpenAI's cl100k_base ids: decoded, then tokenized by the model", async () => {
    const ref = await reference("bert-mean-norm");
    const cl100k = getEncoding("cl100k_base");
    const [a, b] = [ref.cases[2], ref.cases[3]];
    const { status, json } = await embed({ model: "bert-mean-norm", input: [cl100k.encode(a.text), cl100k.encode(b.text)] });
    expect(status).toBe(200);
    expect(maxAbsDiff(json.data[0].embedding, l2(a.embedding))).toBeLessThanOrEqual(1e-4);
    expect(maxAbsDiff(json.data[1].embedding, l2(b.embedding))).toBeLessThanOrEqual(1e-4);
    expect(json.usage.prompt_tokens).toBe(a.input_ids.length + b.input_ids.length);
    const single = await embed({ model: "bert-mean-norm", input: cl100k.encode(a.text) });
    expect(maxAbsDiff(single.json.data[0].embedding, l2(a.embedding))).toBeLessThanOrEqual(1e-4);
  });

  test("TEI /embed keeps integer inputs as the model's own token ids", async () => {
    const ref = await reference("bert-mean-norm");
    const c = ref.cases[2];
    const r = await postJson(`${url}/embed`, { model: "bert-mean-norm", inputs: [c.input_ids, ref.cases[3].input_ids] });
    expect(r.status).toBe(200);
    expect(maxAbsDiff(r.json[0], l2(c.embedding))).toBeLessThanOrEqual(1e-4);
    expect(maxAbsDiff(r.json[1], l2(ref.cases[3].embedding))).toBeLessThanOrEqual(1e-4);
    const single = await postJson(`${url}/embed`, { model: "bert-mean-norm", inputs: c.input_ids });
    expect(maxAbsDiff(single.json[0], l2(c.embedding))).toBeLessThanOrEqual(1e-4);
  });

  test("model: none or \"default/not-specified\" with several embedders is a 400 naming them; dimensions 0/null are unset", async () => {
    for (const model of [undefined, "default/not-specified"]) {
      const r = await embed({ model, input: "x" });
      expect(r.status).toBe(400);
      expect(r.json.error.message).toContain("bert-mean-norm, roberta-cls, xlmr-max");
    }
    const full = await embed({ model: "bert-mean-norm", input: "x" });
    for (const dimensions of [0, null]) {
      const r = await embed({ model: "bert-mean-norm", input: "x", dimensions });
      expect(r.status).toBe(200);
      expect(r.json.data[0].embedding).toEqual(full.json.data[0].embedding);
    }
  });
});

describe("encoding and dimensions", () => {
  test("base64 is little-endian float32 of the same vector", async () => {
    const f = await embed({ model: "bert-mean-norm", input: "hello world" });
    const b = await embed({ model: "bert-mean-norm", input: "hello world", encoding_format: "base64" });
    const bytes = Buffer.from(b.json.data[0].embedding, "base64");
    const v = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    expect(v.length).toBe(32);
    expect(maxAbsDiff(v, f.json.data[0].embedding)).toBe(0);
  });

  test("dimensions truncates then re-normalises (Matryoshka)", async () => {
    const full = await embed({ model: "bert-mean-norm", input: "matryoshka" });
    const cut = await embed({ model: "bert-mean-norm", input: "matryoshka", dimensions: 8 });
    expect(cut.json.data[0].embedding).toHaveLength(8);
    expect(maxAbsDiff(cut.json.data[0].embedding, l2(full.json.data[0].embedding.slice(0, 8)))).toBeLessThan(1e-6);
    expect(Math.hypot(...cut.json.data[0].embedding)).toBeCloseTo(1, 5);
  });

  test("responses match the schema the OpenAPI document publishes", async () => {
    for (const encoding_format of ["float", "base64"]) {
      const { json } = await embed({ model: "bert-mean-norm", input: ["a", "b c"], encoding_format });
      expect(Value.Check(EmbeddingsResponse, json)).toBe(true);
    }
  });

  test("response carries the OpenAI fields and timing headers", async () => {
    const { json, headers } = await embed({ model: "roberta-cls", input: ["a", "b"] });
    expect(json.object).toBe("list");
    expect(json.model).toBe("roberta-cls");
    expect(json.data.map((d: { object: string }) => d.object)).toEqual(["embedding", "embedding"]);
    expect(typeof json.id).toBe("string");
    expect(Number.isInteger(json.created)).toBe(true);
    expect(Number(headers.get("x-tokenization-time-ms"))).toBeGreaterThanOrEqual(0);
    expect(Number(headers.get("x-queue-time-ms"))).toBeGreaterThanOrEqual(0);
    expect(Number(headers.get("x-inference-time-ms"))).toBeGreaterThan(0);
    const parts = ["x-tokenization-time-ms", "x-queue-time-ms", "x-inference-time-ms"].reduce((a, h) => a + Number(headers.get(h)), 0);
    // Each header is rounded to 0.01 ms.
    expect(Number(headers.get("x-total-time-ms"))).toBeGreaterThanOrEqual(parts - 0.02);
    // A long text (within --max-input-chars 5000) takes measurable time to tokenize.
    const long = await embed({ model: "roberta-cls", input: "timing the tokenizer with a long text ".repeat(120) });
    expect(long.status).toBe(200);
    expect(Number(long.headers.get("x-tokenization-time-ms"))).toBeGreaterThan(0);
  });
});

describe("openai SDK against the live server", () => {
  const client = () => new OpenAI({ apiKey: "unused", baseURL: `${url}/v1`, maxRetries: 0 });

  test("default (base64) path decodes to the reference vectors", async () => {
    const ref = await reference("bert-mean-norm");
    const res = await client().embeddings.create({ model: "bert-mean-norm", input: ref.cases.slice(0, 4).map((c: { text: string }) => c.text) });
    expect(res.data).toHaveLength(4);
    res.data.forEach((d, i) => expect(maxAbsDiff(d.embedding, l2(ref.cases[i].embedding))).toBeLessThanOrEqual(1e-4));
    expect(res.usage.prompt_tokens).toBe(ref.cases.slice(0, 4).reduce((s: number, c: { input_ids: number[] }) => s + c.input_ids.length, 0));
  });

  test("encoding_format float and dimensions", async () => {
    const res = await client().embeddings.create({ model: "xlmr-max", input: "ein kleiner Test", encoding_format: "float", dimensions: 16 });
    expect(res.data[0]!.embedding).toHaveLength(16);
    expect(Math.hypot(...res.data[0]!.embedding)).toBeCloseTo(1, 5);
  });

  test("wrong model is a 400 that names the served models", async () => {
    const err = await client().embeddings.create({ model: "nope", input: "x" }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.status).toBe(400);
    expect(String(err.message)).toContain("bert-mean-norm");
  });

  test("a reranker on /embeddings is a 400 that says which route it serves", async () => {
    const err = await client().embeddings.create({ model: "bert-rerank", input: "x" }).catch((e) => e);
    expect(err.status).toBe(400);
    expect(String(err.message)).toContain("/rerank");
  });
});

describe("bad inputs get a clear 4xx in the one error shape", () => {
  const cases: Array<[string, unknown, number, string]> = [
    ["empty list", { model: "bert-mean-norm", input: [] }, 400, "empty"],
    ["empty string", { model: "bert-mean-norm", input: "" }, 400, "empty"],
    ["empty string in a list", { model: "bert-mean-norm", input: ["ok", ""] }, 400, "input[1]"],
    ["non-string item", { model: "bert-mean-norm", input: ["ok", 3] }, 400, "input"],
    ["object input", { model: "bert-mean-norm", input: { text: "x" } }, 400, "input"],
    ["null input", { model: "bert-mean-norm", input: null }, 400, "input"],
    ["missing input", { model: "bert-mean-norm" }, 400, "input"],
    ["too many inputs", { model: "bert-mean-norm", input: Array(65).fill("x") }, 413, "at most 64 are accepted per request (--max-inputs-per-request)"],
    ["string past the character cap", { model: "bert-mean-norm", input: "x".repeat(5001) }, 413, "at most 5000 are accepted (--max-input-chars)"],
    ["dimensions negative", { model: "bert-mean-norm", input: "x", dimensions: -2 }, 400, "dimensions"],
    ["dimensions too large", { model: "bert-mean-norm", input: "x", dimensions: 33 }, 400, "dimensions"],
    ["dimensions not an integer", { model: "bert-mean-norm", input: "x", dimensions: 2.5 }, 400, "dimensions"],
    ["bad encoding_format", { model: "bert-mean-norm", input: "x", encoding_format: "hex" }, 400, "encoding_format"],
    ["unknown model", { model: "gpt-4", input: "x" }, 400, "not served"],
    ["unknown prompt_name", { model: "bert-mean-norm", input: "x", prompt_name: "nope" }, 400, "prompt_name"],
    ["token id outside cl100k_base", { model: "bert-mean-norm", input: [[1, 2, 999999]] }, 400, "cl100k_base"],
    ["negative token id", { model: "bert-mean-norm", input: [-1] }, 400, "vocabulary"],
    ["image modality on a text model", { model: "bert-mean-norm", input: "x", modality: "image" }, 400, "modality"],
  ];
  for (const [name, body, status, needle] of cases) {
    test(name, async () => {
      const res = await postJson(`${url}/embeddings`, body);
      expect(res.status).toBe(status);
      expect(typeof res.json.error.message).toBe("string");
      expect(res.json.error.message).toContain(needle);
      expect(Object.keys(res.json.error).sort()).toEqual(["code", "message", "param", "type"]);
    });
  }

  const raw = async (body: string | Uint8Array<ArrayBuffer>, contentType: string | null) => {
    const headers: Record<string, string> = {};
    if (contentType) headers["content-type"] = contentType;
    const res = await fetch(`${url}/embeddings`, { method: "POST", headers, body });
    return { status: res.status, json: (await res.json()) as { error: { message: string; type: string } } };
  };

  test("body that is not JSON", async () => {
    const r = await raw("{not json", "application/json");
    expect(r.status).toBe(400);
    expect(r.json.error.message).toContain("not valid JSON");
  });

  test("empty body", async () => {
    const r = await raw("", "application/json");
    expect(r.status).toBe(400);
    expect(r.json.error.message).toContain("empty");
  });

  test("wrong content type", async () => {
    const r = await raw("input=hello", "application/x-www-form-urlencoded");
    expect(r.status).toBe(415);
    expect(r.json.error.message).toContain("application/json");
  });

  test("broken UTF-8", async () => {
    const bytes: Uint8Array<ArrayBuffer> = new Uint8Array([...new TextEncoder().encode('{"input":"'), 0xff, 0xfe, ...new TextEncoder().encode('"}')]);
    const r = await raw(bytes, "application/json");
    expect(r.status).toBe(400);
    expect(r.json.error.message).toContain("UTF-8");
  });

  test("JSON that is not an object", async () => {
    const r = await raw("[1,2,3]", "application/json");
    expect(r.status).toBe(400);
  });

  test("unknown route gets the same shape", async () => {
    const res = await fetch(`${url}/nope`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("not_found");
  });

  test("lone surrogates and odd unicode are embedded, not rejected", async () => {
    const r = await embed({ model: "bert-mean-norm", input: ["\ud800 broken surrogate", "\u0000nul", "emoji 🧪", "\u202etext"] });
    expect(r.status).toBe(200);
    expect(r.json.data).toHaveLength(4);
  });

  test("after all of this the server still serves", async () => {
    const r = await embed({ model: "bert-mean-norm", input: "still alive" });
    expect(r.status).toBe(200);
  });
});
