// build/runtime/extract.ts: the one-time, atomic extraction of the native libraries the compiled binary carries.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { extractTo, nativeDirCandidates, prepareNative, type NativeBundle } from "../../../build/runtime/extract";

const work = mkdtempSync(join(tmpdir(), "infinity-extract-test-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function bundle(hash = "ort-test-0123"): NativeBundle {
  const src = join(work, "src-" + hash);
  mkdirSync(src, { recursive: true });
  writeFileSync(join(src, "addon.node"), "addon bytes");
  writeFileSync(join(src, "libort.so.1"), "library bytes, longer");
  return {
    hash,
    addon: "addon.node",
    files: [
      { name: "addon.node", source: join(src, "addon.node"), size: 11 },
      { name: "libort.so.1", source: join(src, "libort.so.1"), size: 21 },
    ],
  };
}

describe("extractTo", () => {
  test("writes every file into <parent>/<hash>, then reuses them untouched", () => {
    const parent = join(work, "a");
    const b = bundle();
    const first = extractTo(parent, b);
    expect(first).toEqual({ dir: join(parent, b.hash), extracted: true });
    expect(readFileSync(join(first.dir, "libort.so.1"), "utf8")).toBe("library bytes, longer");
    expect(statSync(join(first.dir, "addon.node")).mode & 0o777).toBe(0o755);
    const before = statSync(join(first.dir, "libort.so.1"));
    const second = extractTo(parent, b);
    expect(second.extracted).toBe(false);
    const after = statSync(join(first.dir, "libort.so.1"));
    expect([after.ino, after.mtimeMs]).toEqual([before.ino, before.mtimeMs]);
    // No temporary folders are left behind.
    expect(readdirSync(parent)).toEqual([b.hash]);
  });

  test("replaces an incomplete folder (a file of the wrong size)", () => {
    const parent = join(work, "b");
    const b = bundle();
    mkdirSync(join(parent, b.hash), { recursive: true });
    writeFileSync(join(parent, b.hash, "addon.node"), "truncated");
    expect(extractTo(parent, b).extracted).toBe(true);
    expect(readFileSync(join(parent, b.hash, "addon.node"), "utf8")).toBe("addon bytes");
  });

  test("a new hash gets a new folder next to the old one", () => {
    const parent = join(work, "c");
    extractTo(parent, bundle("ort-test-old"));
    extractTo(parent, bundle("ort-test-new"));
    expect(readdirSync(parent).sort()).toEqual(["ort-test-new", "ort-test-old"]);
  });

  test("concurrent extractions into one folder all succeed and leave one complete copy", async () => {
    const parent = join(work, "d");
    const script = `
      import { extractTo } from ${JSON.stringify(join(import.meta.dir, "../../../build/runtime/extract.ts"))};
      const b = JSON.parse(process.argv[2]);
      console.log(JSON.stringify(extractTo(${JSON.stringify(parent)}, b)));`;
    const file = join(work, "race.ts");
    writeFileSync(file, script);
    const b = JSON.stringify(bundle());
    const procs = Array.from({ length: 4 }, () => Bun.spawn([process.execPath, file, b], { stdout: "pipe", stderr: "pipe" }));
    const codes = await Promise.all(procs.map((p) => p.exited));
    expect(codes).toEqual([0, 0, 0, 0]);
    expect(readdirSync(parent)).toEqual(["ort-test-0123"]);
    expect(readFileSync(join(parent, "ort-test-0123", "libort.so.1"), "utf8")).toBe("library bytes, longer");
  });
});

describe("prepareNative", () => {
  test("INFINITY_NATIVE_DIR is the only candidate when set", () => {
    expect(nativeDirCandidates({ INFINITY_NATIVE_DIR: "/x", XDG_CACHE_HOME: "/c" })).toEqual({ dirs: ["/x"], explicit: true });
    const { dirs, explicit } = nativeDirCandidates({ XDG_CACHE_HOME: "/c", HOME: "/h" });
    expect(explicit).toBe(false);
    expect(dirs.slice(0, 2)).toEqual(["/c/infinity/native", "/h/.cache/infinity/native"]);
    expect(dirs.length).toBe(3); // then the system temporary folder
  });

  test.skipIf(process.getuid?.() === 0)("falls back past an unwritable cache folder", () => {
    const readOnly = join(work, "ro");
    mkdirSync(readOnly);
    chmodSync(readOnly, 0o555);
    const home = join(work, "home");
    const r = prepareNative(bundle(), { XDG_CACHE_HOME: readOnly, HOME: home });
    expect(r.dir.startsWith(join(home, ".cache", "infinity", "native"))).toBe(true);
  });

  test("names the folder and the variable when nothing is writable", () => {
    const file = join(work, "not-a-dir");
    writeFileSync(file, "");
    expect(() => prepareNative(bundle(), { INFINITY_NATIVE_DIR: join(file, "sub") })).toThrow(/cannot extract the onnxruntime native libraries: .*not-a-dir/);
    expect(existsSync(join(file, "sub"))).toBe(false);
  });
});
