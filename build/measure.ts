// Startup timing of the compiled binary: time from spawn to the first `/health` 200, once with an empty native
// folder (includes extracting onnxruntime) and then warm, plus the binary's size.
//   bun build/measure.ts [binary=dist/infinity] [model folder=test/fixtures/models/bert-mean-norm] [warm runs=3]
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");
const binary = resolve(process.argv[2] ?? join(ROOT, "dist", "infinity"));
const model = resolve(process.argv[3] ?? join(ROOT, "test", "fixtures", "models", "bert-mean-norm"));
const warmRuns = Number(process.argv[4] ?? 3);

async function timeToHealthy(cmd: string[], nativeDir: string, port: number): Promise<number> {
  const started = performance.now();
  const proc = Bun.spawn([...cmd, "--model-id", model, "--host", "127.0.0.1", "--port", String(port)], {
    env: { PATH: "/usr/bin:/bin", HOME: nativeDir, INFINITY_NATIVE_DIR: nativeDir },
    cwd: nativeDir,
    stdout: "ignore",
    stderr: "ignore",
  });
  try {
    for (;;) {
      if (performance.now() - started > 60_000) throw new Error("not healthy within 60 s");
      if (proc.exitCode !== null) throw new Error(`exited with ${proc.exitCode}`);
      try {
        const r = await fetch(`http://127.0.0.1:${port}/health`);
        if (r.status === 200) return performance.now() - started;
      } catch {}
      await Bun.sleep(10);
    }
  } finally {
    proc.kill("SIGTERM");
    await proc.exited;
  }
}

const dir = mkdtempSync(join(tmpdir(), "infinity-measure-"));
const port = 20000 + Math.floor(Math.random() * 20000);
try {
  console.log(`binary ${binary}: ${(statSync(binary).size / 2 ** 20).toFixed(1)} MiB`);
  const cold = await timeToHealthy([binary, "v2"], dir, port);
  console.log(`first start (extracts native libraries): ${cold.toFixed(0)} ms`);
  for (let i = 0; i < warmRuns; i++) {
    console.log(`warm start ${i + 1}: ${(await timeToHealthy([binary, "v2"], dir, port)).toFixed(0)} ms`);
  }
  const bun = process.execPath;
  for (let i = 0; i < warmRuns; i++) {
    console.log(`bun src/cli.ts ${i + 1}: ${(await timeToHealthy([bun, join(ROOT, "src", "cli.ts"), "v2"], dir, port)).toFixed(0)} ms`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
