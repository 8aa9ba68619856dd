// The compiled binary (build/compile.ts): copied alone into an empty folder, run from there with no node_modules,
// no Bun on PATH, and a hostile .env and bunfig.toml beside it; it must serve like `bun src/cli.ts`, and a second
// start must reuse the native libraries the first one extracted.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { ensureBinary, ROOT } from "./binary";
import { cosine } from "../helpers";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";

const MODEL = join(ROOT, "test", "fixtures", "models", "bert-mean-norm");
const REFERENCE = (await Bun.file(join(ROOT, "test", "fixtures", "reference", "bert-mean-norm.json")).json()) as {
  cases: { text: string; embedding: number[] }[];
};

let work = "";
let runDir = "";
let nativeDir = "";
let binary = "";
const running = new Set<Subprocess>();

beforeAll(() => {
  const built = ensureBinary();
  work = mkdtempSync(join(tmpdir(), "infinity-binary-test-"));
  runDir = join(work, "run");
  nativeDir = join(work, "native");
  Bun.spawnSync(["mkdir", "-p", runDir]);
  binary = join(runDir, "infinity");
  copyFileSync(built, binary);
  Bun.spawnSync(["chmod", "755", binary]);
  // Loaded, these would break the server: a preload that does not exist, a port nothing listens on, and an API
  // key that would turn every unauthenticated request into a 401.
  writeFileSync(join(runDir, "bunfig.toml"), 'preload = ["./missing-preload.ts"]\n[serve]\nport = 1\n');
  writeFileSync(join(runDir, ".env"), "INFINITY_PORT=1\nINFINITY_API_KEY=from-dotenv\nINFINITY_URL_PREFIX=/dotenv\n");
}, 120_000);

afterAll(async () => {
  for (const p of running) p.kill("SIGKILL");
  await Promise.all([...running].map((p) => p.exited));
  if (work) rmSync(work, { recursive: true, force: true });
});

function randomPort(): number {
  return 20_000 + Math.floor(Math.random() * 30_000);
}

/** Starts the copied binary in its folder and waits for /health 200; retries on a busy port. */
async function start(args: string[]): Promise<{ proc: Subprocess<"ignore", "pipe", "pipe">; base: string }> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = randomPort();
    const proc = Bun.spawn([binary, ...args, "--model-id", MODEL, "--host", "127.0.0.1", "--port", String(port)], {
      cwd: runDir,
      // Nothing inherited: no PATH to a bun, no INFINITY_* from the test runner's environment.
      env: { PATH: "/usr/bin:/bin", HOME: work, INFINITY_NATIVE_DIR: nativeDir },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    running.add(proc);
    const base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && proc.exitCode === null) {
      try {
        if ((await fetch(`${base}/health`)).status === 200) return { proc, base };
      } catch {}
      await Bun.sleep(25);
    }
    const err = proc.exitCode !== null ? await new Response(proc.stderr).text() : "";
    proc.kill("SIGKILL");
    await proc.exited;
    running.delete(proc);
    if (!/address|in use|EADDRINUSE/i.test(err)) throw new Error(`binary did not become healthy:\n${err}`);
  }
  throw new Error("no free port after 5 tries");
}

async function stop(proc: Subprocess): Promise<number> {
  proc.kill("SIGTERM");
  const code = await proc.exited;
  running.delete(proc);
  return code;
}

function snapshot(dir: string): Record<string, [number, number]> {
  const out: Record<string, [number, number]> = {};
  for (const sub of readdirSync(dir)) {
    for (const f of readdirSync(join(dir, sub))) {
      const st = statSync(join(dir, sub, f));
      out[`${sub}/${f}`] = [st.ino, st.mtimeMs];
    }
  }
  return out;
}

describe("compiled binary", () => {
  let firstRun: Record<string, [number, number]> = {};

  test("`infinity v2` serves /health and /embeddings from an empty folder, ignoring .env and bunfig.toml", async () => {
    expect(readdirSync(runDir).sort()).toEqual([".env", "bunfig.toml", "infinity"]);
    // The repository's export (--graph export): the second run builds the same model's graph instead.
    const { proc, base } = await start(["v2", "--graph", "export"]);
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);
    expect(((await health.json()) as { status: string }).status).toBe("ready");

    const cases = REFERENCE.cases.slice(0, 3);
    // No Authorization header and no /dotenv prefix: both would fail had the .env been loaded.
    const r = await fetch(`${base}/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "bert-mean-norm", input: cases.map((c) => c.text) }),
    });
    expect(r.status).toBe(200);
    const body = (await r.json()) as { data: { index: number; embedding: number[] }[] };
    expect(body.data.length).toBe(cases.length);
    for (const d of body.data) expect(cosine(d.embedding, cases[d.index]!.embedding)).toBeGreaterThan(0.9999);
    // Over 4096 characters a request is tokenized in the tokenizer workers, which load the Rust addon themselves.
    const long = await fetch(`${base}/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "bert-mean-norm", input: [cases[0]!.text, "word ".repeat(2000)] }),
    });
    expect(long.status).toBe(200);
    const longBody = (await long.json()) as { data: { index: number; embedding: number[] }[] };
    expect(cosine(longBody.data[0]!.embedding, cases[0]!.embedding)).toBeGreaterThan(0.9999);

    expect(await stop(proc)).toBe(0);
    firstRun = snapshot(nativeDir);
    // The Rust tokenizers' addon: only the target's, extracted beside onnxruntime's.
    const tokenizers = Object.keys(firstRun).filter((k) => k.startsWith("tokenizers-linux-x64-")).map((k) => k.split("/")[1]);
    expect(tokenizers).toEqual(["tokenizers.linux-x64-gnu.node"]);
    const names = Object.keys(firstRun).filter((k) => k.startsWith("ort-")).map((k) => k.split("/")[1]).sort();
    expect(names).toEqual(["libonnxruntime.so.1", "onnxruntime_binding.node"]);
    // sharp's files (media worker) are extracted with them, so one start prepares a read-only deployment.
    const sharp = Object.keys(firstRun).filter((k) => k.startsWith("sharp-linux-x64-")).map((k) => k.split("/")[1]).sort();
    expect(sharp).toEqual(["sharp-libvips-linux-x64", "sharp-linux-x64"]);
  }, 60_000);

  test("`infinity --model-id` (no v2) starts again on the libraries the first run extracted; builds a graph from safetensors", async () => {
    expect(Object.keys(firstRun).length).toBeGreaterThan(0);
    // A second model without an ONNX export: its graph is built (onnx-proto inside the binary) under $HOME's cache.
    // And gRPC (tei.v1 from the embedded descriptor) on a second port, and traces to a receiver on loopback.
    const grpcPort = randomPort();
    let exported = 0;
    const receiver = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: async (req) => (exported += (await req.arrayBuffer()).byteLength, new Response(new Uint8Array())) });
    const { proc, base } = await start([
      "--model-id", join(ROOT, "test", "fixtures", "models", "distilbert-embed"), "--grpc-port", String(grpcPort), "--otlp-endpoint", `http://127.0.0.1:${receiver.port}`,
    ]);
    const tei = (grpc.loadPackageDefinition(loadSync(join(ROOT, "src", "server", "grpc", "tei.proto"), { keepCase: true, defaults: true, enums: String })) as any).tei.v1;
    const embedClient = new tei.Embed(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set("model", "bert-mean-norm");
    const viaGrpc = await new Promise<any>((resolve, reject) => embedClient.Embed({ inputs: REFERENCE.cases[0]!.text, normalize: true }, md, (e: unknown, r: unknown) => (e ? reject(e) : resolve(r))));
    embedClient.close();
    expect(cosine(viaGrpc.embeddings, REFERENCE.cases[0]!.embedding)).toBeGreaterThan(0.9999);
    for (let i = 0; i < 40 && exported === 0; i++) await Bun.sleep(100);
    receiver.stop(true);
    expect(exported).toBeGreaterThan(0);
    const distil = (await Bun.file(join(ROOT, "test", "fixtures", "reference", "distilbert-embed.json")).json()) as typeof REFERENCE;
    const built = await fetch(`${base}/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "distilbert-embed", input: distil.cases.map((c) => c.text) }),
    });
    expect(built.status).toBe(200);
    for (const d of ((await built.json()) as { data: { index: number; embedding: number[] }[] }).data) {
      expect(cosine(d.embedding, distil.cases[d.index]!.embedding)).toBeGreaterThan(0.9999);
    }
    // Two built graphs: distilbert-embed's (no export) and bert-mean-norm's (a BERT: built in preference to its export).
    expect(readdirSync(join(work, ".cache", "huggingface", "hub", "infinity-graphs")).length).toBe(2);
    const r = await fetch(`${base}/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "bert-mean-norm", input: "hello" }),
    });
    expect(r.status).toBe(200);
    // The playground page at / and its files ship inside the binary, identical to the sources.
    const page = await fetch(`${base}/`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<script src="playground/playground.js"></script>');
    for (const file of ["playground.js", "playground.css"]) {
      const asset = await fetch(`${base}/playground/${file}`);
      expect(asset.status).toBe(200);
      expect(await asset.text()).toBe(await Bun.file(join(ROOT, "src", "server", "playground", file)).text());
    }
    expect(await stop(proc)).toBe(0);
    // Same inodes and mtimes: nothing was written again.
    expect(snapshot(nativeDir)).toEqual(firstRun);
  }, 60_000);

  test("--help and bad flags match `bun src/cli.ts`", () => {
    const env = { PATH: "/usr/bin:/bin", HOME: work, INFINITY_NATIVE_DIR: nativeDir };
    const compiled = Bun.spawnSync([binary, "--help"], { cwd: runDir, env });
    const source = Bun.spawnSync([process.execPath, join(ROOT, "src", "cli.ts"), "--help"], { cwd: ROOT, env: { ...env, PATH: process.env.PATH! } });
    expect(compiled.exitCode).toBe(0);
    expect(compiled.stdout.toString()).toBe(source.stdout.toString());
    const bad = Bun.spawnSync([binary, "v2", "--no-such-flag"], { cwd: runDir, env });
    const badSource = Bun.spawnSync([process.execPath, join(ROOT, "src", "cli.ts"), "v2", "--no-such-flag"], { cwd: ROOT, env: { ...env, PATH: process.env.PATH! } });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr.toString()).toBe(badSource.stderr.toString());
  });
});
