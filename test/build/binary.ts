// Shared by the build tests: the host binary, built only when something it is made of changed since the last build.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dir, "..", "..");
export const BINARY = join(ROOT, "dist", "infinity");

function newestMtime(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = 0;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

/** Builds dist/infinity unless it is newer than every file under src/ and build/ and the lockfile. */
export function ensureBinary(): string {
  const inputs = [join(ROOT, "src"), join(ROOT, "build"), join(ROOT, "package-lock.json")];
  const newestInput = Math.max(...inputs.map(newestMtime));
  if (existsSync(BINARY) && statSync(BINARY).mtimeMs > newestInput) return BINARY;
  const proc = Bun.spawnSync([process.execPath, join(ROOT, "build", "compile.ts")], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (proc.exitCode !== 0) throw new Error(`bun build/compile.ts failed:\n${proc.stdout.toString()}${proc.stderr.toString()}`);
  return BINARY;
}
