// TEI's gRPC API with a real client (@grpc/grpc-js, the stubs loaded from the project's tei.proto, TEI's published
// contract): every method and stream against the HTTP routes' answers, the health service, and the errors (API key,
// unknown model, bad and oversize messages, malformed protobuf, a cancelled stream).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { GRPC_DIR, renderDescriptor } from "../../build/grpc-proto";
import type { RunningServer } from "../../src/server/serve";
import { fixture, maxAbsDiff, postJson, startTestServer } from "../helpers";

const KEY = "grpc-key";
let server: RunningServer;
let address: string;
let tei: any;
let health: any;
const clients: grpc.Client[] = [];

beforeAll(async () => {
  server = await startTestServer({
    "model-id": ["bert-mean-norm", "bert-rerank", "bert-classify", "splade"].map(fixture),
    "grpc-port": "0",
    "api-key": KEY,
    "model-warmup": "false",
    "max-request-bytes": "65536",
  });
  address = `127.0.0.1:${(await server.grpc)!.port}`;
  const load = (file: string) => grpc.loadPackageDefinition(loadSync(join(GRPC_DIR, file), { keepCase: true, defaults: true, enums: String, longs: Number })) as any;
  tei = load("tei.proto").tei.v1;
  health = load("health.proto").grpc.health.v1;
});
afterAll(async () => {
  for (const c of clients) c.close();
  await server.shutdown();
}, 20_000);

const client = (service: string, pkg = tei) => {
  const c = new pkg[service](address, grpc.credentials.createInsecure());
  clients.push(c);
  return c;
};
const meta = (model?: string, key: string | null = KEY) => {
  const m = new grpc.Metadata();
  if (key !== null) m.set("authorization", `Bearer ${key}`);
  if (model) m.set("model", model);
  return m;
};
const call = (c: any, method: string, req: unknown, md = meta()): Promise<any> =>
  new Promise((resolve, reject) => c[method](req, md, (e: grpc.ServiceError | null, res: unknown) => (e ? reject(e) : resolve(res))));
const streamAll = (c: any, method: string, reqs: unknown[], md = meta()): Promise<any[]> =>
  new Promise((resolve, reject) => {
    const s = c[method](md);
    const out: unknown[] = [];
    s.on("data", (m: unknown) => out.push(m));
    s.on("end", () => resolve(out));
    s.on("error", reject);
    for (const r of reqs) s.write(r);
    s.end();
  });
/** The status and details of a call that must fail (a plain object: the error itself carries its metadata). */
const failure = (p: Promise<unknown>): Promise<{ code: number; details: string }> =>
  p.then(
    () => ({ code: -1, details: "the call succeeded" }),
    (e: grpc.ServiceError) => ({ code: e.code, details: e.details }),
  );
const http = (path: string, body: Record<string, unknown>) => postJson(`${server.url}${path}`, body, { authorization: `Bearer ${KEY}` }).then((r) => r.json);

describe("build", () => {
  test("src/server/grpc/protos.json is what build/grpc-proto.ts renders from the .proto files", () => {
    expect(readFileSync(join(GRPC_DIR, "protos.json"), "utf8")).toBe(renderDescriptor());
  });
});

describe("tei.v1 against the HTTP routes", () => {
  test("Info", async () => {
    const info = await call(client("Info"), "Info", {}, meta("bert-classify"));
    expect(info).toMatchObject({ model_id: fixture("bert-classify"), model_type: "MODEL_TYPE_CLASSIFIER", model_dtype: "float32", max_input_length: expect.any(Number) });
    expect((await call(client("Info"), "Info", {}, meta("bert-rerank"))).model_type).toBe("MODEL_TYPE_RERANKER");
    expect((await call(client("Info"), "Info", {}, meta("bert-mean-norm"))).model_type).toBe("MODEL_TYPE_EMBEDDING");
  });

  test("Embed (normalize as asked), EmbedStream in order, EmbedAll, EmbedSparse", async () => {
    const embed = client("Embed");
    const texts = ["hello", "a longer sentence about the sea", "x y z"];
    const want = (await http("/embed", { model: "bert-mean-norm", inputs: texts })) as number[][];
    const one = await call(embed, "Embed", { inputs: texts[1], normalize: true, truncate: true }, meta("bert-mean-norm"));
    expect(maxAbsDiff(one.embeddings, want[1]!)).toBeLessThanOrEqual(1e-6);
    expect(one.metadata.compute_tokens).toBeGreaterThan(2);
    expect(one.metadata.compute_chars).toBe(texts[1]!.length);
    // TEI's timings: tokenization, queue and inference within the total (a text no other call sent: never a cache hit).
    const timed = (await call(embed, "Embed", { inputs: "a text sent once to time its tokenization", truncate: true }, meta("bert-mean-norm"))).metadata;
    expect(timed.tokenization_time_ns).toBeGreaterThan(0);
    expect(timed.inference_time_ns).toBeGreaterThan(0);
    expect(timed.total_time_ns).toBeGreaterThanOrEqual(timed.tokenization_time_ns + timed.queue_time_ns + timed.inference_time_ns);
    const raw = await call(embed, "Embed", { inputs: texts[1], normalize: false, truncate: true }, meta("bert-mean-norm"));
    const norm = Math.hypot(...raw.embeddings);
    expect(Math.abs(norm - 1)).toBeGreaterThan(1e-3);
    expect(maxAbsDiff(raw.embeddings.map((v: number) => v / norm), want[1]!)).toBeLessThanOrEqual(1e-5);
    const streamed = await streamAll(embed, "EmbedStream", texts.map((t) => ({ inputs: t, normalize: true })), meta("bert-mean-norm"));
    expect(streamed.length).toBe(3);
    streamed.forEach((r, i) => expect(maxAbsDiff(r.embeddings, want[i]!)).toBeLessThanOrEqual(1e-6));
    const all = await call(embed, "EmbedAll", { inputs: "hello there" }, meta("bert-mean-norm"));
    const wantAll = (await http("/embed_all", { model: "bert-mean-norm", inputs: "hello there" })) as number[][][];
    expect(all.token_embeddings.length).toBe(wantAll[0]!.length);
    all.token_embeddings.forEach((row: { embeddings: number[] }, i: number) => expect(maxAbsDiff(row.embeddings, wantAll[0]![i]!)).toBeLessThanOrEqual(1e-6));
    expect((await streamAll(embed, "EmbedAllStream", [{ inputs: "a" }, { inputs: "b c" }], meta("bert-mean-norm"))).map((r) => r.token_embeddings.length)).toEqual([3, 4]);
    const sparse = await call(embed, "EmbedSparse", { inputs: "the sea and the ships" }, meta("splade"));
    const wantSparse = ((await http("/embed_sparse", { model: "splade", inputs: "the sea and the ships" })) as Array<Array<{ index: number; value: number }>>)[0]!;
    expect(sparse.sparse_embeddings.map((v: { index: number }) => v.index)).toEqual(wantSparse.map((v) => v.index));
    expect(maxAbsDiff(sparse.sparse_embeddings.map((v: { value: number }) => v.value), wantSparse.map((v) => v.value))).toBeLessThanOrEqual(1e-5);
    expect((await streamAll(embed, "EmbedSparseStream", [{ inputs: "a" }, { inputs: "b" }], meta("splade"))).length).toBe(2);
  });

  test("Predict, PredictPair and their streams; Rerank and RerankStream", async () => {
    const predict = client("Predict");
    const one = await call(predict, "Predict", { inputs: "great movie", truncate: true }, meta("bert-classify"));
    const want = (await http("/predict", { model: "bert-classify", inputs: "great movie" })) as Array<{ label: string; score: number }>;
    expect(one.predictions.map((p: { label: string }) => p.label)).toEqual(want.map((p) => p.label));
    expect(maxAbsDiff(one.predictions.map((p: { score: number }) => p.score), want.map((p) => p.score))).toBeLessThanOrEqual(1e-6);
    const pair = await call(predict, "PredictPair", { inputs: ["a question", "an answer"], raw_scores: true }, meta("bert-classify"));
    const wantPair = (await http("/predict", { model: "bert-classify", inputs: [["a question", "an answer"]], raw_scores: true })) as Array<Array<{ score: number }>>;
    expect(maxAbsDiff(pair.predictions.map((p: { score: number }) => p.score), wantPair[0]!.map((p) => p.score))).toBeLessThanOrEqual(1e-6);
    expect((await streamAll(predict, "PredictStream", [{ inputs: "a" }, { inputs: "b" }], meta("bert-classify"))).length).toBe(2);
    expect((await streamAll(predict, "PredictPairStream", [{ inputs: ["a", "b"] }], meta("bert-classify"))).length).toBe(1);

    const rerank = client("Rerank");
    const texts = ["a cat sat", "rockets fly", "cats purr"];
    const ranked = await call(rerank, "Rerank", { query: "cats", texts, return_text: true }, meta("bert-rerank"));
    const wantRanks = (await http("/rerank", { model: "bert-rerank", query: "cats", texts, return_text: true })) as Array<{ index: number; score: number; text: string }>;
    expect(ranked.ranks.map((r: { index: number }) => r.index)).toEqual(wantRanks.map((r) => r.index));
    expect(ranked.ranks.map((r: { text: string }) => r.text)).toEqual(wantRanks.map((r) => r.text));
    expect(maxAbsDiff(ranked.ranks.map((r: { score: number }) => r.score), wantRanks.map((r) => r.score))).toBeLessThanOrEqual(1e-6);
    const viaStream = await new Promise<any>((resolve, reject) => {
      const s = rerank.RerankStream(meta("bert-rerank"), (e: grpc.ServiceError | null, res: unknown) => (e ? reject(e) : resolve(res)));
      for (const t of texts) s.write({ query: "cats", text: t });
      s.end();
    });
    expect(viaStream.ranks.map((r: { index: number }) => r.index)).toEqual(wantRanks.map((r) => r.index));
  });

  test("Tokenize and Decode, alone and streamed", async () => {
    const tok = client("Tokenize");
    const tokens = await call(tok, "Tokenize", { inputs: "hello world", add_special_tokens: true }, meta("bert-mean-norm"));
    const want = ((await http("/tokenize", { model: "bert-mean-norm", inputs: "hello world" })) as Array<Array<{ id: number; text: string; special: boolean; start: number | null }>>)[0]!;
    expect(tokens.tokens.map((t: { id: number }) => t.id)).toEqual(want.map((t) => t.id));
    expect(tokens.tokens.map((t: { special: boolean }) => t.special)).toEqual(want.map((t) => t.special));
    const text = await call(tok, "Decode", { ids: want.map((t) => t.id), skip_special_tokens: true }, meta("bert-mean-norm"));
    expect(text.text).toBe("hello world");
    expect((await streamAll(tok, "TokenizeStream", [{ inputs: "a" }, { inputs: "b" }], meta("bert-mean-norm"))).length).toBe(2);
    const wantDecoded = (await http("/decode", { model: "bert-mean-norm", ids: [want[1]!.id, want[2]!.id] })) as string[];
    expect((await streamAll(tok, "DecodeStream", [{ ids: [want[1]!.id, want[2]!.id], skip_special_tokens: true }], meta("bert-mean-norm")))[0].text).toBe(wantDecoded[0]!);
  });
});

describe("health and errors", () => {
  test("grpc.health.v1: SERVING for the server and each tei.v1 service; unknown services NOT_FOUND; Watch streams the status", async () => {
    const h = client("Health", health);
    for (const service of ["", "tei.v1.Embed", "tei.v1.Rerank"]) expect((await call(h, "Check", { service }, new grpc.Metadata())).status).toBe("SERVING");
    expect(await failure(call(h, "Check", { service: "nope" }, new grpc.Metadata()))).toMatchObject({ code: grpc.status.NOT_FOUND });
    const first = await new Promise<any>((resolve, reject) => {
      const s = h.Watch({ service: "" });
      s.on("data", (m: unknown) => {
        resolve(m);
        s.cancel();
      });
      s.on("error", (e: grpc.ServiceError) => e.code !== grpc.status.CANCELLED && reject(e));
    });
    expect(first.status).toBe("SERVING");
  });

  test("status codes: API key, unknown model, bad input, too long, oversize and malformed messages; the server keeps serving", async () => {
    const embed = client("Embed");
    expect(await failure(call(embed, "Embed", { inputs: "x" }, meta("bert-mean-norm", null)))).toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    expect(await failure(call(embed, "Embed", { inputs: "x" }, meta("bert-mean-norm", "wrong")))).toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    expect(await failure(call(embed, "Embed", { inputs: "x" }, meta("no-such-model")))).toMatchObject({ code: grpc.status.NOT_FOUND });
    // Several models and none named: which one is ambiguous.
    expect(await failure(call(client("Tokenize"), "Tokenize", { inputs: "x" }, meta()))).toMatchObject({ code: grpc.status.NOT_FOUND, details: expect.stringContaining("several models are served") });
    expect(await failure(call(embed, "Embed", { inputs: "word ".repeat(2000), truncate: false }, meta("bert-mean-norm")))).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    expect(await failure(call(client("Predict"), "PredictPair", { inputs: ["a", "b", "c"] }, meta("bert-classify")))).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringContaining("pair") });
    expect(await failure(call(client("Tokenize"), "Decode", { ids: [10_000_000] }, meta("bert-mean-norm")))).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    expect(await failure(call(embed, "Embed", { inputs: "x".repeat(70_000) }, meta("bert-mean-norm")))).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED });
    const malformed = await new Promise<grpc.ServiceError>((resolve) => {
      const raw = new grpc.Client(address, grpc.credentials.createInsecure());
      clients.push(raw);
      raw.makeUnaryRequest("/tei.v1.Embed/Embed", (x: Buffer) => x, (x: Buffer) => x, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), meta("bert-mean-norm"), (e) => resolve(e!));
    });
    // grpc-js answers a request it cannot decode itself, before any handler runs.
    expect(malformed.code).toBe(grpc.status.INVALID_ARGUMENT);
    // A stream that fails stops at its first error, with the status.
    expect(await failure(streamAll(embed, "EmbedStream", [{ inputs: "ok" }, { inputs: "word ".repeat(2000), truncate: false }], meta("bert-mean-norm")))).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    // A cancelled stream leaves nothing behind.
    await new Promise<void>((resolve) => {
      const s = embed.EmbedStream(meta("bert-mean-norm"));
      s.on("error", () => resolve());
      for (let i = 0; i < 20; i++) s.write({ inputs: `text ${i}` });
      s.cancel();
    });
    const ok = await call(embed, "Embed", { inputs: "still serving", normalize: true }, meta("bert-mean-norm"));
    expect(ok.embeddings.length).toBe(32);
    await Bun.sleep(200);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    for (const line of metrics.split("\n").filter((l) => l.startsWith("infinity_queue_depth{"))) expect(line.endsWith(" 0")).toBe(true);
  });
});
