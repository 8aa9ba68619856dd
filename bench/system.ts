// A benchmarked system in its own process: this server (src/cli.ts of this or another checkout) or the naive
// transformers.js server, started on a free loopback port, waited for until /health says ready, and stopped.
// Used by bench/run.ts, bench/memory.ts and bench/long-input-memory.ts.
import { join } from "node:path";
import type { Subprocess } from "bun";
import { REPO_ROOT } from "./model";
import { freePort } from "./process";

export type SystemName = "naive" | "server";

export interface Running {
  proc: Subprocess;
  url: string;
  stderr: string[];
}

function spawnLogged(cmd: string[]): Running {
  const stderr: string[] = [];
  const proc = Bun.spawn(cmd, { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env } });
  for (const s of [proc.stdout, proc.stderr]) {
    void (async () => {
      const dec = new TextDecoder();
      const reader = (s as ReadableStream<Uint8Array>).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        stderr.push(dec.decode(value));
        if (stderr.length > 200) stderr.shift();
      }
    })();
  }
  return { proc, url: "", stderr };
}

async function waitReady(r: Running, timeoutS: number): Promise<void> {
  const until = performance.now() + timeoutS * 1000;
  while (performance.now() < until) {
    if (r.proc.exitCode !== null) throw new Error(`process exited with ${r.proc.exitCode}:\n${r.stderr.join("")}`);
    try {
      const res = await fetch(`${r.url}/health`);
      if (res.ok && ((await res.json()) as { status?: string }).status === "ready") return;
    } catch { /* not listening yet */ }
    await Bun.sleep(250);
  }
  throw new Error(`not ready after ${timeoutS} s:\n${r.stderr.join("")}`);
}

export async function stop(r: Running): Promise<void> {
  r.proc.kill("SIGTERM");
  const done = await Promise.race([r.proc.exited.then(() => true), Bun.sleep(15000).then(() => false)]);
  if (!done) {
    r.proc.kill("SIGKILL");
    await r.proc.exited;
  }
}

export async function startSystem(name: SystemName, modelDir: string, threads: number, serverArgs: string[], serverRoot = REPO_ROOT): Promise<Running> {
  const port = freePort();
  const cmd =
    name === "naive"
      ? [process.execPath, join(REPO_ROOT, "bench", "naive-server.ts"), modelDir, String(port), String(threads)]
      : [process.execPath, join(serverRoot, "src", "cli.ts"), "v2", "--model-id", modelDir, "--host", "127.0.0.1", "--port", String(port),
         // A --num-threads among the server's flags (e.g. --instances 2 --num-threads 1) replaces the benchmark's.
         ...(serverArgs.some((a) => a === "--num-threads" || a.startsWith("--num-threads=")) ? [] : ["--num-threads", String(threads)]),
         "--log-level", "warn", ...serverArgs];
  const r = spawnLogged(cmd);
  r.url = `http://127.0.0.1:${port}`;
  await waitReady(r, 300);
  return r;
}
