// scratchFolder: rewritten graphs go under the system's temporary folder, which in the container image is a path on
// the /data volume (TMPDIR=/data/tmp) that does not exist until something creates it.
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { scratchFolder } from "../../src/model/scratch";

const saved = process.env.TMPDIR;
const made: string[] = [];
afterEach(() => {
  if (saved === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = saved;
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("scratchFolder", () => {
  test("creates a missing TMPDIR (a fresh volume) and a private folder in it; remove() deletes it", () => {
    const volume = mkdtempSync(join(tmpdir(), "infinity-scratch-test-"));
    made.push(volume);
    process.env.TMPDIR = join(volume, "tmp", "nested");
    const folder = scratchFolder("infinity-logits-");
    expect(folder.dir.startsWith(join(volume, "tmp", "nested", "infinity-logits-"))).toBe(true);
    writeFileSync(join(folder.dir, "model.onnx"), "x");
    folder.remove();
    expect(existsSync(folder.dir)).toBe(false);
    expect(existsSync(join(volume, "tmp", "nested"))).toBe(true);
  });

  test("two folders with one prefix are distinct", () => {
    const a = scratchFolder("infinity-towers-"), b = scratchFolder("infinity-towers-");
    made.push(a.dir, b.dir);
    expect(a.dir).not.toBe(b.dir);
    expect(existsSync(a.dir) && existsSync(b.dir)).toBe(true);
  });
});
