// Image and audio models in the compiled binary: the media worker is an entrypoint, sharp's addon and libvips are
// embedded and extracted (libvips where the addon's RUNPATH looks), and transformers.js's audio feature extractor
// is bundled. The binary, alone in an empty folder, must embed like the references (and so like `bun src/cli.ts`).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { sharpFiles } from "../../build/plugin";
import { ensureBinary, ROOT } from "./binary";
import { cosine } from "../helpers";

const FIXTURES = join(ROOT, "test", "fixtures");
const clipRef = (await Bun.file(join(FIXTURES, "reference", "clip.json")).json()) as {
  image_cases: { file: string; format: string; image_embeds: number[] }[];
};
const clapRef = (await Bun.file(join(FIXTURES, "reference", "clap.json")).json()) as {
  audio_cases: { file: string; audio_embeds: number[] }[];
};

let work = "";
let nativeDir = "";
let proc: Subprocess<"ignore", "pipe", "pipe"> | null = null;
let base = "";

beforeAll(async () => {
  const built = ensureBinary();
  work = mkdtempSync(join(tmpdir(), "infinity-media-binary-test-"));
  const runDir = join(work, "run");
  nativeDir = join(work, "native");
  mkdirSync(runDir);
  const binary = join(runDir, "infinity");
  copyFileSync(built, binary);
  Bun.spawnSync(["chmod", "755", binary]);
  for (let attempt = 0; attempt < 5 && !base; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 30_000);
    const args = ["--model-id", join(FIXTURES, "models", "clip"), "--model-id", join(FIXTURES, "models", "clap")];
    const p = Bun.spawn([binary, "v2", ...args, "--host", "127.0.0.1", "--port", String(port)], {
      cwd: runDir,
      env: { PATH: "/usr/bin:/bin", HOME: work, INFINITY_NATIVE_DIR: nativeDir },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    proc = p;
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && p.exitCode === null) {
      try {
        if ((await fetch(`${url}/health`)).status === 200) {
          base = url;
          break;
        }
      } catch {}
      await Bun.sleep(25);
    }
    if (base) break;
    const err = p.exitCode !== null ? await new Response(p.stderr).text() : "";
    p.kill("SIGKILL");
    await p.exited;
    proc = null;
    if (!/address|in use|EADDRINUSE/i.test(err)) throw new Error(`binary did not become healthy:\n${err}`);
  }
  if (!base) throw new Error("no free port after 5 tries");
}, 120_000);

afterAll(async () => {
  if (proc) {
    proc.kill("SIGKILL");
    await proc.exited;
  }
  if (work) rmSync(work, { recursive: true, force: true });
});

async function dataUri(file: string, type: string): Promise<string> {
  const bytes = await Bun.file(join(FIXTURES, file)).arrayBuffer();
  return `data:${type};base64,${Buffer.from(bytes).toString("base64")}`;
}

async function embed(body: unknown): Promise<{ status: number; json: { data?: { index: number; embedding: number[] }[] } }> {
  const r = await fetch(`${base}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: r.status, json: (await r.json()) as { data?: { index: number; embedding: number[] }[] } };
}

describe("compiled binary: media models", () => {
  test("clip image (data: URI PNG): cosine >= 0.999 with the reference image_embeds", async () => {
    const c = clipRef.image_cases.find((x) => x.file === "media/landscape.png")!;
    const { status, json } = await embed({ model: "clip", modality: "image", input: await dataUri(c.file, "image/png") });
    expect(status).toBe(200);
    expect(cosine(json.data![0]!.embedding, c.image_embeds)).toBeGreaterThanOrEqual(0.999);
  }, 30_000);

  test("clap audio (data: URI WAV): cosine >= 0.999 with the reference audio_embeds", async () => {
    const c = clapRef.audio_cases[0]!;
    const { status, json } = await embed({ model: "clap", modality: "audio", input: await dataUri(c.file, "audio/wav") });
    expect(status).toBe(200);
    expect(cosine(json.data![0]!.embedding, c.audio_embeds)).toBeGreaterThanOrEqual(0.999);
  }, 30_000);

  test("sharp's addon and libvips are extracted where the addon's RUNPATH ($ORIGIN/../../...) finds libvips", () => {
    const sharpDir = readdirSync(nativeDir).find((d) => d.startsWith("sharp-linux-x64-"));
    expect(sharpDir).toBeDefined();
    const found = sharpFiles({ os: "linux", arch: "x64" });
    if ("missing" in found) throw new Error(`host sharp packages missing: ${found.missing}`);
    for (const f of found.files) expect(existsSync(join(nativeDir, sharpDir!, f.name))).toBe(true);
    const addon = found.files.find((f) => f.name.endsWith(".node"))!;
    const readelf = Bun.spawnSync(["readelf", "-d", addon.path]).stdout.toString();
    expect(readelf).toContain("$ORIGIN/../../sharp-libvips-linux-x64/lib");
    expect(found.files.some((f) => f.name.startsWith("sharp-libvips-linux-x64/lib/libvips-cpp."))).toBe(true);
  });
});

describe("build: targets without sharp's packages", () => {
  test("sharpFiles names the missing @img package instead of failing the build", () => {
    for (const t of [{ os: "linux", arch: "arm64" }, { os: "darwin", arch: "arm64" }] as const) {
      const found = sharpFiles(t);
      if (existsSync(join(ROOT, "node_modules", "@img", `sharp-${t.os}-${t.arch}`))) continue;
      expect(found).toEqual({ missing: `@img/sharp-${t.os}-${t.arch}` });
    }
  });
});
