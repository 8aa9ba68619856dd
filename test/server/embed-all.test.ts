// TEI's /embed_all on a live server: per-token hidden states against transformers' last_hidden_state
// (test/fixtures/reference/embed-all.json) for a right-padded BERT, a left-padded Qwen3 decoder and a Gemma export
// that also has sentence_embedding; prompts, token-id inputs, /models/{name}/embed_all, the vector bound, truncation,
// refusals for models that cannot serve it, and bad bodies.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunningServer } from "../../src/server/serve";
import { fixture, maxAbsDiff, postJson, reference, ROOT } from "../helpers";
import { startTestServer } from "../helpers";

interface Case {
  text: string;
  prompt_name: string | null;
  input_ids: number[];
  tokens: number[][];
}
type Ref = { models: Record<string, { max_seq_length: number; hidden: number; cases: Case[] }> };

let server: RunningServer;
let url: string;
let ref: Ref;
let pooledDir: string;
const MAX_VECTORS = 600;

beforeAll(async () => {
  ref = await reference("embed-all");
  // gemma-embed with an ONNX graph that outputs only sentence_embedding (generator target embed-all).
  pooledDir = mkdtempSync(join(tmpdir(), "gemma-pooled-"));
  cpSync(fixture("gemma-embed"), pooledDir, { recursive: true });
  cpSync(join(ROOT, "test", "fixtures", "variants", "gemma-embed-pooled-only.onnx"), join(pooledDir, "onnx", "model.onnx"));
  server = await startTestServer({
    "model-id": [
      fixture("bert-mean-norm"), fixture("qwen3-embed"), fixture("gemma-embed"), pooledDir,
      fixture("bert-classify"), fixture("bert-rerank"), fixture("colbert-pylate"), fixture("splade"), fixture("clip"),
    ],
    "served-model-name": ["bge", "qwen", "gemma", "gemma-pooled", "classifier", "reranker", "colbert", "splade", "clip"],
    "max-inputs-per-request": "40",
    "max-vectors-per-request": String(MAX_VECTORS),
    // Parity of 9 models: warm-up's timed runs add nothing here (warm-up itself: options.test.ts, instances.test.ts).
    "model-warmup": "false",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
  rmSync(pooledDir, { recursive: true, force: true });
});

function expectTokens(got: number[][], want: number[][], what: string): void {
  expect(got.length, `${what}: token count`).toBe(want.length);
  let worst = 0;
  got.forEach((row, i) => (worst = Math.max(worst, maxAbsDiff(row, want[i]!))));
  expect(worst, what).toBeLessThanOrEqual(1e-4);
}

describe("/embed_all parity with transformers' last_hidden_state", () => {
  for (const [served, name] of [["bge", "bert-mean-norm"], ["qwen", "qwen3-embed"], ["gemma", "gemma-embed"]] as const) {
    test(`${name}: every reference text in one batch (padding mixed), special tokens included`, async () => {
      const cases = ref.models[name]!.cases.filter((c) => c.prompt_name === null);
      const r = await postJson(`${url}/embed_all`, { model: served, inputs: cases.map((c) => c.text) });
      expect(r.status).toBe(200);
      expect(r.json).toHaveLength(cases.length);
      cases.forEach((c, i) => expectTokens(r.json[i], c.tokens, `${name} case ${i}`));
      // Hidden states, not normalised: rows are not unit vectors.
      expect(Math.abs(Math.hypot(...r.json[0][0]) - 1)).toBeGreaterThan(0.01);
      expect(Number(r.headers.get("x-total-time"))).toBeGreaterThanOrEqual(0);
    });

    test(`${name}: prompt_name / input_type prompts, and model-vocabulary token ids`, async () => {
      const prompted = ref.models[name]!.cases.filter((c) => c.prompt_name !== null);
      for (const c of prompted) {
        const r = await postJson(`${url}/embed_all`, { model: served, inputs: c.text, prompt_name: c.prompt_name });
        expect(r.status).toBe(200);
        expectTokens(r.json[0], c.tokens, `${name} prompt ${c.prompt_name}`);
      }
      const q = prompted.find((c) => c.prompt_name === "query")!;
      const it = await postJson(`${url}/embed_all`, { model: served, inputs: [q.text], input_type: "search_query" });
      expectTokens(it.json[0], q.tokens, `${name} input_type`);
      const c = ref.models[name]!.cases[2]!;
      const ids = await postJson(`${url}/embed_all`, { model: served, inputs: c.input_ids });
      expect(ids.status).toBe(200);
      expectTokens(ids.json[0], c.tokens, `${name} ids`);
      const lists = await postJson(`${url}/embed_all`, { model: served, inputs: [c.input_ids, q.input_ids] });
      expectTokens(lists.json[1], q.tokens, `${name} id lists`);
    });
  }

  test("/models/{name}/embed_all picks the model from the URL; HF-style names in the body are ignored there", async () => {
    const c = ref.models["qwen3-embed"]!.cases[3]!;
    const r = await postJson(`${url}/models/qwen/embed_all`, { inputs: c.text });
    expect(r.status).toBe(200);
    expectTokens(r.json[0], c.tokens, "qwen via /models");
  });

  test("usage-free TEI shape: a list per input even for one string", async () => {
    const r = await postJson(`${url}/embed_all`, { model: "bge", inputs: "hello" });
    expect(Array.isArray(r.json) && Array.isArray(r.json[0]) && Array.isArray(r.json[0][0])).toBe(true);
    expect(r.json[0][0]).toHaveLength(ref.models["bert-mean-norm"]!.hidden);
  });
});

describe("/embed_all limits and truncation", () => {
  test("more token vectors than --max-vectors-per-request: 413 too_many_vectors before running", async () => {
    const long = "word ".repeat(100); // 48 tokens each after truncation
    const inputs = Array.from({ length: Math.ceil(MAX_VECTORS / 48) + 1 }, () => long);
    const r = await postJson(`${url}/embed_all`, { model: "bge", inputs });
    expect(r.status).toBe(413);
    expect(r.json.error.code).toBe("too_many_vectors");
    expect(r.json.error.message).toContain("--max-vectors-per-request");
    const fits = await postJson(`${url}/embed_all`, { model: "bge", inputs: inputs.slice(0, Math.floor(MAX_VECTORS / 48)) });
    expect(fits.status).toBe(200);
  });

  test("truncate false: 413 naming the input; default cuts right (or left), reports x-truncated-inputs", async () => {
    const long = ref.models["bert-mean-norm"]!.cases.find((c) => c.input_ids.length === 48)!;
    const refused = await postJson(`${url}/embed_all`, { model: "bge", inputs: ["short", long.text], truncate: false });
    expect(refused.status).toBe(413);
    expect(refused.json.error.code).toBe("input_too_long");
    expect(refused.json.error.param).toBe("inputs[1]");
    const cut = await postJson(`${url}/embed_all`, { model: "bge", inputs: ["short", long.text] });
    expect(cut.status).toBe(200);
    expect(cut.headers.get("x-truncated-inputs")).toBe("1");
    // The reference was cut on the right to 48 tokens by sentence-transformers: the same tokens.
    expectTokens(cut.json[1], long.tokens, "right-truncated");
    const left = await postJson(`${url}/embed_all`, { model: "bge", inputs: long.text, truncation_direction: "Left" });
    expect(left.json[0]).toHaveLength(48);
    expect(maxAbsDiff(left.json[0][1], cut.json[1][1])).toBeGreaterThan(1e-3);
  });
});

describe("/embed_all refusals", () => {
  const cases: Array<[string, RegExp]> = [
    ["gemma-pooled", /cannot serve \/embed_all: its ONNX export gives only pooled outputs \(sentence_embedding\)/],
    ["classifier", /is a classify model and serves \/classify, not \/embed_all/],
    ["reranker", /is a rerank model and serves \/rerank, not \/embed_all/],
    ["colbert", /multi-vector \(ColBERT\) model: its token vectors are served by \/embeddings/],
    ["splade", /sparse model: its token weights are served by \/embed_sparse/],
    ["clip", /text tower gives pooled image-text projections/],
  ];
  for (const [name, message] of cases) {
    test(`${name}: 400 unsupported_capability in the one error shape`, async () => {
      for (const r of [await postJson(`${url}/embed_all`, { model: name, inputs: "hello" }), await postJson(`${url}/models/${name}/embed_all`, { inputs: "hello" })]) {
        expect(r.status).toBe(400);
        expect(r.json.error.code).toBe("unsupported_capability");
        expect(r.json.error.param).toBe("model");
        expect(r.json.error.message).toMatch(message);
      }
    });
  }

  test("no model named with several embedders: 400 naming them", async () => {
    const r = await postJson(`${url}/embed_all`, { inputs: "hello" });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toContain("several models serve /embed_all");
  });
});

describe("/embed_all bad input", () => {
  const bad: Array<[unknown, number, string | null]> = [
    [{ model: "bge" }, 400, "inputs"],
    [{ model: "bge", inputs: [] }, 400, "inputs"],
    [{ model: "bge", inputs: "" }, 400, "inputs"],
    [{ model: "bge", inputs: [1, "a"] }, 400, "inputs"],
    [{ model: "bge", inputs: [[]] }, 400, "inputs"],
    [{ model: "bge", inputs: [-1] }, 400, "inputs"],
    [{ model: "bge", inputs: [10 ** 9] }, 400, "inputs"],
    [{ model: "bge", inputs: [1.5] }, 400, "inputs"],
    [{ model: "bge", inputs: "x", truncate: "yes" }, 400, "truncate"],
    [{ model: "bge", inputs: "x", truncation_direction: "up" }, 400, "truncation_direction"],
    [{ model: "bge", inputs: "x", prompt_name: "nope" }, 400, "prompt_name"],
    [{ model: "bge", inputs: "x", prompt_name: "query", input_type: "query" }, 400, "input_type"],
    [{ model: "bge", inputs: [1, 2], prompt_name: "query" }, 400, "prompt_name"],
    [{ model: "nope", inputs: "x" }, 400, "model"],
    [{ model: 5, inputs: "x" }, 400, "model"],
    [{ model: "bge", inputs: Array.from({ length: 41 }, () => "x") }, 413, "inputs"],
  ];
  bad.forEach(([body, status, param], i) => {
    test(`case ${i}: ${JSON.stringify(body).slice(0, 70)} -> ${status}`, async () => {
      const r = await postJson(`${url}/embed_all`, body);
      expect(r.status).toBe(status);
      expect(typeof r.json.error.message).toBe("string");
      expect(r.json.error.param).toBe(param);
    });
  });

  test("random bodies never get a 5xx, and the server still serves", async () => {
    const values: unknown[] = [null, 0, -1, 1.5, "", "x", [], [""], [[]], [1, "a"], {}, { a: 1 }, true, "😀".repeat(3), [[1, 2], "a"], [5, 6], [[3], [4]], "bge", "Left"];
    const keys = ["inputs", "model", "truncate", "truncation_direction", "prompt_name", "input_type", "normalize"];
    let seed = 11;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
    for (let i = 0; i < 150; i++) {
      const body: Record<string, unknown> = { model: ["bge", "qwen", "classifier", "gemma-pooled"][rand(4)] };
      for (let k = 0; k < 1 + rand(3); k++) body[keys[rand(keys.length)]!] = values[rand(values.length)];
      const r = await postJson(`${url}${rand(2) ? "/embed_all" : "/models/gemma/embed_all"}`, body);
      expect(r.status).toBeLessThan(500);
      if (r.status >= 400) expect(typeof r.json.error.message).toBe("string");
    }
    const res = await fetch(`${url}/embed_all`, { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
    expect(res.status).toBe(400);
    expect((await postJson(`${url}/embed_all`, { model: "bge", inputs: "still alive" })).status).toBe(200);
  });
});
