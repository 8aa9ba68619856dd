// --openai-token-ids model: integer inputs on the OpenAI-shaped /embeddings are ids of the model's own vocabulary,
// fed as given (as TEI's /embed), instead of OpenAI's cl100k_base ids decoded to text (the default, tested in
// embeddings.test.ts). Parity with the fixtures' references for the reference tokenizations' ids, on every path that
// serves /embeddings; bad ids in the one error shape; models that cannot take ids refuse; the result cache keeps ids
// apart from text.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RunningServer } from "../../src/server/serve";
import { expectVectorsClose, fixture, l2, maxAbsDiff, postJson, reference, sparseDiff, startTestServer } from "../helpers";

let server: RunningServer;
let url: string;

beforeAll(async () => {
  server = await startTestServer({
    "model-id": ["bert-mean-norm", "xlmr-max", "splade", "clip", "colpali", "opensearch-sparse", "jina-v3", "colbert-pylate"].map(fixture),
    "openai-token-ids": "model",
    "result-cache": "memory",
    "batch-size": "4",
    "media-workers": "1",
    // Parity of 8 models: warm-up's timed runs add nothing here (warm-up itself: options.test.ts, instances.test.ts).
    "model-warmup": "false",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

interface DenseCase { text: string; input_ids: number[]; embedding: number[] }

const expectError = (r: { status: number; json: any }, status: number, needle: string | RegExp, param = "input") => {
  expect(r.status).toBe(status);
  expect(Object.keys(r.json.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(r.json.error.message).toMatch(needle);
  expect(r.json.error.param).toBe(param);
};

describe("model-vocabulary ids give the vectors of the text they tokenize", () => {
  for (const name of ["bert-mean-norm", "xlmr-max"]) {
    test(`${name}: a list of id lists and a single id list, on /embeddings, /v1/embeddings and /models/${name}/embeddings`, async () => {
      const ref = await reference(name);
      const cases: DenseCase[] = ref.cases.slice(0, 6);
      for (const path of ["/embeddings", "/v1/embeddings", `/models/${name}/embeddings`]) {
        const { status, json } = await postJson(`${url}${path}`, { model: name, input: cases.map((c) => c.input_ids) });
        expect(status).toBe(200);
        expect(json.data.length).toBe(cases.length);
        cases.forEach((c, i) => expect(maxAbsDiff(json.data[i].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4));
        // The ids are fed as given: usage counts exactly them.
        expect(json.usage.prompt_tokens).toBe(cases.reduce((s, c) => s + c.input_ids.length, 0));
        const single = await postJson(`${url}${path}`, { model: name, input: cases[2]!.input_ids });
        expect(single.status).toBe(200);
        expect(single.json.data.length).toBe(1);
        expect(maxAbsDiff(single.json.data[0].embedding, l2(cases[2]!.embedding))).toBeLessThanOrEqual(1e-4);
        expect(single.json.usage.prompt_tokens).toBe(cases[2]!.input_ids.length);
      }
    });
  }

  test("the same ids on TEI's /embed give the same vectors", async () => {
    const ref = await reference("bert-mean-norm");
    const ids = ref.cases.slice(0, 3).map((c: DenseCase) => c.input_ids);
    const openai = await postJson(`${url}/embeddings`, { model: "bert-mean-norm", input: ids });
    const tei = await postJson(`${url}/embed`, { model: "bert-mean-norm", inputs: ids });
    expect(tei.status).toBe(200);
    tei.json.forEach((v: number[], i: number) => expect(maxAbsDiff(v, openai.json.data[i].embedding)).toBeLessThanOrEqual(1e-6));
  });

  test("CLIP's text tower takes its own ids", async () => {
    const ref = await reference("clip");
    const cases: Array<{ input_ids: number[]; text_embeds: number[] }> = ref.text_cases;
    const { status, json } = await postJson(`${url}/embeddings`, { model: "clip", input: cases.map((c) => c.input_ids) });
    expect(status).toBe(200);
    cases.forEach((c, i) => expect(maxAbsDiff(json.data[i].embedding, l2(c.text_embeds))).toBeLessThanOrEqual(1e-4));
  });

  test("a SPLADE model answers the sparse vectors of the ids", async () => {
    const ref = await reference("splade");
    const cases: Array<{ input_ids: number[]; indices: number[]; values: number[] }> = ref.cases.slice(0, 5);
    const { status, json } = await postJson(`${url}/embeddings`, { model: "splade", input: cases.map((c) => c.input_ids) });
    expect(status).toBe(200);
    cases.forEach((c, i) => expect(sparseDiff(json.data[i].embedding, c)).toBeLessThanOrEqual(1e-4));
    expect(json.usage.prompt_tokens).toBe(cases.reduce((s, c) => s + c.input_ids.length, 0));
  });

  test("Jina v3: ids run with the task adapter (text-matching by default, or a task without an instruction); a task with one is refused", async () => {
    const ref = await reference("jina-v3");
    const cases: Array<DenseCase & { task: string }> = ref.cases;
    const matching = cases.filter((c) => c.task === "text-matching").slice(0, 6);
    const plain = await postJson(`${url}/embeddings`, { model: "jina-v3", input: matching.map((c) => c.input_ids) });
    expect(plain.status).toBe(200);
    matching.forEach((c, i) => expect(maxAbsDiff(plain.json.data[i].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4));
    // TEI's /embed takes the same path (it answered 500 before: the graph's task_id was not fed for ids).
    const tei = await postJson(`${url}/embed`, { model: "jina-v3", inputs: matching.map((c) => c.input_ids) });
    expect(tei.status).toBe(200);
    matching.forEach((c, i) => expect(maxAbsDiff(tei.json[i], l2(c.embedding))).toBeLessThanOrEqual(1e-4));
    const separation = cases.filter((c) => c.task === "separation");
    const sep = await postJson(`${url}/embeddings`, { model: "jina-v3", input: separation.map((c) => c.input_ids), task: "separation" });
    expect(sep.status).toBe(200);
    separation.forEach((c, i) => expect(maxAbsDiff(sep.json.data[i].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4));
    // The same ids under another adapter are another cache entry and another vector.
    expect(maxAbsDiff(sep.json.data[0].embedding, plain.json.data[0].embedding)).toBeGreaterThan(1e-3);
    const query = await postJson(`${url}/embeddings`, { model: "jina-v3", input: [matching[0]!.input_ids], input_type: "query" });
    expectError(query, 400, /Represent the query.*token-id input/, "input_type");
  });

  test("ColBERT: ids of the tokenizer (without the query/document marker, which the server inserts) as queries and documents", async () => {
    interface MvCase { input_ids: number[]; attention_mask: number[]; embeddings: number[][] }
    const ref: { queries: MvCase[]; documents: MvCase[] } = await reference("colbert-pylate");
    // The reference ids are [CLS] marker ... [SEP] (queries then padded with mask tokens): drop the marker and padding.
    const tokenizerIds = (c: MvCase) => {
      const real = c.attention_mask.filter((m) => m === 1).length;
      return [c.input_ids[0]!, ...c.input_ids.slice(2, real)];
    };
    const queries = await postJson(`${url}/embeddings`, { model: "colbert-pylate", input: ref.queries.map(tokenizerIds), input_type: "query" });
    expect(queries.status).toBe(200);
    ref.queries.forEach((q, i) => expectVectorsClose(queries.json.data[i].embedding, q.embeddings));
    const documents = await postJson(`${url}/embeddings`, { model: "colbert-pylate", input: ref.documents.map(tokenizerIds) });
    expect(documents.status).toBe(200);
    ref.documents.forEach((d, i) => expectVectorsClose(documents.json.data[i].embedding, d.embeddings));
  });

  test("ids longer than the model takes: cut by default, 413 with truncate false", async () => {
    const ref = await reference("bert-mean-norm");
    const long: number[] = Array.from({ length: ref.max_seq_length + 10 }, (_, i) => ref.cases[3].input_ids[i % ref.cases[3].input_ids.length]);
    const cut = await postJson(`${url}/embeddings`, { model: "bert-mean-norm", input: [long] });
    expect(cut.status).toBe(200);
    expect(cut.json.usage.prompt_tokens).toBe(ref.max_seq_length);
    const same = await postJson(`${url}/embeddings`, { model: "bert-mean-norm", input: [long.slice(0, ref.max_seq_length)] });
    expect(maxAbsDiff(cut.json.data[0].embedding, same.json.data[0].embedding)).toBeLessThanOrEqual(1e-6);
    const refused = await postJson(`${url}/embeddings`, { model: "bert-mean-norm", input: [long], truncate: false });
    expectError(refused, 413, String(long.length), "input[0]");
  });
});

describe("bad ids are a 400 in the one error shape", () => {
  const cases: Array<[string, unknown, string | RegExp]> = [
    ["an id past the vocabulary", [[2, 50, 1600, 3]], /token id 1600, outside the model's vocabulary \(0\.\.1599\)/],
    ["a negative id", [2, -1, 3], /token id -1, outside/],
    // Past the body schema (integers only): the answer names `input` and shows what came.
    ["an id that is not an integer", [2, 50.5, 3], /`input`.*50\.5/],
    ["an id that is not a number", [[2, "x", 3]], /`input`.*"x"/],
    ["an empty id list in a batch", [[2, 3], []], /input\[1\].*empty token list/],
  ];
  for (const [name, input, needle] of cases) {
    test(name, async () => {
      expectError(await postJson(`${url}/embeddings`, { model: "bert-mean-norm", input }), 400, needle);
    });
  }

  test("prompt_name and input_type do not apply to ids", async () => {
    const ref = await reference("bert-mean-norm");
    for (const [param, value] of [["prompt_name", "query"], ["input_type", "query"]]) {
      const r = await postJson(`${url}/embeddings`, { model: "bert-mean-norm", input: ref.cases[0].input_ids, [param]: value });
      expectError(r, 400, "token-id input", param);
    }
  });

  test("the server keeps serving", async () => {
    const r = await postJson(`${url}/embeddings`, { model: "bert-mean-norm", input: "hello" });
    expect(r.status).toBe(200);
  });
});

describe("models that cannot take ids refuse clearly", () => {
  test("ColPali", async () => {
    expectError(await postJson(`${url}/embeddings`, { model: "colpali", input: [[2, 3, 4]] }), 400, /colpali.*ColPali.*takes text, not token ids/);
  });

  test("CLIP's image tower", async () => {
    expectError(await postJson(`${url}/embeddings`, { model: "clip", input: [[1, 2, 3]], modality: "image" }), 400, /input/);
  });

  test("queries of an inference-free sparse model", async () => {
    const r = await postJson(`${url}/embeddings`, { model: "opensearch-sparse", input: [[101, 7592, 102]], input_type: "query" });
    expectError(r, 400, /inference-free sparse model.*send text/);
  });
});

describe("result cache", () => {
  test("model-vocabulary ids have their own entries, apart from the text they tokenize; TEI's /embed shares them", async () => {
    const ref = await reference("bert-mean-norm");
    // A case no other test here sends.
    const c: DenseCase = ref.cases[10];
    const text = await postJson(`${url}/embeddings`, { model: "bert-mean-norm", input: [c.text] });
    expect(text.headers.get("x-cache-hits")).toBe("0");
    const ids = await postJson(`${url}/embeddings`, { model: "bert-mean-norm", input: [c.input_ids] });
    expect(ids.headers.get("x-cache-hits")).toBe("0");
    expect(maxAbsDiff(ids.json.data[0].embedding, text.json.data[0].embedding)).toBeLessThanOrEqual(1e-6);
    const again = await postJson(`${url}/embeddings`, { model: "bert-mean-norm", input: [c.input_ids] });
    expect(again.headers.get("x-cache-hits")).toBe("1");
    expect(again.json.data).toEqual(ids.json.data);
    const tei = await postJson(`${url}/embed`, { model: "bert-mean-norm", inputs: [c.input_ids] });
    expect(tei.headers.get("x-cache-hits")).toBe("1");
  });
});
