// TEI, HF Inference and Cohere v2 shapes on a live server: /embed, /rerank with texts, /predict, /similarity,
// /tokenize, /decode, /info, POST / and /models/{name}/..., /v2/embed with every embedding type (against
// sentence-transformers' quantize_embeddings), truncate false -> 413, truncation counted and reported, and bad
// input on each new route.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RunningServer } from "../../src/server/serve";
import { cosine, fixture, l2, maxAbsDiff, postJson, reference, startTestServer } from "../helpers";

let server: RunningServer;
let url: string;

beforeAll(async () => {
  server = await startTestServer({
    "model-id": [fixture("bert-mean-norm"), fixture("bert-rerank"), fixture("bert-classify")],
    "served-model-name": ["bge", "reranker", "classifier"],
    "max-inputs-per-request": "20",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
});

const softmax = (xs: number[]) => {
  const m = Math.max(...xs);
  const e = xs.map((x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
};

describe("TEI /embed", () => {
  test("vectors match the reference; one input still answers a list of one; no model needed (one embedder)", async () => {
    const ref = await reference("bert-mean-norm");
    const texts = ref.cases.slice(0, 4).map((c: { text: string }) => c.text);
    const r = await postJson(`${url}/embed`, { inputs: texts });
    expect(r.status).toBe(200);
    r.json.forEach((v: number[], i: number) => expect(maxAbsDiff(v, l2(ref.cases[i].embedding))).toBeLessThanOrEqual(1e-4));
    const one = await postJson(`${url}/embed`, { inputs: texts[0] });
    expect(one.json).toHaveLength(1);
    expect(maxAbsDiff(one.json[0], r.json[0])).toBeLessThanOrEqual(1e-6);
  });

  test("normalize false gives the pooled vector; dimensions cuts it; prompt_name and input_type pick prompts", async () => {
    const ref = await reference("bert-mean-norm");
    const c = ref.cases[0];
    // As TEI: normalize false skips the L2 step (the model's Normalize module included), leaving the pooled vector.
    const raw = await postJson(`${url}/embed`, { inputs: c.text, normalize: false });
    expect(maxAbsDiff(l2(raw.json[0]), l2(c.embedding))).toBeLessThanOrEqual(1e-4);
    expect(Math.abs(Math.hypot(...raw.json[0]) - 1)).toBeGreaterThan(0.01);
    const cut = await postJson(`${url}/embed`, { inputs: c.text, dimensions: 8 });
    expect(maxAbsDiff(cut.json[0], l2(l2(c.embedding).slice(0, 8)))).toBeLessThanOrEqual(1e-4);
    const pc = ref.prompt_cases?.[0];
    if (pc) {
      const p = await postJson(`${url}/embed`, { inputs: pc.text, prompt_name: pc.prompt_name });
      expect(maxAbsDiff(p.json[0], l2(pc.embedding))).toBeLessThanOrEqual(1e-4);
      const it = await postJson(`${url}/embed`, { inputs: pc.text, input_type: pc.prompt_name === "query" ? "search_query" : pc.prompt_name });
      expect(maxAbsDiff(it.json[0], l2(pc.embedding))).toBeLessThanOrEqual(1e-4);
    }
  });

  test("truncate false: 413 naming the input and its token count; default cuts, counts and reports it", async () => {
    const long = "word ".repeat(200);
    const refused = await postJson(`${url}/embed`, { inputs: ["short", long], truncate: false });
    expect(refused.status).toBe(413);
    expect(refused.json.error.param).toBe("inputs[1]");
    expect(refused.json.error.code).toBe("input_too_long");
    expect(refused.json.error.message).toMatch(/has \d+ tokens; model "bge" takes at most 48/);
    const before = server.ctx.metrics.truncated.get({ model: "bge" });
    const cut = await postJson(`${url}/embed`, { inputs: ["short", long, long] });
    expect(cut.status).toBe(200);
    expect(cut.headers.get("x-truncated-inputs")).toBe("1,2");
    expect(server.ctx.metrics.truncated.get({ model: "bge" })).toBe(before + 2);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toContain(`infinity_truncated_inputs_total{model="bge"} ${before + 2}`);
    // Left truncation keeps the end: a text cut from the left embeds like its last tokens.
    const ends = "alpha ".repeat(100) + "the cat sat on the mat";
    const left = await postJson(`${url}/embed`, { inputs: ends, truncation_direction: "left" });
    const right = await postJson(`${url}/embed`, { inputs: ends });
    expect(left.status).toBe(200);
    expect(cosine(left.json[0], right.json[0])).toBeLessThan(0.999);
    for (const route of ["/embeddings", "/classify"]) {
      const r = await postJson(`${url}${route}`, { input: long, truncate: false, model: route === "/classify" ? "classifier" : "bge" });
      expect(r.status).toBe(413);
    }
    const rr = await postJson(`${url}/rerank`, { query: "q", texts: ["a", long], truncate: false });
    expect(rr.status).toBe(413);
    expect(rr.json.error.param).toBe("texts[1]");
  });
});

describe("rerank: one path, Cohere, Voyage and TEI shapes", () => {
  test("TEI texts shape: [{index, score, text}] best first, scores as the reference's sigmoid", async () => {
    const ref = await reference("bert-rerank");
    const q = ref.cases[0].query;
    const docs = ref.cases.filter((c: { query: string }) => c.query === q).map((c: { document: string }) => c.document);
    const r = await postJson(`${url}/rerank`, { query: q, texts: docs, return_text: true });
    expect(r.status).toBe(200);
    expect(r.json).toHaveLength(docs.length);
    for (let i = 1; i < r.json.length; i++) expect(r.json[i - 1].score).toBeGreaterThanOrEqual(r.json[i].score);
    for (const item of r.json) {
      expect(item.text).toBe(docs[item.index]);
      const c = ref.cases.find((x: { query: string; document: string }) => x.query === q && x.document === docs[item.index]);
      expect(item.score).toBeCloseTo(c.score, 4);
    }
    const raw = await postJson(`${url}/rerank`, { query: q, texts: docs, raw_scores: true });
    expect(raw.json[0].text).toBeUndefined();
  });

  test("Voyage shape (top_k): data[] with model and usage", async () => {
    const r = await postJson(`${url}/rerank`, { query: "cat", documents: ["a cat", "rockets", "dogs"], top_k: 2, return_documents: true, model: "reranker" });
    expect(r.status).toBe(200);
    expect(r.json.object).toBe("list");
    expect(r.json.data).toHaveLength(2);
    expect(typeof r.json.data[0].document).toBe("string");
    expect(r.json.model).toBe("reranker");
    expect(r.json.usage.total_tokens).toBeGreaterThan(0);
  });

  test("a body of neither shape names both", async () => {
    const r = await postJson(`${url}/rerank`, { query: "q", docs: ["a"] });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toContain("documents");
    expect(r.json.error.message).toContain("texts");
  });
});

describe("TEI /predict, /similarity, /tokenize, /decode, /info", () => {
  test("/predict: one text -> labels best first as the reference's softmax; a batch -> one list each", async () => {
    const ref = await reference("bert-classify");
    const c = ref.cases[0];
    const one = await postJson(`${url}/predict`, { inputs: c.text });
    expect(one.status).toBe(200);
    const probs = softmax(c.logits);
    for (const p of one.json) expect(p.score).toBeCloseTo(probs[Object.values(ref.id2label).indexOf(p.label)]!, 4);
    for (let i = 1; i < one.json.length; i++) expect(one.json[i - 1].score).toBeGreaterThanOrEqual(one.json[i].score);
    const batch = await postJson(`${url}/predict`, { inputs: [[c.text], [ref.cases[1].text]] });
    expect(batch.json).toHaveLength(2);
    expect(batch.json[0]).toEqual(one.json);
    const pair = await postJson(`${url}/predict`, { inputs: ["first text", "second text"] });
    expect(pair.status).toBe(200);
    expect(pair.json[0].label).toBeDefined();
  });

  test("/similarity: cosine of the source to each sentence", async () => {
    const ref = await reference("bert-mean-norm");
    const [a, b, c] = ref.cases;
    const r = await postJson(`${url}/similarity`, { inputs: { source_sentence: a.text, sentences: [b.text, c.text] } });
    expect(r.status).toBe(200);
    expect(r.json[0]).toBeCloseTo(cosine(a.embedding, b.embedding), 4);
    expect(r.json[1]).toBeCloseTo(cosine(a.embedding, c.embedding), 4);
  });

  test("/tokenize: the reference's ids with special flags and byte offsets; /decode inverts it", async () => {
    const ref = await reference("bert-mean-norm");
    const c = ref.cases[0];
    const r = await postJson(`${url}/tokenize`, { inputs: [c.text, "Grüße, naïve"], model: "bge" });
    expect(r.status).toBe(200);
    expect(r.json[0].map((t: { id: number }) => t.id)).toEqual(c.input_ids);
    expect(r.json[0][0].special).toBe(true);
    expect(r.json[0][0].start).toBeNull();
    const bytes = Buffer.from("Grüße, naïve");
    for (const t of r.json[1].filter((t: { special: boolean; start: number | null }) => !t.special && t.start !== null)) {
      expect(bytes.subarray(t.start, t.stop).toString()).toBe(t.text);
    }
    const noSpecial = await postJson(`${url}/tokenize`, { inputs: c.text, add_special_tokens: false, model: "bge" });
    expect(noSpecial.json[0].map((t: { id: number }) => t.id)).toEqual(c.input_ids.slice(1, -1));
    const d = await postJson(`${url}/decode`, { ids: c.input_ids, model: "bge" });
    expect(d.status).toBe(200);
    expect(d.json[0].replace(/\s+/g, " ")).toBe(c.text.toLowerCase().replace(/\s+/g, " "));
  });

  test("/info in TEI's shape, per model", async () => {
    const info = await (await fetch(`${url}/info?model=classifier`)).json();
    expect(info.served_model_name).toBe("classifier");
    expect(info.model_type.classifier.id2label["0"]).toBeDefined();
    expect(info.max_input_length).toBeGreaterThan(0);
    const bge = await (await fetch(`${url}/models/bge/info`)).json();
    expect(bge.model_type.embedding.pooling).toBe("mean");
  });
});

describe("HF Inference POST / and /models/{served-name}/...", () => {
  test("POST /models/{name}: feature extraction, classification as [[{label, score}]], rerank, similarity", async () => {
    const e = await postJson(`${url}/models/bge`, { inputs: "hello" });
    const direct = await postJson(`${url}/embed`, { inputs: "hello" });
    expect(e.status).toBe(200);
    expect(e.json).toEqual(direct.json);
    const c = await postJson(`${url}/models/classifier`, { inputs: "hello" });
    expect(c.status).toBe(200);
    expect(Array.isArray(c.json[0])).toBe(true);
    expect(c.json[0][0].label).toBeDefined();
    const r = await postJson(`${url}/models/reranker`, { query: "q", texts: ["a", "b"] });
    expect(r.json).toHaveLength(2);
    const s = await postJson(`${url}/models/bge`, { inputs: { source_sentence: "a", sentences: ["b"] } });
    expect(s.json).toHaveLength(1);
    // With several models, POST / picks by what the body needs when only one model can serve it.
    const root = await postJson(`${url}/`, { inputs: { source_sentence: "a", sentences: ["b"] } });
    expect(root.json).toEqual(s.json);
  });

  test("every route under /models/{name}/..., and a wrong-capability route there is a 400 naming its route", async () => {
    expect((await postJson(`${url}/models/bge/embeddings`, { input: "x" })).status).toBe(200);
    expect((await postJson(`${url}/models/reranker/rerank`, { query: "q", documents: ["d"] })).status).toBe(200);
    expect((await postJson(`${url}/models/classifier/classify`, { input: "x" })).status).toBe(200);
    const wrong = await postJson(`${url}/models/bge/predict`, { inputs: "d" });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error.message).toContain("/embeddings");
  });

  test("/embed_sparse answers 400 naming what is served", async () => {
    const r = await postJson(`${url}/embed_sparse`, { inputs: "x" });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toContain("bge (/embeddings");
  });
});

describe("Cohere v2 /v2/embed and compact encodings", () => {
  test("every embedding type matches sentence-transformers' quantize_embeddings / the documented int8 scale", async () => {
    const q = await reference("quantize");
    const r = await postJson(`${url}/v2/embed`, {
      texts: q.texts,
      model: "bge",
      input_type: "search_document",
      embedding_types: ["float", "int8", "uint8", "binary", "ubinary", "base64"],
    });
    expect(r.status).toBe(200);
    expect(r.json.response_type).toBe("embeddings_by_type");
    expect(r.json.texts).toEqual(q.texts);
    expect(r.json.meta.billed_units.input_tokens).toBeGreaterThan(0);
    const e = r.json.embeddings;
    e.float.forEach((v: number[], i: number) => expect(maxAbsDiff(v, q.float[i])).toBeLessThanOrEqual(1e-4));
    expect(e.binary).toEqual(q.binary);
    expect(e.ubinary).toEqual(q.ubinary);
    // int8 rounds x * 127 / max|x|: a component within 1e-4 of a .5 boundary may round either way.
    e.int8.forEach((v: number[], i: number) => expect(maxAbsDiff(v, q.int8[i])).toBeLessThanOrEqual(1));
    e.uint8.forEach((v: number[], i: number) => expect(maxAbsDiff(v, q.uint8[i])).toBeLessThanOrEqual(1));
    const f = new Float32Array(Buffer.from(e.base64[0], "base64").buffer.slice(0));
    expect(maxAbsDiff(f, e.float[0])).toBe(0);
  });

  test("/embeddings takes the same types as encoding_format, and base64 of each", async () => {
    const q = await reference("quantize");
    for (const type of ["int8", "uint8", "binary", "ubinary"] as const) {
      const list = await postJson(`${url}/embeddings`, { input: q.texts.slice(0, 2), model: "bge", encoding_format: type });
      expect(list.status).toBe(200);
      const b64 = await postJson(`${url}/embeddings`, { input: q.texts.slice(0, 2), model: "bge", encoding_format: `base64_${type}` });
      const bytes = Buffer.from(b64.json.data[1].embedding, "base64");
      const arr = type === "int8" || type === "binary" ? Array.from(new Int8Array(bytes.buffer, bytes.byteOffset, bytes.length)) : Array.from(bytes);
      expect(arr).toEqual(list.json.data[1].embedding);
    }
    const bin = await postJson(`${url}/embeddings`, { input: q.texts[0], model: "bge", encoding_format: "ubinary" });
    expect(bin.json.data[0].embedding).toEqual(q.ubinary[0]);
  });

  test("truncate NONE refuses a long text with 413; START keeps its end", async () => {
    const long = "word ".repeat(200);
    const none = await postJson(`${url}/v2/embed`, { texts: [long], model: "bge", truncate: "NONE", input_type: "search_query" });
    expect(none.status).toBe(413);
    expect(none.json.error.param).toBe("texts[0]");
    const start = await postJson(`${url}/v2/embed`, { texts: [long], model: "bge", truncate: "START" });
    expect(start.status).toBe(200);
    expect(start.headers.get("x-truncated-inputs")).toBe("0");
  });
});

describe("bad input on the new routes: one error shape, 4xx, the server keeps serving", () => {
  const cases: Array<[string, string, unknown, number]> = [
    ["embed: no inputs", "/embed", {}, 400],
    ["embed: inputs a number", "/embed", { inputs: 5 }, 400],
    ["embed: empty list", "/embed", { inputs: [] }, 400],
    ["embed: empty string", "/embed", { inputs: "" }, 400],
    ["embed: bad direction", "/embed", { inputs: "x", truncation_direction: "middle" }, 400],
    ["embed: dimensions too large", "/embed", { inputs: "x", dimensions: 4096 }, 400],
    ["embed: unknown prompt", "/embed", { inputs: "x", prompt_name: "nope" }, 400],
    ["embed: unknown input_type", "/embed", { inputs: "x", input_type: "nope" }, 400],
    ["embed: token id out of vocab", "/embed", { inputs: [[1, 999999]] }, 400],
    ["embed: too many inputs", "/embed", { inputs: Array(21).fill("x") }, 413],
    ["predict: three strings", "/predict", { inputs: ["a", "b", "c"] }, 400],
    ["predict: batch of strings and pairs of 3", "/predict", { inputs: [["a", "b", "c"]] }, 400],
    ["predict: number", "/predict", { inputs: 1 }, 400],
    ["similarity: no sentences", "/similarity", { inputs: { source_sentence: "a", sentences: [] } }, 400],
    ["similarity: inputs a string", "/similarity", { inputs: "a" }, 400],
    ["tokenize: inputs missing", "/tokenize", { model: "bge" }, 400],
    ["decode: ids out of vocab", "/decode", { ids: [99999999], model: "bge" }, 400],
    ["decode: ids strings", "/decode", { ids: ["a"], model: "bge" }, 400],
    ["rerank: texts not strings", "/rerank", { query: "q", texts: [1] }, 400],
    ["rerank: body an array", "/rerank", [1, 2], 400],
    ["rerank: top_k zero", "/rerank", { query: "q", documents: ["a"], top_k: 0 }, 400],
    ["v2 embed: unknown type", "/v2/embed", { texts: ["a"], model: "bge", embedding_types: ["int4"] }, 400],
    ["v2 embed: truncate lowercase", "/v2/embed", { texts: ["a"], model: "bge", truncate: "end" }, 400],
    ["v2 embed: images", "/v2/embed", { images: ["data:"], model: "bge" }, 400],
    ["v2 embed: output_dimension too large", "/v2/embed", { texts: ["a"], model: "bge", output_dimension: 4096 }, 400],
    ["v1 embed: neither inputs nor texts", "/v1/embed", { model: "bge", query: "x" }, 400],
    ["v1 embed: texts a string", "/v1/embed", { texts: "a", model: "bge" }, 400],
    ["v1 embed: unknown type", "/v1/embed", { texts: ["a"], model: "bge", embedding_types: ["int4"] }, 400],
    ["v1 embed: empty types", "/v1/embed", { texts: ["a"], model: "bge", embedding_types: [] }, 400],
    ["v1 embed: images", "/v1/embed", { images: ["data:"], model: "bge" }, 400],
    ["v1 embed: body an array", "/v1/embed", [1], 400],
    ["v1 embed: truncate NONE on a long text", "/v1/embed", { texts: ["word ".repeat(300)], model: "bge", truncate: "NONE" }, 413],
    ["embeddings: unknown encoding_format", "/embeddings", { input: "a", model: "bge", encoding_format: "int4" }, 400],
    ["HF root: classifier gets an object", "/models/classifier", { inputs: { a: 1 } }, 400],
    ["HF root: nothing to go on with several models", "/", { inputs: "x" }, 400],
  ];
  for (const [name, path, body, status] of cases) {
    test(name, async () => {
      const r = await postJson(`${url}${path}`, body);
      expect(r.status).toBe(status);
      expect(Object.keys(r.json.error).sort()).toEqual(["code", "message", "param", "type"]);
    });
  }

  test("random bodies never get a 5xx, and the server still serves", async () => {
    const paths = ["/embed", "/v1/embed", "/embed_all", "/predict", "/similarity", "/tokenize", "/decode", "/rerank", "/v2/embed", "/", "/models/bge", "/models/classifier/predict"];
    const values: unknown[] = [null, 0, -1, 1.5, "", "x", [], [""], [[]], [1, "a"], {}, { a: 1 }, true, "😀".repeat(3), [[1, 2], "a"]];
    const keys = ["inputs", "texts", "query", "ids", "documents", "model", "truncate", "dimensions", "embedding_types", "parameters", "top_k"];
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
    for (let i = 0; i < 150; i++) {
      const body: Record<string, unknown> = {};
      for (let k = 0; k < 1 + rand(3); k++) body[keys[rand(keys.length)]!] = values[rand(values.length)];
      const r = await postJson(`${url}${paths[rand(paths.length)]}`, body);
      expect(r.status).toBeLessThan(500);
      if (r.status >= 400) expect(typeof r.json.error.message).toBe("string");
    }
    expect((await postJson(`${url}/embed`, { inputs: "still alive" })).status).toBe(200);
  });
});
