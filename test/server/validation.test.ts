// Request validation on every API shape (OpenAI, Cohere v1/v2, Voyage, TEI, HF Inference): a number, integer or
// boolean field sent as a string is a 400 in the one error shape naming the field, never coerced (a token id "50"
// was embedded as id 50), while what real clients send (dimensions 0 or null) stays accepted; and the messages of
// fields that accept several shapes say which (not "expected union value").
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RunningServer } from "../../src/server/serve";
import { TransformKind } from "@sinclair/typebox";
import * as schemas from "../../src/server/schemas";
import { fixture, postJson, startTestServer } from "../helpers";

let server: RunningServer;
let url: string;

beforeAll(async () => {
  server = await startTestServer({
    "model-id": [fixture("bert-mean-norm"), fixture("bert-rerank"), fixture("bert-classify")],
    "served-model-name": ["bge", "reranker", "classifier"],
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

async function expectBad(path: string, body: unknown, param: string) {
  const r = await postJson(`${url}${path}`, body);
  expect({ path, body, status: r.status }).toEqual({ path, body, status: 400 });
  expect(Object.keys(r.json.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(r.json.error.param).toBe(param);
  expect(r.json.error.message).toContain(`\`${param}\``);
}

describe("strings are not numbers", () => {
  const cases: Array<[string, string, unknown, string]> = [
    ["OpenAI token ids, a list of lists", "/embeddings", { input: [[2, "50", 3]], model: "bge" }, "input"],
    ["OpenAI token ids, one list", "/embeddings", { input: [2, "50", 3], model: "bge" }, "input"],
    ["OpenAI dimensions", "/embeddings", { input: "a", model: "bge", dimensions: "8" }, "dimensions"],
    ["OpenAI top_k (sparse pruning)", "/embeddings", { input: "a", model: "bge", top_k: "3" }, "top_k"],
    ["OpenAI threshold (sparse pruning)", "/embeddings", { input: "a", model: "bge", threshold: "0.5" }, "threshold"],
    ["embed_sparse top_k", "/embed_sparse", { inputs: "a", top_k: "3" }, "top_k"],
    ["OpenAI under /models/{name}", "/models/bge/embeddings", { input: [2, "50"] }, "input"],
    ["TEI token ids", "/embed", { inputs: [2, "50", 3], model: "bge" }, "inputs"],
    ["TEI token-id lists", "/embed", { inputs: [[2, "50", 3]], model: "bge" }, "inputs"],
    ["TEI dimensions", "/embed", { inputs: "a", model: "bge", dimensions: "8" }, "dimensions"],
    ["TEI embed_all token ids", "/embed_all", { inputs: [[2, "50"]], model: "bge" }, "inputs"],
    ["TEI decode ids", "/decode", { ids: [2, "50"], model: "bge" }, "ids"],
    ["HF Inference token ids", "/models/bge", { inputs: [2, "50"] }, "inputs"],
    ["HF Inference dimensions in parameters", "/models/bge", { inputs: "a", parameters: { dimensions: "8" } }, "dimensions"],
    ["Cohere top_n", "/rerank", { query: "q", documents: ["a", "b"], top_n: "1" }, "top_n"],
    ["Cohere v2 top_n", "/v2/rerank", { query: "q", documents: ["a", "b"], top_n: "1", model: "reranker" }, "top_n"],
    ["Cohere top_n not whole", "/rerank", { query: "q", documents: ["a", "b"], top_n: 1.5 }, "top_n"],
    ["Voyage top_k", "/rerank", { query: "q", documents: ["a", "b"], top_k: "1" }, "top_k"],
    ["Cohere v2 embed output_dimension", "/v2/embed", { texts: ["a"], model: "bge", output_dimension: "8" }, "output_dimension"],
    ["Cohere v1 embed output_dimension", "/v1/embed", { texts: ["a"], model: "bge", output_dimension: "8" }, "output_dimension"],
  ];
  for (const [name, path, body, param] of cases) test(`${name}: 400 naming \`${param}\``, () => expectBad(path, body, param));
});

describe("strings are not booleans", () => {
  const cases: Array<[string, string, unknown, string]> = [
    ["OpenAI normalize", "/embeddings", { input: "a", model: "bge", normalize: "false" }, "normalize"],
    ["OpenAI truncate", "/embeddings", { input: "a", model: "bge", truncate: "true" }, "truncate"],
    ["TEI normalize", "/embed", { inputs: "a", model: "bge", normalize: "false" }, "normalize"],
    ["TEI truncate", "/embed", { inputs: "a", model: "bge", truncate: "false" }, "truncate"],
    ["TEI rerank raw_scores", "/rerank", { query: "q", texts: ["a"], raw_scores: "true" }, "raw_scores"],
    ["TEI rerank return_text", "/rerank", { query: "q", texts: ["a"], return_text: 1 }, "return_text"],
    ["Cohere return_documents", "/rerank", { query: "q", documents: ["a"], return_documents: "true" }, "return_documents"],
    ["Voyage truncation", "/rerank", { query: "q", documents: ["a"], top_k: 1, truncation: "false" }, "truncation"],
    ["Infinity classify raw_scores", "/classify", { input: "a", raw_scores: "true" }, "raw_scores"],
    ["TEI predict raw_scores", "/predict", { inputs: "a", raw_scores: "true" }, "raw_scores"],
    ["TEI tokenize add_special_tokens", "/tokenize", { inputs: "a", model: "bge", add_special_tokens: "false" }, "add_special_tokens"],
    ["TEI decode skip_special_tokens", "/decode", { ids: [2, 50], model: "bge", skip_special_tokens: 0 }, "skip_special_tokens"],
    ["HF Inference normalize in parameters", "/models/bge", { inputs: "a", parameters: { normalize: "false" } }, "normalize"],
  ];
  for (const [name, path, body, param] of cases) test(`${name}: 400 naming \`${param}\``, () => expectBad(path, body, param));
});

test("no request schema converts values (Elysia's t.Integer, t.Numeric, t.BooleanString are transforms)", () => {
  const transforms: string[] = [];
  const walk = (node: unknown, path: string) => {
    if (typeof node !== "object" || node === null) return;
    if (TransformKind in node) transforms.push(path);
    for (const [k, v] of Object.entries(node)) walk(v, `${path}.${k}`);
  };
  for (const [name, schema] of Object.entries(schemas)) walk(schema, name);
  expect(transforms).toEqual([]);
});

describe("what clients send stays accepted", () => {
  test("dimensions 0 and null (infinity_client, OpenAI SDKs) mean the full size; real integers still work", async () => {
    const full = await postJson(`${url}/embeddings`, { input: "a", model: "bge" });
    expect(full.status).toBe(200);
    for (const dimensions of [0, null]) {
      const r = await postJson(`${url}/embeddings`, { input: "a", model: "bge", dimensions });
      expect(r.status).toBe(200);
      expect(r.json.data[0].embedding).toEqual(full.json.data[0].embedding);
    }
    const cut = await postJson(`${url}/embeddings`, { input: "a", model: "bge", dimensions: 8 });
    expect(cut.json.data[0].embedding).toHaveLength(8);
    const v2 = await postJson(`${url}/v2/embed`, { texts: ["a"], model: "bge", output_dimension: null });
    expect(v2.json.embeddings.float[0]).toHaveLength(full.json.data[0].embedding.length);
  });

  test("integer token ids and top_n / top_k as numbers work", async () => {
    expect((await postJson(`${url}/embed`, { inputs: [2, 50, 3], model: "bge" })).status).toBe(200);
    expect((await postJson(`${url}/embeddings`, { input: [[15339, 1917]], model: "bge" })).status).toBe(200);
    const cohere = await postJson(`${url}/rerank`, { query: "q", documents: ["a", "b"], top_n: 1, return_documents: null });
    expect(cohere.json.results).toHaveLength(1);
    const voyage = await postJson(`${url}/rerank`, { query: "q", documents: ["a", "b"], top_k: 1 });
    expect(voyage.json.data).toHaveLength(1);
  });
});

describe("validation messages say what is accepted", () => {
  const cases: Array<[string, string, unknown, string]> = [
    ["OpenAI input a number", "/embeddings", { input: 5, model: "bge" }, "`input` must be a string, an array of strings, or token ids (an array of integers or an array of integer arrays) (got 5)"],
    ["OpenAI input with a string token id", "/embeddings", { input: [[2, "50", 3]], model: "bge" }, "`input` must be a string, an array of strings, or token ids (an array of integers or an array of integer arrays) (got [[2,\"50\",3]])"],
    ["OpenAI input missing", "/embeddings", { model: "bge" }, "`input` must be a string, an array of strings, or token ids (an array of integers or an array of integer arrays) (got nothing)"],
    ["OpenAI dimensions a string", "/embeddings", { input: "a", model: "bge", dimensions: "8" }, "`dimensions` must be an integer (got \"8\")"],
    ["TEI inputs an object", "/embed", { inputs: { a: 1 }, model: "bge" }, "`inputs` must be a string, an array of strings, or token ids of the model's vocabulary (an array of integers or an array of integer arrays) (TEI shape {inputs})"],
    ["TEI decode ids with a float", "/decode", { ids: [1.5], model: "bge" }, "`ids` must be token ids: an array of integers or an array of integer arrays (got [1.5])"],
    ["Infinity classify input a number", "/classify", { input: 3 }, "`input` must be a string or an array of strings (got 3)"],
    ["Cohere v2 embed texts a string", "/v2/embed", { texts: "a", model: "bge" }, "`texts` must be an array of strings (got \"a\")"],
    ["TEI predict a triple", "/predict", { inputs: [["a", "b", "c"]] }, "`inputs` must be a string, a pair of strings, or a list of [string] / [string, string] (got [[\"a\",\"b\",\"c\"]])"],
    ["Cohere rerank document a number", "/rerank", { query: "q", documents: [1] }, "each document must be a string or an object with a `text` string (Cohere/Infinity shape {query, documents})"],
  ];
  for (const [name, path, body, message] of cases) {
    test(name, async () => {
      const r = await postJson(`${url}${path}`, body);
      expect(r.status).toBe(400);
      expect(r.json.error.message).toBe(message);
    });
  }
});
