import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

// npm 11 warns about any project .npmrc key it does not know ("Unknown project config ... will stop working in the
// next major version"), so the CUDA download of onnxruntime-node is skipped through npm's own install-script policy.
describe("install: onnxruntime-node's CUDA download is skipped without custom npm config", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { allowScripts?: Record<string, boolean> };

  test("allowScripts denies onnxruntime-node's install script and approves Bun's (its binary comes from it)", () => {
    expect(pkg.allowScripts?.["onnxruntime-node"]).toBe(false);
    expect(pkg.allowScripts?.["bun"]).toBe(true);
  });

  test("no .npmrc key that npm does not know", () => {
    const npmrc = join(ROOT, ".npmrc");
    const keys = existsSync(npmrc)
      ? readFileSync(npmrc, "utf8").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#")).map((l) => l.split("=")[0]!.trim())
      : [];
    expect(keys.filter((k) => k.startsWith("onnxruntime"))).toEqual([]);
    // Only keys of npm's own config (npm 11 warns about any other); loglevel quiets the dev clients' EBADENGINE.
    expect(keys.every((k) => ["loglevel"].includes(k))).toBe(true);
  });

  test("the CPU build is in place after npm ci without any install script of onnxruntime-node", () => {
    const bin = join(ROOT, "node_modules", "onnxruntime-node", "bin", "napi-v6", process.platform, process.arch);
    expect(existsSync(join(bin, "onnxruntime_binding.node"))).toBe(true);
  });

  test("the Dockerfile's CUDA build runs onnxruntime-node's install script itself (npm 11+ would skip it)", () => {
    const docker = readFileSync(join(ROOT, "Dockerfile"), "utf8");
    expect(docker).not.toMatch(/\.npmrc/);
    expect(docker).toMatch(/node node_modules\/onnxruntime-node\/script\/install\.js/);
  });
});
