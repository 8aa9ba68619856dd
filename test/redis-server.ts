// A real redis-server for tests: loopback only, a free port, no persistence; stopped by the test that started it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../bench/process";

export interface TestRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** Starts redis-server on a free port (or on `port`, to bring one back where a client expects it). */
export async function startRedis(port = freePort()): Promise<TestRedis> {
  const bin = Bun.which("redis-server");
  if (!bin) throw new Error("redis-server is not installed (Debian: apt-get install redis-server; .ci/run installs it)");
  const dir = mkdtempSync(join(tmpdir(), "infinity-redis-"));
  const proc = Bun.spawn([bin, "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--logfile", ""], {
    stdout: "ignore",
    stderr: "pipe",
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      const socket = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } });
      socket.end();
      break;
    } catch {
      if (proc.exitCode !== null || Date.now() > deadline) {
        proc.kill();
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`redis-server did not start on port ${port}: ${await new Response(proc.stderr).text()}`);
      }
      await Bun.sleep(50);
    }
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      proc.kill();
      await proc.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
