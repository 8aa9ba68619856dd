// Managed platforms: SageMaker (`serve`, port 8080, HF_MODEL_ID or /opt/ml/model; GET /ping, POST /invocations) and
// Vertex AI (AIP_HTTP_PORT, AIP_STORAGE_URI, AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE with {"instances"} ->
// {"predictions"}), with requests shaped as each platform sends them, answered as the TEI routes answer.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadConfig } from "../../src/cli";
import { ConfigError } from "../../src/errors";
import { platformStart, SAGEMAKER_MODEL_DIR, vertexRoutes } from "../../src/platform";
import type { RunningServer } from "../../src/server/serve";
import { fixture, postJson, startTestServer } from "../helpers";

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

  test("Vertex AI: AIP_HTTP_PORT, AIP_STORAGE_URI as a folder (a gs:// URI is refused with what to do), else HF_MODEL_ID", () => {
    expect(platformStart([], { AIP_HTTP_PORT: "8081", AIP_STORAGE_URI: "/models/m" }, none)).toMatchObject({ platform: "vertex", env: { INFINITY_PORT: "8081", INFINITY_MODEL_ID: "/models/m" } });
    expect(platformStart([], { AIP_HTTP_PORT: "8081", HF_MODEL_ID: "org/m" }, none).env.INFINITY_MODEL_ID).toBe("org/m");
    expect(() => platformStart([], { AIP_HTTP_PORT: "8081", AIP_STORAGE_URI: "gs://bucket/model" }, none)).toThrow(/only a local folder is read/);
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
