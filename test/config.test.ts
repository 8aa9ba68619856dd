import { describe, expect, test } from "bun:test";
import { buildConfig, defaultServedName, envName, helpText, OPTIONS, parseArgv, type Sources } from "../src/config";
import { ConfigError } from "../src/errors";

function sources(argv: string[], env: Record<string, string> = {}, file: Record<string, unknown> | null = null): Sources {
  return { flags: parseArgv(argv).flags, env, file, cpuCount: 2 };
}
const build = (argv: string[], env: Record<string, string> = {}, file: Record<string, unknown> | null = null) => buildConfig(sources(argv, env, file));

describe("flags", () => {
  test("defaults match the documented ones", () => {
    const c = build(["--model-id", "BAAI/bge-small-en-v1.5"]);
    expect(c.port).toBe(7997);
    expect(c.host).toBe("0.0.0.0");
    expect(c.maxInputsPerRequest).toBe(2048);
    expect(c.maxVectorsPerRequest).toBe(65536);
    const m = c.models[0]!;
    expect(m.servedModelName).toBe("BAAI/bge-small-en-v1.5");
    expect(m.batchSize).toBe(32);
    expect(m.dtype).toBe("auto");
    expect(m.poolingMethod).toBe("auto");
    expect(m.modelWarmup).toBe(true);
    expect(m.numThreads).toBe(2);
    expect(m.inferenceTimeoutSeconds).toBe(120);
    expect(m.runOverheadTokens).toBe(0);
  });

  test("--run-overhead-tokens: per model, env and file, 0 = calibrate, negative is refused", () => {
    const c = build(["--model-id", "a/x", "--model-id", "b/y", "--run-overhead-tokens", "0", "--run-overhead-tokens", "40"]);
    expect(c.models.map((m) => m.runOverheadTokens)).toEqual([0, 40]);
    expect(build(["--model-id", "a/x"], { INFINITY_RUN_OVERHEAD_TOKENS: "12" }).models[0]!.runOverheadTokens).toBe(12);
    const file = buildConfig({ flags: new Map(), env: {}, file: { models: [{ "model-id": "a/x", "run-overhead-tokens": 30 }] }, cpuCount: 2 });
    expect(file.models[0]!.runOverheadTokens).toBe(30);
    expect(() => build(["--model-id", "a/x", "--run-overhead-tokens", "-1"])).toThrow(/--run-overhead-tokens/);
  });

  test("--instances: per model, env and file, 0 = calibrate (the default), negative is refused; --num-threads given is noted", () => {
    expect(build(["--model-id", "a/x"]).models[0]!.instances).toBe(0);
    const c = build(["--model-id", "a/x", "--model-id", "b/y", "--instances", "2", "--instances", "0", "--num-threads", "1", "--num-threads", "0"]);
    expect(c.models.map((m) => [m.instances, m.numThreads, m.numThreadsSet])).toEqual([[2, 1, true], [0, 2, false]]);
    expect(build(["--model-id", "a/x"], { INFINITY_INSTANCES: "3" }).models[0]!.instances).toBe(3);
    const file = buildConfig({ flags: new Map(), env: {}, file: { models: [{ "model-id": "a/x", instances: 4 }] }, cpuCount: 2 });
    expect(file.models[0]!.instances).toBe(4);
    expect(() => build(["--model-id", "a/x", "--instances", "-1"])).toThrow(/--instances/);
  });

  test("--inference-timeout: per model, 0 turns the hang check off, negative is refused", () => {
    const c = build(["--model-id", "a/x", "--model-id", "b/y", "--inference-timeout", "0", "--inference-timeout", "600"]);
    expect(c.models.map((m) => m.inferenceTimeoutSeconds)).toEqual([0, 600]);
    expect(build(["--model-id", "a/x"], { INFINITY_INFERENCE_TIMEOUT: "30" }).models[0]!.inferenceTimeoutSeconds).toBe(30);
    expect(() => build(["--model-id", "a/x", "--inference-timeout", "-1"])).toThrow(/--inference-timeout/);
  });

  test("--flag=value, --no-bool, snake_case flags", () => {
    const c = build(["--model_id=/models/a", "--no-model-warmup", "--port=8080", "--url-prefix", "api/"]);
    expect(c.models[0]!.modelWarmup).toBe(false);
    expect(c.port).toBe(8080);
    expect(c.urlPrefix).toBe("/api");
    expect(c.models[0]!.servedModelName).toBe("a");
  });

  test("per-model options: one value for all, or one per model by position", () => {
    const c = build(["--model-id", "a/x", "--model-id", "b/y", "--batch-size", "8", "--dtype", "int8", "--dtype", "float16", "--served-model-name", "x", "--served-model-name", "y"]);
    expect(c.models.map((m) => m.batchSize)).toEqual([8, 8]);
    expect(c.models.map((m) => m.dtype)).toEqual(["int8", "float16"]);
    expect(c.models.map((m) => m.servedModelName)).toEqual(["x", "y"]);
  });

  test("any other count of per-model values is an error", () => {
    expect(() => build(["--model-id", "a/x", "--model-id", "b/y", "--model-id", "c/z", "--batch-size", "1", "--batch-size", "2"])).toThrow(/3 models/);
  });

  test("bad values are clear errors", () => {
    expect(() => build([])).toThrow(/no model given/);
    expect(() => build(["--model-id", "a/b", "--port", "http"])).toThrow(/--port.*integer/);
    expect(() => build(["--model-id", "a/b", "--port", "70000"])).toThrow(/--port/);
    expect(() => build(["--model-id", "a/b", "--dtype", "bf16"])).toThrow(/--dtype.*float32/);
    expect(() => build(["--model-id", "a/b", "--batch-size", "0"])).toThrow(/--batch-size/);
    expect(() => parseArgv(["--nope"])).toThrow(/unknown option --nope/);
    expect(() => parseArgv(["--port"])).toThrow(/needs a value/);
    expect(() => parseArgv(["stray"])).toThrow(/unexpected argument/);
    expect(() => build(["--model-id", "a/b", "--model-id", "c/b", "--served-model-name", "same"])).toThrow(/used twice/);
  });

  test("every error is a ConfigError", () => {
    try {
      build(["--model-id", "a/b", "--log-level", "loud"]);
      throw new Error("no error");
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
    }
  });
});

describe("environment and config file", () => {
  test("INFINITY_* variables, lists ';'-separated", () => {
    const c = build([], { INFINITY_MODEL_ID: "a/x;b/y", INFINITY_BATCH_SIZE: "4;16", INFINITY_PORT: "9000", INFINITY_API_KEY: "k1;k2", INFINITY_MODEL_WARMUP: "false" });
    expect(c.models.map((m) => m.modelId)).toEqual(["a/x", "b/y"]);
    expect(c.models.map((m) => m.batchSize)).toEqual([4, 16]);
    expect(c.models.map((m) => m.modelWarmup)).toEqual([false, false]);
    expect(c.port).toBe(9000);
    expect(c.apiKeys).toEqual(["k1", "k2"]);
  });

  test("precedence: flag > environment > file > default", () => {
    const file = { port: 7000, host: "127.0.0.1", "log-level": "warn", models: [{ "model-id": "f/one", "batch-size": 3 }, { model_id: "f/two" }] };
    const fromFile = build([], {}, file);
    expect(fromFile.port).toBe(7000);
    expect(fromFile.logLevel).toBe("warn");
    expect(fromFile.models.map((m) => [m.modelId, m.batchSize])).toEqual([["f/one", 3], ["f/two", 32]]);
    const envWins = build([], { INFINITY_PORT: "7100" }, file);
    expect(envWins.port).toBe(7100);
    expect(envWins.host).toBe("127.0.0.1");
    const flagWins = build(["--port", "7200"], { INFINITY_PORT: "7100" }, file);
    expect(flagWins.port).toBe(7200);
    // A per-model flag with one value overrides every [[models]] table.
    const batchFlag = build(["--batch-size", "9"], {}, file);
    expect(batchFlag.models.map((m) => m.batchSize)).toEqual([9, 9]);
    // A model list from flags replaces the file's models and their settings.
    const ids = build(["--model-id", "cli/model"], {}, file);
    expect(ids.models.map((m) => [m.modelId, m.batchSize])).toEqual([["cli/model", 32]]);
  });

  test("unknown keys in the file are errors", () => {
    expect(() => build([], {}, { prot: 1, models: [{ "model-id": "a/b" }] })).toThrow(/unknown key "prot"/);
    expect(() => build([], {}, { models: [{ "model-id": "a/b", bacth: 1 }] })).toThrow(/unknown key "bacth"/);
    expect(() => build([], {}, { models: [{ "batch-size": 1 }] })).toThrow(/needs a model-id/);
    expect(() => build([], {}, { models: "x" })).toThrow(/array of tables/);
  });
});

describe("help and names", () => {
  test("--help lists every option with its default and environment variable", () => {
    const text = helpText();
    for (const o of OPTIONS) {
      expect(text).toContain(`--${o.kind === "bool" ? "[no-]" : ""}${o.name}`);
      expect(text).toContain(envName(o.name));
    }
  });

  test("served names derived from ids and folders", () => {
    expect(defaultServedName("BAAI/bge-small-en-v1.5")).toBe("BAAI/bge-small-en-v1.5");
    expect(defaultServedName("/models/my-model/")).toBe("my-model");
    expect(defaultServedName("./m")).toBe("m");
    expect(defaultServedName("test/fixtures/models/bert-mean-norm")).toBe("bert-mean-norm");
  });
});

describe("result cache options", () => {
  test("off by default; flag, INFINITY_* variable and file key each set it", () => {
    expect(build(["--model-id", "a"]).resultCache).toBeNull();
    expect(build(["--model-id", "a", "--result-cache", "memory", "--result-cache-size-mb", "64"]).resultCache).toEqual({ backend: { kind: "memory" }, sizeMb: 64 });
    expect(build(["--model-id", "a"], { INFINITY_RESULT_CACHE: "redis://cache:6379" }).resultCache!.backend).toEqual({ kind: "redis", url: "redis://cache:6379" });
    const file = build([], {}, { "result-cache": "sqlite:/data/r.db", result_cache_size_mb: 5, models: [{ "model-id": "a" }] }).resultCache;
    expect(file).toEqual({ backend: { kind: "sqlite", path: "/data/r.db" }, sizeMb: 5 });
    expect(() => build(["--model-id", "a", "--result-cache", "disk"])).toThrow(ConfigError);
  });
});

describe("--openai-token-ids", () => {
  test("cl100k by default; flag, INFINITY_OPENAI_TOKEN_IDS and the file's key set it; other values are refused", () => {
    expect(build(["--model-id", "a"]).openaiTokenIds).toBe("cl100k");
    expect(build(["--model-id", "a", "--openai-token-ids", "model"]).openaiTokenIds).toBe("model");
    expect(build(["--model-id", "a"], { INFINITY_OPENAI_TOKEN_IDS: "model" }).openaiTokenIds).toBe("model");
    expect(build([], {}, { "openai-token-ids": "model", models: [{ "model-id": "a" }] }).openaiTokenIds).toBe("model");
    expect(build([], {}, { openai_token_ids: "model", models: [{ "model-id": "a" }] }).openaiTokenIds).toBe("model");
    // The flag wins over the environment, the environment over the file.
    expect(build(["--model-id", "a", "--openai-token-ids", "cl100k"], { INFINITY_OPENAI_TOKEN_IDS: "model" }).openaiTokenIds).toBe("cl100k");
    expect(build(["--model-id", "a"], { INFINITY_OPENAI_TOKEN_IDS: "cl100k" }, { "openai-token-ids": "model" }).openaiTokenIds).toBe("cl100k");
    expect(() => build(["--model-id", "a", "--openai-token-ids", "tiktoken"])).toThrow(/openai-token-ids: expected one of cl100k, model/);
    expect(() => build(["--model-id", "a"], { INFINITY_OPENAI_TOKEN_IDS: "o200k" })).toThrow(ConfigError);
  });
});

describe("--quantization-ranges", () => {
  test("per model by flag (\"\" = none for that model), INFINITY_QUANTIZATION_RANGES, and the file's per-model key", () => {
    const c = build(["--model-id", "a", "--model-id", "b", "--quantization-ranges", "/r/a.json", "--quantization-ranges", ""]);
    expect(c.models.map((m) => m.quantizationRanges)).toEqual(["/r/a.json", null]);
    expect(build(["--model-id", "a"]).models[0]!.quantizationRanges).toBeNull();
    expect(build(["--model-id", "a"], { INFINITY_QUANTIZATION_RANGES: "/r/e.npy" }).models[0]!.quantizationRanges).toBe("/r/e.npy");
    const file = build([], {}, { models: [{ "model-id": "a", "quantization-ranges": "/r/f.json" }, { "model-id": "b" }] });
    expect(file.models.map((m) => m.quantizationRanges)).toEqual(["/r/f.json", null]);
  });
});

describe("--max-length", () => {
  test("per model, from flags, environment and file; 0 (the model's own) by default; negative refused", () => {
    expect(build(["--model-id", "a"]).models[0]!.maxLength).toBe(0);
    const c = build(["--model-id", "a", "--model-id", "b", "--max-length", "8192", "--max-length", "0"]);
    expect(c.models.map((m) => m.maxLength)).toEqual([8192, 0]);
    expect(build(["--model-id", "a"], { INFINITY_MAX_LENGTH: "512" }).models[0]!.maxLength).toBe(512);
    expect(build([], {}, { models: [{ "model-id": "a", "max-length": 32768 }, { "model-id": "b" }] }).models.map((m) => m.maxLength)).toEqual([32768, 0]);
    expect(() => build(["--model-id", "a", "--max-length", "-1"])).toThrow("flag --max-length: expected a non-negative integer");
  });
});

describe("model lifecycle options", () => {
  test("--load and --idle-unload-seconds per model; the memory budget and load timeout per server", () => {
    const c = build(["--model-id", "a", "--model-id", "b", "--load", "startup", "--load", "on-demand", "--idle-unload-seconds", "30", "--max-models-memory-mb", "2048"]);
    expect(c.models.map((m) => [m.load, m.idleUnloadSeconds])).toEqual([["startup", 30], ["on-demand", 30]]);
    expect(c.maxModelsMemoryMb).toBe(2048);
    expect(c.modelLoadTimeoutSeconds).toBe(60);
    const d = build(["--model-id", "a"]);
    expect([d.models[0]!.load, d.models[0]!.idleUnloadSeconds, d.maxModelsMemoryMb]).toEqual(["startup", 0, 0]);
    const env = build(["--model-id", "a"], { INFINITY_LOAD: "on-demand", INFINITY_MODEL_LOAD_TIMEOUT: "5" });
    expect([env.models[0]!.load, env.modelLoadTimeoutSeconds]).toEqual(["on-demand", 5]);
    const file = build([], {}, { max_models_memory_mb: 512, models: [{ "model-id": "a", load: "on-demand", "idle-unload-seconds": 600 }, { "model-id": "b" }] });
    expect(file.models.map((m) => [m.load, m.idleUnloadSeconds])).toEqual([["on-demand", 600], ["startup", 0]]);
    expect(file.maxModelsMemoryMb).toBe(512);
    expect(() => build(["--model-id", "a", "--load", "lazy"])).toThrow("expected one of startup, on-demand");
    expect(() => build(["--model-id", "a", "--model-load-timeout", "0"])).toThrow("--model-load-timeout must be at least 1");
  });

  test("--model-load-retry-seconds: default 10, 0 allowed (no backoff), by env and config file; negative refused", () => {
    expect(build(["--model-id", "a"]).modelLoadRetrySeconds).toBe(10);
    expect(build(["--model-id", "a", "--model-load-retry-seconds", "0"]).modelLoadRetrySeconds).toBe(0);
    expect(build(["--model-id", "a"], { INFINITY_MODEL_LOAD_RETRY_SECONDS: "45" }).modelLoadRetrySeconds).toBe(45);
    expect(build([], {}, { model_load_retry_seconds: 7, models: [{ "model-id": "a" }] }).modelLoadRetrySeconds).toBe(7);
    expect(() => build(["--model-id", "a", "--model-load-retry-seconds", "-1"])).toThrow("expected a non-negative integer");
  });
});
