// The runtime image is gcr.io/distroless/cc-debian12: glibc 2.36, libstdc++/libgcc_s of GCC 12, nothing else.
// Every shared library the binary, the extracted addon and libonnxruntime ask for (directly, and per ldd
// transitively) must be one of those, at a symbol version Debian 12 provides.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { prepareNative } from "../../build/runtime/extract";
import { nativeFiles, nativeFolder, sharpFiles } from "../../build/plugin";
import { ensureBinary } from "./binary";

/** Libraries distroless/cc-debian12 ships (libc6, libgcc-s1, libstdc++6 and the dynamic loader). */
const DISTROLESS_CC = new Set([
  "linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
  "libgcc_s.so.1", "libstdc++.so.6",
  // libc6 ships it too; libvips (sharp) asks for it.
  "libresolv.so.2",
]);
/** Newest symbol versions of Debian 12: glibc 2.36, GCC 12 (GLIBCXX_3.4.30, CXXABI_1.3.13, GCC_12.0.0). */
const NEWEST: Record<string, number[]> = { GLIBC: [2, 36], GLIBCXX: [3, 4, 30], CXXABI: [1, 3, 13], GCC: [12, 0, 0] };
/** Libraries that travel inside the binary and are extracted next to the addon. */
const BUNDLED = /^(libonnxruntime(\.so\.1|_providers_[a-z0-9_]+\.so)|libvips-cpp\.so\.[0-9.]+)$/;

const linuxX64 = process.platform === "linux" && process.arch === "x64";
const haveTools = Boolean(Bun.which("readelf") && Bun.which("ldd"));

function run(cmd: string[]): string {
  const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`${cmd.join(" ")}: ${p.stderr.toString()}`);
  return p.stdout.toString();
}

function needed(file: string): string[] {
  return [...run(["readelf", "-d", "-W", file]).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]!);
}

/** Symbol versions the file requires from system libraries (.gnu.version_r; bundled libraries are skipped). */
function versionNeeds(file: string): string[] {
  const text = run(["readelf", "-V", "-W", file]);
  const start = text.indexOf("Version needs section");
  if (start < 0) return [];
  const out: string[] = [];
  let from = "";
  for (const line of text.slice(start).split("\n")) {
    const f = /File: (\S+)/.exec(line);
    if (f) from = f[1]!;
    const n = /Name: (\S+)/.exec(line);
    if (n && !BUNDLED.test(from)) out.push(n[1]!);
  }
  return out;
}

function tooNew(version: string): boolean {
  const [family, number] = version.split("_") as [string, string];
  const limit = NEWEST[family];
  if (!limit) return true;
  const parts = number.split(".").map(Number);
  for (let i = 0; i < Math.max(parts.length, limit.length); i++) {
    const a = parts[i] ?? 0, b = limit[i] ?? 0;
    if (a !== b) return a > b;
  }
  return false;
}

/** ldd: every resolved library's soname, and any that are missing. */
function lddLibraries(file: string): { names: string[]; missing: string[] } {
  const names: string[] = [];
  const missing: string[] = [];
  for (const line of run(["ldd", file]).split("\n")) {
    const m = /^\s*(\S+)(?: => (.*))?$/.exec(line);
    if (!m) continue;
    const name = m[1]!.split("/").pop()!.replace(/ \(.*$/, "");
    if (m[2]?.startsWith("not found")) missing.push(name);
    names.push(name);
  }
  return { names, missing };
}

describe.skipIf(!linuxX64 || !haveTools)("dependencies fit distroless/cc-debian12", () => {
  let work = "";
  let files: Record<string, string> = {};

  beforeAll(() => {
    const binary = ensureBinary();
    work = mkdtempSync(join(tmpdir(), "infinity-distroless-test-"));
    // The same bytes the binary embeds, extracted the way the binary does it.
    const target = { os: "linux", arch: "x64" } as const;
    const bundle = {
      hash: "ort-test",
      addon: "onnxruntime_binding.node",
      files: nativeFiles(target).map((name) => ({ name, source: join(nativeFolder(target), name), size: Bun.file(join(nativeFolder(target), name)).size })),
    };
    const { dir } = prepareNative(bundle, { INFINITY_NATIVE_DIR: work });
    files = { binary, addon: join(dir, "onnxruntime_binding.node"), libonnxruntime: join(dir, "libonnxruntime.so.1") };
    // sharp's addon and libvips (the media worker), in the layout the binary extracts them to.
    const sharp = sharpFiles(target);
    if ("missing" in sharp) throw new Error(`${sharp.missing} is not installed`);
    const sharpBundle = { hash: "sharp-test", addon: sharp.addon, files: sharp.files.map((f) => ({ name: f.name, source: f.path, size: Bun.file(f.path).size })) };
    const sharpDir = prepareNative(sharpBundle, { INFINITY_NATIVE_DIR: work }).dir;
    files["sharp addon"] = join(sharpDir, sharp.addon);
    files.libvips = join(sharpDir, sharp.files.find((f) => f.name !== sharp.addon)!.name);
  }, 120_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  for (const which of ["binary", "addon", "libonnxruntime", "sharp addon", "libvips"]) {
    test(`${which}: NEEDED entries are distroless libraries (or bundled next to the addon)`, () => {
      expect(needed(files[which]!)).toContain("libc.so.6");
      const extra = needed(files[which]!).filter((n) => !DISTROLESS_CC.has(n) && !BUNDLED.test(n));
      expect(extra).toEqual([]);
    });

    test(`${which}: required glibc / libstdc++ symbol versions exist in Debian 12`, () => {
      const needs = versionNeeds(files[which]!);
      expect(needs.some((v) => v.startsWith("GLIBC_"))).toBe(true);
      expect(needs.filter(tooNew)).toEqual([]);
    });

    test(`${which}: ldd resolves everything, to distroless libraries only`, () => {
      const { names, missing } = lddLibraries(files[which]!);
      expect(missing).toEqual([]);
      expect(names.filter((n) => !DISTROLESS_CC.has(n) && !BUNDLED.test(n))).toEqual([]);
    });
  }

  test("the addon finds libonnxruntime beside it (RUNPATH $ORIGIN)", () => {
    expect(run(["readelf", "-d", "-W", files.addon!])).toMatch(/\(RUNPATH\)\s+Library runpath: \[\$ORIGIN\/?\]/);
    expect(run(["ldd", files.addon!])).toContain(`libonnxruntime.so.1 => ${join(files.addon!, "..", "libonnxruntime.so.1")}`);
  });

  test("sharp's addon finds the extracted libvips (RPATH $ORIGIN/../../sharp-libvips-linux-x64/lib)", () => {
    const name = files.libvips!.split("/").pop()!;
    const m = new RegExp(`${name.replace(/\./g, "\\.")} => (\\S+)`).exec(run(["ldd", files["sharp addon"]!]));
    expect(m).not.toBeNull();
    expect(realpathSync(m![1]!)).toBe(realpathSync(files.libvips!));
  });
});
