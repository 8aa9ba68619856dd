// This server in its own process on a free loopback port, for benchmarks and for tests that need separate
// processes (replicas sharing a cache).
import type { Subprocess } from "bun";
import { join } from "node:path";
import { REPO_ROOT } from "./model";

/** A loopback port nothing listens on right now (bound, then released). */
export function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

/** Starts `bun src/cli.ts` with args and waits until /health answers 200 (or what `ready` accepts). */
export async function startServer(args: string[], ready = (status: number) => status === 200) {
  const port = freePort();
  const proc = Bun.spawn([process.execPath, join(REPO_ROOT, "src", "cli.ts"), "--host", "127.0.0.1", "--port", String(port), ...args], {
    cwd: REPO_ROOT,
    stdout: "ignore",
    stderr: "pipe",
    env: { ...process.env, HF_HUB_OFFLINE: "1" },
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    const status = await fetch(`${url}/health`).then((r) => r.status, () => 0);
    if (ready(status)) break;
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill();
      throw new Error(`server did not start: ${await new Response(proc.stderr).text()}`);
    }
    await Bun.sleep(100);
  }
  return {
    url,
    pid: proc.pid,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}

/** Reads newline-terminated lines from a child's stdout; `label` names the child when it ends early. */
export class Lines {
  private buffered = "";
  private readonly dec = new TextDecoder();
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;

  constructor(
    private readonly proc: Subprocess<"pipe", "pipe", "inherit">,
    private readonly label: string,
  ) {
    this.reader = proc.stdout.getReader();
  }

  async next(): Promise<string> {
    for (;;) {
      const nl = this.buffered.indexOf("\n");
      if (nl >= 0) {
        const l = this.buffered.slice(0, nl);
        this.buffered = this.buffered.slice(nl + 1);
        return l;
      }
      const { done, value } = await this.reader.read();
      if (done) throw new Error(`${this.label} ended (exit ${await this.proc.exited})`);
      this.buffered += this.dec.decode(value, { stream: true });
    }
  }
}
