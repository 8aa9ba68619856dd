// `bun run build`: compiles the server into one self-contained executable per target with `bun build --compile`.
//   bun build/compile.ts                  host target only -> dist/infinity
//   bun build/compile.ts --all-targets    also linux-arm64 and darwin-arm64 -> dist/infinity-<os>-<arch>
//   bun build/compile.ts --target=linux-arm64 [--target=...]   only the named targets
//   --outdir=<dir> (default dist)   --no-minify
// The binary holds the router, batcher and the tokenizer worker (a second entrypoint: `new Worker(new URL(
// "./worker.ts", import.meta.url))` resolves to it inside the binary), and onnxruntime's native addon and shared
// library as embedded files, extracted on first start (build/runtime/extract.ts). The inference worker
// (src/model/inference-worker.ts, one per model session, the only code that loads onnxruntime) is an entrypoint the
// same way. The media worker (image and audio
// preprocessing, a third entrypoint) gets sharp's addon and libvips the same way when node_modules has the
// target's @img/sharp-* packages; without them the binary is built anyway and its media models fail to load.
import { mkdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { nativePlugin, sharpFiles, type NativeTarget } from "./plugin";

const ROOT = resolve(import.meta.dir, "..");
/** Entrypoints: the CLI and every worker file the code starts with `new Worker(...)`. */
export const ENTRYPOINTS = [
  join(ROOT, "src", "cli.ts"),
  join(ROOT, "src", "tokenize", "worker.ts"),
  join(ROOT, "src", "media", "media-worker.ts"),
  join(ROOT, "src", "model", "inference-worker.ts"),
];

export interface Target extends NativeTarget {
  /** Bun's compile target, e.g. bun-linux-x64. */
  bun: `bun-${string}`;
}

const TARGETS: Record<string, Target> = {
  "linux-x64": { os: "linux", arch: "x64", bun: "bun-linux-x64" },
  "linux-arm64": { os: "linux", arch: "arm64", bun: "bun-linux-arm64" },
  "darwin-arm64": { os: "darwin", arch: "arm64", bun: "bun-darwin-arm64" },
};

export function hostTargetName(): string {
  return `${process.platform}-${process.arch}`;
}

export interface BuildResult {
  target: string;
  outfile: string | null;
  bytes: number;
  seconds: number;
  error?: string;
  /** Set when the binary was built without media support (sharp's native files missing for the target). */
  noMedia?: string;
}

/** Compiles one target. Never throws for a cross target: a failure is reported in the result. */
export async function compileTarget(name: string, outfile: string, minify = true): Promise<BuildResult> {
  const target = TARGETS[name];
  if (!target) throw new Error(`unknown target ${name}; known: ${Object.keys(TARGETS).join(", ")}`);
  const started = performance.now();
  try {
    const result = await Bun.build({
      entrypoints: ENTRYPOINTS,
      // Flat names: every module's import.meta.url becomes /$bunfs/root/<entry>, so pool.ts's
      // new URL("./worker.ts", import.meta.url) lands on the worker entry at /$bunfs/root/worker.ts.
      naming: { entry: "[name].[ext]" },
      // Identifiers stay: error names and stack traces in logs remain readable; whitespace/syntax is most of the gain.
      minify: minify ? { whitespace: true, syntax: true, identifiers: false } : false,
      sourcemap: "none",
      // Precompiled bytecode starts ~30-40 ms faster (measured with build/measure.ts); ESM keeps cli.ts's top-level await.
      bytecode: true,
      format: "esm",
      plugins: [nativePlugin(target)],
      compile: {
        target: target.bun as Bun.Build.CompileTarget,
        outfile,
        // The binary reads its configuration from flags and INFINITY_* only; a .env or bunfig.toml in the
        // working directory must not change it.
        autoloadDotenv: false,
        autoloadBunfig: false,
        autoloadTsconfig: false,
        autoloadPackageJson: false,
      },
      throw: false,
    });
    if (!result.success) {
      const text = result.logs.map((l) => String(l.message ?? l)).join("\n");
      return { target: name, outfile: null, bytes: 0, seconds: (performance.now() - started) / 1000, error: text || "build failed" };
    }
    const sharp = sharpFiles(target);
    const noMedia = "missing" in sharp ? sharp.missing : undefined;
    return { target: name, outfile, bytes: statSync(outfile).size, seconds: (performance.now() - started) / 1000, noMedia };
  } catch (e) {
    const err = e as AggregateError & { errors?: unknown[] };
    const detail = err.errors?.length ? err.errors.map((x) => String((x as Error).message ?? x)).join("\n") : err.message;
    return { target: name, outfile: null, bytes: 0, seconds: (performance.now() - started) / 1000, error: detail };
  }
}

function parseArgs(argv: string[]): { targets: string[]; outdir: string; minify: boolean; named: boolean } {
  let all = false;
  const named: string[] = [];
  let outdir = join(ROOT, "dist");
  let minify = true;
  for (const a of argv) {
    if (a === "--all-targets") all = true;
    else if (a.startsWith("--target=")) named.push(a.slice("--target=".length).replace(/^bun-/, ""));
    else if (a.startsWith("--outdir=")) outdir = resolve(a.slice("--outdir=".length));
    else if (a === "--no-minify") minify = false;
    else if (a === "--help" || a === "-h") {
      process.stdout.write("usage: bun build/compile.ts [--all-targets | --target=<os-arch>...] [--outdir=dist] [--no-minify]\n");
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  const host = hostTargetName();
  const targets = named.length ? named : all ? [host, ...Object.keys(TARGETS).filter((t) => t !== host)] : [host];
  return { targets, outdir, minify, named: named.length > 0 };
}

if (import.meta.main) {
  const { targets, outdir, minify, named } = parseArgs(process.argv.slice(2));
  mkdirSync(outdir, { recursive: true });
  const host = hostTargetName();
  let failed = false;
  for (const name of targets) {
    const outfile = join(outdir, name === host ? "infinity" : `infinity-${name}`);
    const r = await compileTarget(name, outfile, minify);
    if (r.outfile) {
      process.stdout.write(`built ${name}: ${r.outfile} (${(r.bytes / 2 ** 20).toFixed(1)} MiB, ${r.seconds.toFixed(1)} s)\n`);
      if (r.noMedia) {
        process.stdout.write(
          `  ${name} has no image/audio support: ${r.noMedia} is not in node_modules (install it, e.g. ` +
            `npm install --os=${(TARGETS[name] as Target).os} --cpu=${(TARGETS[name] as Target).arch} sharp, and rebuild); ` +
            `media models fail to load in this binary\n`,
        );
      }
    } else if (name === host) {
      process.stderr.write(`build of ${name} failed:\n${r.error}\n`);
      failed = true;
    } else {
      // Skipping is fine under --all-targets; a target asked for by name must be built.
      if (named) failed = true;
      // Cross targets need Bun to download that platform's runtime; offline this fails and is skipped.
      process.stderr.write(`skipped ${name}: cross-compiling failed (Bun must download the bun-${name} runtime; no network?):\n  ${r.error?.split("\n").join("\n  ")}\n`);
    }
  }
  process.exit(failed ? 1 : 0);
}
