// Registry: a model that fails to load after its session was created leaves no inference worker behind.
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { buildConfig } from "../../src/config";
import { Registry } from "../../src/engine/registry";
import { ModelSession } from "../../src/model/session";
import { TokenizerPool } from "../../src/tokenize/pool";
import { fixture, offlineHub } from "../helpers";

describe("Registry loading", () => {
  const pools: TokenizerPool[] = [];
  afterEach(() => {
    for (const p of pools.splice(0)) p.close();
  });

  test("a load that fails after the session exists (the tokenizer) releases the session and its worker", async () => {
    const pool = new TokenizerPool(1);
    pools.push(pool);
    spyOn(pool, "load").mockImplementation(() => Promise.reject(new Error("tokenizer refused")));
    const created = spyOn(ModelSession, "create");
    const released = spyOn(ModelSession.prototype, "release");
    try {
      const config = buildConfig({ flags: new Map([["model-id", [fixture("bert-mean-norm")]], ["num-threads", ["1"]]]), env: {}, file: null, cpuCount: 2 });
      const registry = new Registry(pool, null);
      await expect(registry.loadAll(config.models, offlineHub)).rejects.toThrow(/tokenizer refused/);
      expect(created).toHaveBeenCalledTimes(1);
      const session = (await created.mock.results[0]!.value) as ModelSession;
      expect(released).toHaveBeenCalledTimes(1);
      expect(session.status.state).toBe("released");
    } finally {
      created.mockRestore();
      released.mockRestore();
    }
  });
});
