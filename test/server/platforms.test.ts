// Managed platforms: SageMaker (`serve`, port 8080, HF_MODEL_ID or /opt/ml/model; GET /ping, POST /invocations) and
// Vertex AI (AIP_HTTP_PORT, AIP_STORAGE_URI, AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE with {"instances"} ->
// {"predictions"}), with requests shaped as each platform sends them, answered as the TEI routes answer.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadConfig } from "../../src/cli";
import { ConfigError } from "../../src/errors";
import { platformStart, SAGEMAKER_MODEL_DIR, vertexRoutes } from "../../src/platform";
import type { RunningServer } from "../../src/server/serve";
import { fixture, offlineHub, postJson, startTestServer } from "../helpers";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { listFolder, resolveModel } from "../../src/model/resolve";

describe("how each platform starts the server", () => {
  const none = () => false;
  test("SageMaker: `serve`, port 8080, the model from HF_MODEL_ID, else /opt/ml/model; explicit options win", () => {
    expect(platformStart(["serve"], { HF_MODEL_ID: "org/m" }, none)).toMatchObject({ platform: "sagemaker", args: [], env: { INFINITY_PORT: "8080", INFINITY_MODEL_ID: "org/m" } });
    expect(platformStart(["serve"], {}, (p) => p === SAGEMAKER_MODEL_DIR).env.INFINITY_MODEL_ID).toBe(SAGEMAKER_MODEL_DIR);
    expect(() => platformStart(["serve"], {}, none)).toThrow(/serve \(SageMaker\): no model: set HF_MODEL_ID or provide the model at \/opt\/ml\/model/);
    const explicit = platformStart(["serve", "--port", "9000", "--model-id", "x"], { HF_MODEL_ID: "org/m" }, none);
    expect(explicit.args).toEqual(["--port", "9000", "--model-id", "x"]);
    expect(explicit.env.INFINITY_PORT).toBeUndefined();
    expect(explicit.env.INFINITY_MODEL_ID).toBeUndefined();
    expect(platformStart(["serve"], { HF_MODEL_ID: "org/m", INFINITY_PORT: "7000" }, none).env.INFINITY_PORT).toBe("7000");
    const cfg = loadConfig(["serve"], { HF_MODEL_ID: fixture("bert-mean-norm") }).config!;
    expect(cfg.port).toBe(8080);
    expect(cfg.models.map((m) => m.modelId)).toEqual([fixture("bert-mean-norm")]);
  });

  test("Vertex AI: AIP_HTTP_PORT, AIP_STORAGE_URI (a gs:// URI or a folder), else HF_MODEL_ID", () => {
    expect(platformStart([], { AIP_HTTP_PORT: "8081", AIP_STORAGE_URI: "/models/m" }, none)).toMatchObject({ platform: "vertex", env: { INFINITY_PORT: "8081", INFINITY_MODEL_ID: "/models/m" } });
    expect(platformStart([], { AIP_HTTP_PORT: "8081", HF_MODEL_ID: "org/m" }, none).env.INFINITY_MODEL_ID).toBe("org/m");
    expect(platformStart([], { AIP_HTTP_PORT: "8081", AIP_STORAGE_URI: "gs://bucket/model" }, none).env.INFINITY_MODEL_ID).toBe("gs://bucket/model");
    expect(platformStart(["--model-id", "x"], { AIP_HTTP_PORT: "8081", AIP_STORAGE_URI: "gs://b/m" }, none).env.INFINITY_MODEL_ID).toBeUndefined();
    expect(platformStart(["v2", "--model-id", "x"], {}, none)).toMatchObject({ platform: null, args: ["--model-id", "x"] });
    expect(vertexRoutes({ AIP_HEALTH_ROUTE: "/h/", AIP_PREDICT_ROUTE: "/v1/endpoints/1/deployedModels/2:predict" })).toEqual({ health: "/h", predict: "/v1/endpoints/1/deployedModels/2:predict" });
    expect(() => vertexRoutes({ AIP_PREDICT_ROUTE: "predict" })).toThrow(ConfigError);
  });
});

describe("the platforms' routes on a live server", () => {
  let server: RunningServer;
  let url: string;
  const env = { AIP_HEALTH_ROUTE: "/vertex/health", AIP_PREDICT_ROUTE: "/vertex/predict" };
  beforeAll(async () => {
    server = await startTestServer({ "model-id": ["bert-mean-norm", "bert-rerank", "bert-classify"].map(fixture), "model-warmup": "false", "max-inputs-per-request": "8" }, env);
    url = server.url;
  });
  afterAll(() => server.shutdown());

  test("health: GET /ping and the Vertex health route answer as /health", async () => {
    for (const path of ["/ping", "/vertex/health"]) {
      const res = await fetch(`${url}${path}`);
      expect(res.status).toBe(200);
      expect((await res.json()).status).toBe("ready");
    }
  });

  test("SageMaker /invocations: {inputs} embeds or classifies by the model's task, {query, texts} reranks, as the TEI routes", async () => {
    const embed = await postJson(`${url}/invocations`, { model: "bert-mean-norm", inputs: ["hello", "world"] });
    expect(embed.status).toBe(200);
    expect(embed.json).toEqual((await postJson(`${url}/embed`, { model: "bert-mean-norm", inputs: ["hello", "world"] })).json);
    const rerank = await postJson(`${url}/invocations`, { model: "bert-rerank", query: "cats", texts: ["a cat", "a rocket"] });
    expect(rerank.status).toBe(200);
    expect(rerank.json).toEqual((await postJson(`${url}/rerank`, { model: "bert-rerank", query: "cats", texts: ["a cat", "a rocket"] })).json);
    const classify = await postJson(`${url}/invocations`, { model: "bert-classify", inputs: "great" });
    expect(classify.status).toBe(200);
    expect(classify.json[0].length).toBeGreaterThan(1);
    expect(classify.json[0][0]).toEqual({ label: expect.any(String), score: expect.any(Number) });
  });

  test("Vertex predict: one prediction per instance, parameters applied to each, in the TEI routes' shapes", async () => {
    const res = await postJson(`${url}/vertex/predict`, {
      instances: [{ inputs: "hello" }, { query: "cats", texts: ["a cat", "a rocket"], model: "bert-rerank" }],
      parameters: { model: "bert-mean-norm" },
    });
    expect(res.status).toBe(200);
    expect(res.json.predictions.length).toBe(2);
    expect(res.json.predictions[0]).toEqual((await postJson(`${url}/embed`, { model: "bert-mean-norm", inputs: "hello" })).json);
    expect(res.json.predictions[1]).toEqual((await postJson(`${url}/rerank`, { model: "bert-rerank", query: "cats", texts: ["a cat", "a rocket"] })).json);
  });

  test("bodies for the wrong platform and bad instances get a clear 400; the server keeps serving", async () => {
    const cases: Array<[string, unknown, RegExp]> = [
      ["/vertex/predict", { inputs: "x" }, /`instances` is required: Vertex AI sends/],
      ["/vertex/predict", { instances: [] }, /`instances` must not be empty/],
      ["/vertex/predict", { instances: "x" }, /`instances` must be a list/],
      ["/vertex/predict", { instances: ["text"] }, /`instances\[0\]` must be an object/],
      ["/vertex/predict", { instances: Array.from({ length: 9 }, () => ({ inputs: "a" })), parameters: { model: "bert-mean-norm" } }, /at most 8 \(--max-inputs-per-request\)/],
      ["/vertex/predict", { instances: [{ inputs: "a" }], parameters: 3 }, /`parameters` must be an object/],
      ["/vertex/predict", [1, 2], /must be a JSON object/],
      ["/invocations", { instances: [{ inputs: "a" }], model: "bert-mean-norm" }, /inputs/],
    ];
    for (const [path, body, message] of cases) {
      const res = await postJson(`${url}${path}`, body);
      expect(res.status).toBe(400);
      expect(res.json.error.message).toMatch(message);
    }
    const broken = await fetch(`${url}/vertex/predict`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"instances": [' });
    expect(broken.status).toBe(400);
    const ok = await postJson(`${url}/vertex/predict`, { instances: [{ inputs: "still here", model: "bert-mean-norm" }] });
    expect(ok.status).toBe(200);
  });

  test("a predict route the server already serves is refused at start; the API key guards predict, not health", async () => {
    await expect(startTestServer({ "model-id": fixture("bert-mean-norm"), "model-warmup": "false" }, { AIP_PREDICT_ROUTE: "/embed" })).rejects.toThrow(/AIP_PREDICT_ROUTE \/embed is a route this server already serves/);
    const keyed = await startTestServer({ "model-id": fixture("bert-mean-norm"), "model-warmup": "false", "api-key": "k" }, env);
    try {
      expect((await fetch(`${keyed.url}/ping`)).status).toBe(200);
      expect((await postJson(`${keyed.url}/vertex/predict`, { instances: [{ inputs: "a" }] })).status).toBe(401);
      expect((await postJson(`${keyed.url}/invocations`, { inputs: "a" })).status).toBe(401);
      expect((await postJson(`${keyed.url}/vertex/predict`, { instances: [{ inputs: "a" }] }, { authorization: "Bearer k" })).status).toBe(200);
    } finally {
      await keyed.shutdown();
    }
  });
});

describe("AIP_STORAGE_URI in Cloud Storage (a stand-in for its JSON API and the metadata server, on loopback)", () => {
  const source = fixture("bert-mean-norm");
  const seen: Array<{ path: string; auth: string | null }> = [];
  let gcs: ReturnType<typeof Bun.serve>;
  beforeAll(() => {
    gcs = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        const url = new URL(req.url);
        seen.push({ path: url.pathname, auth: req.headers.get("authorization") });
        if (url.pathname === "/computeMetadata/v1/instance/service-accounts/default/token") {
          return req.headers.get("metadata-flavor") === "Google" ? Response.json({ access_token: "ya29.test", expires_in: 3600 }) : new Response("no", { status: 403 });
        }
        if (url.pathname === "/storage/v1/b/models-bucket/o") {
          const prefix = url.searchParams.get("prefix") ?? "";
          // Two pages, as the API splits long listings.
          const all = listFolder(source).map((f) => `vertex/bge/${f}`).filter((n) => n.startsWith(prefix));
          const second = url.searchParams.get("pageToken") === "p2";
          const half = Math.ceil(all.length / 2);
          return Response.json({ items: (second ? all.slice(half) : all.slice(0, half)).map((name) => ({ name })), ...(second ? {} : { nextPageToken: "p2" }) });
        }
        const object = /^\/storage\/v1\/b\/models-bucket\/o\/(.+)$/.exec(url.pathname);
        if (object && url.searchParams.get("alt") === "media") {
          const name = decodeURIComponent(object[1]!);
          return new Response(Bun.file(join(source, name.slice("vertex/bge/".length))));
        }
        return new Response("not found", { status: 404 });
      },
    });
  });
  afterAll(() => gcs.stop(true));

  test("the folder is copied once (with the metadata server's token) and served; a missing one is a clear error", async () => {
    const cacheDir = mkdtempSync(join(tmpdir(), "infinity-gcs-"));
    const settings = { ...offlineHub, cacheDir, gcs: { endpoint: `http://127.0.0.1:${gcs.port}`, metadataHost: `127.0.0.1:${gcs.port}` } };
    const r = await resolveModel("gs://models-bucket/vertex/bge", "main", "auto", settings);
    expect(r.dir).toBe(join(cacheDir, "gcs", "models-bucket", "vertex/bge"));
    expect(r.files).toEqual(listFolder(source));
    expect(seen.filter((s) => s.path.startsWith("/storage/")).every((s) => s.auth === "Bearer ya29.test")).toBe(true);
    const fetched = seen.length;
    await resolveModel("gs://models-bucket/vertex/bge", "main", "auto", settings);
    expect(seen.length).toBe(fetched);
    await expect(resolveModel("gs://models-bucket/nothing-here", "main", "auto", settings)).rejects.toThrow(/holds no files/);
    await expect(resolveModel("gs://Bad_Bucket", "main", "auto", settings)).rejects.toThrow(/not a Cloud Storage URI/);
    await expect(resolveModel("gs://models-bucket/x", "main", "auto", { ...settings, cacheDir: mkdtempSync(join(tmpdir(), "g-")), gcs: { ...settings.gcs, metadataHost: "127.0.0.1:9" } })).rejects.toThrow(/metadata server 127\.0\.0\.1:9 is unreachable/);

    // Vertex's start: AIP_STORAGE_URI names the bucket folder; an emulator host needs no token.
    const env = { AIP_HTTP_PORT: "0", AIP_STORAGE_URI: "gs://models-bucket/vertex/bge", STORAGE_EMULATOR_HOST: `127.0.0.1:${gcs.port}` };
    const start = platformStart([], env, () => false);
    const vertex = await startTestServer({ "model-id": start.env.INFINITY_MODEL_ID!, "cache-dir": mkdtempSync(join(tmpdir(), "infinity-gcs-")), "model-warmup": "false" }, env);
    try {
      const res = await postJson(`${vertex.url}/embed`, { inputs: "hello" });
      expect(res.status).toBe(200);
      expect(res.json[0].length).toBe(32);
    } finally {
      await vertex.shutdown();
    }
  });
});
