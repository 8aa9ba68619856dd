// Registry: a model that fails to load after its session was created leaves no inference worker behind.
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { buildConfig } from "../../src/config";
import { Registry } from "../../src/engine/registry";
import { primeRuntime } from "../../src/model/prime";
import { ModelSession } from "../../src/model/session";
import { TokenizerPool } from "../../src/tokenize/pool";
import { fixture, offlineHub } from "../helpers";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

describe("Registry loading", () => {
  const pools: TokenizerPool[] = [];
  afterEach(() => {
    for (const p of pools.splice(0)) p.close();
  });

  test("a load that fails after the session exists (the tokenizer) releases the session and its worker", async () => {
    const pool = new TokenizerPool(1);
    pools.push(pool);
    // The process's one-time runtime priming (a session of its own, created and released before the first model
    // loads) happens here, before the spies, whether this file runs alone or after others: the spies then see only
    // the model's sessions.
    await primeRuntime(pool, "cpu");
    spyOn(pool, "load").mockImplementation(() => Promise.reject(new Error("tokenizer refused")));
    const created = spyOn(ModelSession, "create");
    const released = spyOn(ModelSession.prototype, "release");
    try {
      const flags = new Map([["model-id", [fixture("bert-mean-norm")]], ["num-threads", ["1"]], ["graph", ["export"]]]);
      const config = buildConfig({ flags, env: {}, file: null, cpuCount: 2 });
      const registry = new Registry(pool, null);
      await expect(registry.loadAll(config.models, offlineHub)).rejects.toThrow(/tokenizer refused/);
      expect(created).toHaveBeenCalledTimes(1);
      expect(created.mock.calls[0]![0]).toBe(join(fixture("bert-mean-norm"), "onnx", "model.onnx"));
      const session = (await created.mock.results[0]!.value) as ModelSession;
      expect(released).toHaveBeenCalledTimes(1);
      expect(session.status.state).toBe("released");
    } finally {
      created.mockRestore();
      released.mockRestore();
    }
  });

  test("an LLM reranker's rewritten graph (a temporary file) is what the session reads; it is removed when the model is unloaded, and when its load fails", async () => {
    const created = spyOn(ModelSession, "create");
    try {
      const config = buildConfig({ flags: new Map([["model-id", [fixture("qwen3-rerank")]], ["num-threads", ["1"]], ["model-warmup", ["false"]]]), env: {}, file: null, cpuCount: 2 });
      const pool = new TokenizerPool(1);
      pools.push(pool);
      const registry = new Registry(pool, null);
      await registry.loadAll(config.models, offlineHub);
      // (the runtime's priming session, made once per process, is a graph in memory)
      const paths = () => created.mock.calls.map((c) => c[0]).filter((p): p is string => typeof p === "string");
      const path = paths()[0]!;
      expect(path.startsWith(join(tmpdir(), "infinity-logits-"))).toBe(true);
      expect(existsSync(path)).toBe(true);
      await registry.unloadModel(config.models[0]!.servedModelName);
      expect(existsSync(dirname(path))).toBe(false);
      await registry.close();

      created.mockClear();
      const failing = new TokenizerPool(1);
      pools.push(failing);
      spyOn(failing, "load").mockImplementation(() => Promise.reject(new Error("tokenizer refused")));
      await expect(new Registry(failing, null).loadAll(config.models, offlineHub)).rejects.toThrow(/tokenizer refused/);
      const failed = paths()[0]!;
      expect(failed.startsWith(join(tmpdir(), "infinity-logits-"))).toBe(true);
      expect(existsSync(dirname(failed))).toBe(false);
    } finally {
      created.mockRestore();
    }
  });

  /** A copy of a fixture with its config.json edited, loaded alone; resolves to the load error's message. */
  async function loadEdited(name: string, edit: (config: Record<string, unknown>) => void, onnxFrom?: string): Promise<string> {
    const dir = mkdtempSync(join(tmpdir(), `${name}-`));
    try {
      cpSync(fixture(name), dir, { recursive: true });
      if (onnxFrom) cpSync(join(fixture(onnxFrom), "onnx", "model.onnx"), join(dir, "onnx", "model.onnx"));
      const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
      edit(config);
      writeFileSync(join(dir, "config.json"), JSON.stringify(config));
      const pool = new TokenizerPool(1);
      pools.push(pool);
      const registry = new Registry(pool, null);
      const config2 = buildConfig({ flags: new Map([["model-id", [dir]], ["num-threads", ["1"]], ["model-warmup", ["false"]]]), env: {}, file: null, cpuCount: 2 });
      const err = await registry.loadAll(config2.models, offlineHub).then(() => null, (e: Error) => e);
      await registry.close();
      return err ? err.message : "loaded";
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  test("Jina v3 task adapters: task_id is fed only with config.json lora_adaptations, which need a task_id input", async () => {
    expect(await loadEdited("jina-v3", () => {})).toBe("loaded");
    expect(await loadEdited("jina-v3", (c) => delete c.lora_adaptations)).toMatch(/takes input this server cannot feed: task_id/);
    // An export without task_id (which adapter was merged into it is unknown) is refused.
    expect(await loadEdited("jina-v3", () => {}, "xlmr-max")).toMatch(/declares task adapters \(lora_adaptations: retrieval.query, .*\) but onnx\/model.onnx has no task_id input/);
    expect(await loadEdited("jina-v3", (c) => (c.lora_adaptations = "retrieval.query"))).toMatch(/lora_adaptations must be a non-empty list/);
  });
});
