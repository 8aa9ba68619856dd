// The command line as a user runs it: a real process, real signals.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildConfig, envName, OPTIONS } from "../src/config";
import { freePort } from "../bench/process";
import { fixture, ROOT } from "./helpers";

const CLI = join(ROOT, "src", "cli.ts");
const run = (args: string[], env: Record<string, string> = {}) =>
  Bun.spawn([process.execPath, CLI, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });

async function waitHealthy(url: string, ms = 30000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const r = await fetch(`${url}/health`).catch(() => null);
    if (r?.status === 200) return;
    await Bun.sleep(100);
  }
  throw new Error("server did not become healthy");
}
/**
 * Waits until the server has received `n` requests on `route` (answered or still in flight), read from /metrics:
 * answered ones in infinity_requests_total, the others in infinity_requests_in_flight (which counts the scrape
 * itself).
 */
async function waitReceived(url: string, route: string, n: number, ms = 30000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const inflight = Number(/^infinity_requests_in_flight (\d+)$/m.exec(text)?.[1] ?? 0) - 1;
    let answered = 0;
    for (const m of text.matchAll(/^infinity_requests_total\{([^}]*)\} (\d+)$/gm)) if (m[1]!.includes(`route="${route}"`)) answered += Number(m[2]);
    if (answered + inflight >= n) return;
    await Bun.sleep(2);
  }
  throw new Error(`the server did not receive ${n} requests on ${route}`);
}

describe("cli", () => {
  test("--help lists every option and exits 0; v2 is optional", async () => {
    for (const args of [["--help"], ["v2", "--help"]]) {
      const p = run(args);
      expect(await p.exited).toBe(0);
      const out = await new Response(p.stdout).text();
      for (const o of OPTIONS) expect(out).toContain(envName(o.name));
    }
  });

  test("bad options: one clear line, exit 2, no stack trace", async () => {
    for (const args of [["--model-id", "x/y", "--port", "abc"], ["--bogus"], []]) {
      const p = run(args, { INFINITY_MODEL_ID: "" });
      expect(await p.exited).toBe(2);
      const err = await new Response(p.stderr).text();
      expect(err.trim().split("\n")).toHaveLength(1);
      expect(err).toStartWith("infinity: ");
      expect(err).not.toContain("    at ");
    }
  });

  test("a model folder that does not exist fails startup with its name, exit 1", async () => {
    const p = run(["--model-id", "/nonexistent/model", "--port", String(freePort()), "--host", "127.0.0.1"]);
    expect(await p.exited).toBe(1);
    expect(await new Response(p.stderr).text()).toContain("/nonexistent/model");
  });

  test("--load on-demand: a missing folder, or one without a model, fails startup too (exit 1, named), not the first request", async () => {
    const empty = mkdtempSync(join(tmpdir(), "infinity-no-model-"));
    for (const bad of ["/nonexistent/on-demand-model", empty]) {
      const port = freePort();
      const p = run(["--model-id", fixture("bert-mean-norm"), "--model-id", bad, "--load", "startup", "--load", "on-demand", "--port", String(port), "--host", "127.0.0.1", "--no-model-warmup"]);
      expect(await p.exited).toBe(1);
      const err = await new Response(p.stderr).text();
      expect(err).toContain(bad);
      expect(err).toContain("failed to load");
    }
  });

  test("--preload-only resolves every model and exits 0 without serving; a bad one exits 1", async () => {
    const ok = run(["--model-id", fixture("bert-mean-norm"), "--model-id", fixture("bert-rerank"), "--preload-only", "--port", "1"]);
    expect(await ok.exited).toBe(0);
    expect(await new Response(ok.stderr).text()).toContain("preload done");
    // A model without an ONNX export: its graph is built into the cache dir, so a later start finds it there.
    const cache = mkdtempSync(join(tmpdir(), "infinity-preload-"));
    const built = run(["--model-id", fixture("distilbert-embed"), "--preload-only", "--cache-dir", cache]);
    expect(await built.exited).toBe(0);
    expect(await new Response(built.stderr).text()).toContain("graph built from config.json and safetensors");
    expect(readdirSync(join(cache, "infinity-graphs")).length).toBe(1);
    const bad = run(["--model-id", fixture("bert-mean-norm"), "--model-id", "/nonexistent/model", "--preload-only"]);
    expect(await bad.exited).toBe(1);
    expect(await new Response(bad.stderr).text()).toContain("/nonexistent/model");
  });

  test("--log-format json writes one JSON object per line, with a debug line per request", async () => {
    const port = freePort();
    const p = run(["--model-id", fixture("bert-mean-norm"), "--port", String(port), "--host", "127.0.0.1", "--log-format", "json", "--log-level", "debug", "--no-model-warmup"]);
    try {
      await waitHealthy(`http://127.0.0.1:${port}`);
      await fetch(`http://127.0.0.1:${port}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "x" }) });
      p.kill("SIGTERM");
      expect(await p.exited).toBe(0);
      const lines = (await new Response(p.stderr).text()).trim().split("\n").filter((l) => l.startsWith("{"));
      const records = lines.map((l) => JSON.parse(l) as { level: string; msg: string; path?: string; status?: number });
      expect(records.length).toBeGreaterThan(3);
      expect(records.some((r) => r.msg === "model ready")).toBe(true);
      expect(records.some((r) => r.level === "debug" && r.msg === "request" && r.path === "/embeddings" && r.status === 200)).toBe(true);
    } finally {
      p.kill("SIGKILL");
    }
  });

  test("config file + env + flags, API key file, then SIGTERM finishes in-flight work and exits 0", async () => {
    const dir = mkdtempSync(join(tmpdir(), "infinity-cli-"));
    const port = freePort();
    writeFileSync(join(dir, "keys.txt"), "# team keys\nsecret-1\n\nsecret-2\n");
    writeFileSync(
      join(dir, "models.toml"),
      `host = "127.0.0.1"\nport = 1\nlog-level = "warn"\napi-key-file = "${join(dir, "keys.txt")}"\n[[models]]\nmodel-id = "${fixture("bert-mean-norm")}"\nserved-model-name = "from-file"\nbatch-size = 4\n`,
    );
    // The environment overrides the file's port; the flag overrides the environment's log level.
    const p = run(["v2", "--config", join(dir, "models.toml"), "--log-level", "info", "--tokenizer-workers", "1"], { INFINITY_PORT: String(port), INFINITY_LOG_LEVEL: "error" });
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitHealthy(url);
      const headers = { "content-type": "application/json", authorization: "Bearer secret-2" };
      const models = (await (await fetch(`${url}/models`, { headers })).json()) as { data: Array<{ id: string; batch_size: number }> };
      expect(models.data.map((m) => [m.id, m.batch_size])).toEqual([["from-file", 4]]);
      expect((await fetch(`${url}/models`)).status).toBe(401);
      const inflight = Array.from({ length: 30 }, (_, i) =>
        fetch(`${url}/embeddings`, { method: "POST", headers, body: JSON.stringify({ input: [`text ${i}`, `more text ${i}`] }) }),
      );
      // SIGTERM only once the server has received all 30: a request arriving after it correctly gets 503.
      await waitReceived(url, "/embeddings", inflight.length);
      p.kill("SIGTERM");
      const statuses = await Promise.all(inflight.map((r) => r.then((x) => x.status).catch(() => 0)));
      expect(statuses.every((s) => s === 200)).toBe(true);
      expect(await p.exited).toBe(0);
      const err = await new Response(p.stderr).text();
      expect(err).toContain("shutting down");
      expect(err).toContain("stopped");
    } finally {
      p.kill("SIGKILL");
    }
  });
});

describe("documentation stays true", () => {
  // The flag reference (flag, environment variable, default, help) lives in docs/operations.md, generated from
  // OPTIONS by build/flags-doc.ts and checked by test/docs.test.ts.

  test("models.example.toml parses, names every file option, and yields its two models", () => {
    const text = readFileSync(join(ROOT, "models.example.toml"), "utf8");
    for (const o of OPTIONS.filter((o) => !o.cliOnly)) expect(text).toMatch(new RegExp(`^#? ?${o.name} = `, "m"));
    const config = buildConfig({ flags: new Map(), env: {}, file: Bun.TOML.parse(text) as Record<string, unknown>, cpuCount: 2 });
    expect(config.models.map((m) => m.servedModelName)).toEqual(["BAAI/bge-small-en-v1.5", "reranker"]);
    expect(config.port).toBe(7997);
  });
});
