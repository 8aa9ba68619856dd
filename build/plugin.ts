// Bun build plugin: embeds onnxruntime-node's native addon and shared library for one target, and makes
// onnxruntime-node load the addon from where build/runtime/native.ts extracts it at run time. Likewise for sharp
// (the media worker's image decoder): its addon and libvips from the @img/sharp-* packages, extracted by
// build/runtime/sharp.ts.
import type { BunPlugin } from "bun";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";

export interface NativeTarget {
  os: "linux" | "darwin";
  arch: "x64" | "arm64";
}

const ORT_ROOT = dirname(Bun.resolveSync("onnxruntime-node/package.json", import.meta.dir));
const LOADER = join(import.meta.dir, "runtime", "native.ts");
const ADDON = "onnxruntime_binding.node";
/** The exact require onnxruntime-node/dist/binding.js uses; the build fails if a new version changes it. */
const ADDON_REQUIRE = "require(`../bin/napi-v6/${process.platform}/${process.arch}/onnxruntime_binding.node`)";
const SHARP_LOADER = join(import.meta.dir, "runtime", "sharp.ts");
/** The first addon require in sharp/dist/sharp.{mjs,cjs}; the build fails if a new sharp version changes it. */
const SHARP_REQUIRE = "require(`../src/build/Release/sharp-${runtimePlatform}-${version}.node`)";
const TOKENIZERS_ROOT = dirname(Bun.resolveSync("tokenizers/package.json", import.meta.dir));
const TOKENIZERS_LOADER = join(import.meta.dir, "runtime", "tokenizers.ts");
/** transformers.js's node build requires onnxruntime-node at run time (not bundled); see the plugin below. */
const TRANSFORMERS_ORT_REQUIRE = 'requireFromHere("onnxruntime-node")';

/** The folder holding a target's prebuilt addon and libraries inside the onnxruntime-node package. */
export function nativeFolder(t: NativeTarget): string {
  return join(ORT_ROOT, "bin", "napi-v6", t.os, t.arch);
}

/**
 * Files the addon needs at run time. Linux: libonnxruntime.so.1 (the addon's NEEDED entry, found via RUNPATH
 * $ORIGIN) plus any execution-provider libraries present (ONNXRUNTIME_NODE_INSTALL=cuda12 puts
 * libonnxruntime_providers_*.so there). macOS: libonnxruntime.1.dylib (@rpath with @loader_path); the versioned
 * copy is identical and not referenced.
 */
export function nativeFiles(t: NativeTarget): string[] {
  const dir = nativeFolder(t);
  if (!existsSync(join(dir, ADDON))) throw new Error(`onnxruntime-node has no prebuilt addon for ${t.os}-${t.arch} (${dir})`);
  const names = readdirSync(dir);
  const libs =
    t.os === "darwin"
      ? names.filter((n) => n === "libonnxruntime.1.dylib")
      : names.filter((n) => n === "libonnxruntime.so.1" || /^libonnxruntime_providers_[a-z0-9_]+\.so$/.test(n));
  if (libs.length === 0) throw new Error(`no libonnxruntime found in ${dir}`);
  return [ADDON, ...libs.sort()];
}

/** Hash over names and contents: the extraction folder's name, so a new onnxruntime never reuses old files. */
export function nativeHash(t: NativeTarget, files: string[]): string {
  const h = createHash("sha256");
  for (const name of files) {
    h.update(name + "\0");
    h.update(readFileSync(join(nativeFolder(t), name)));
  }
  return `ort-${t.os}-${t.arch}-${h.digest("hex").slice(0, 16)}`;
}

/** Where node_modules/@img/<name> is, or null when that package is not installed. */
function imgPackage(name: string): string | null {
  try {
    return dirname(Bun.resolveSync(`@img/${name}/package.json`, import.meta.dir));
  } catch {
    // Packages whose exports hide package.json ("./package" instead).
    try {
      return dirname(Bun.resolveSync(`@img/${name}/package`, import.meta.dir));
    } catch {
      return null;
    }
  }
}

export interface SharpFile {
  /** Path inside the extraction folder. */
  name: string;
  /** Where the file is in node_modules now. */
  path: string;
}

/**
 * sharp's native files for a target, laid out as in node_modules/@img so the addon's RUNPATH
 * ($ORIGIN/../../sharp-libvips-<os>-<arch>/lib; @loader_path/... on macOS) finds libvips:
 * sharp-<os>-<arch>/lib/sharp-*.node and sharp-libvips-<os>-<arch>/lib/libvips-cpp.*. Returns the missing package's
 * name instead when node_modules lacks either (npm installs only the host's optional @img packages).
 */
export function sharpFiles(t: NativeTarget): { files: SharpFile[]; addon: string } | { missing: string } {
  const addonPkg = `sharp-${t.os}-${t.arch}`;
  const vipsPkg = `sharp-libvips-${t.os}-${t.arch}`;
  const addonDir = imgPackage(addonPkg);
  if (!addonDir) return { missing: `@img/${addonPkg}` };
  const vipsDir = imgPackage(vipsPkg);
  if (!vipsDir) return { missing: `@img/${vipsPkg}` };
  const addons = readdirSync(join(addonDir, "lib")).filter((n) => n.endsWith(".node"));
  if (addons.length !== 1) throw new Error(`expected one sharp addon in ${join(addonDir, "lib")}, found ${addons.join(", ") || "none"}`);
  const libs = readdirSync(join(vipsDir, "lib")).filter((n) => /^libvips-cpp\.(so\.[0-9.]+|[0-9.]+\.dylib)$/.test(n));
  if (libs.length !== 1) throw new Error(`expected one libvips-cpp in ${join(vipsDir, "lib")}, found ${libs.join(", ") || "none"}`);
  const addon = `${addonPkg}/lib/${addons[0]}`;
  return {
    addon,
    files: [
      { name: addon, path: join(addonDir, "lib", addons[0]!) },
      { name: `${vipsPkg}/lib/${libs[0]}`, path: join(vipsDir, "lib", libs[0]!) },
    ],
  };
}

function sharpBundleModule(t: NativeTarget): string {
  const found = sharpFiles(t);
  const target = `${t.os}-${t.arch}`;
  if ("missing" in found) return `export default ${JSON.stringify({ target, missing: found.missing })};\n`;
  const h = createHash("sha256");
  for (const f of found.files) {
    h.update(f.name + "\0");
    h.update(readFileSync(f.path));
  }
  const hash = `sharp-${target}-${h.digest("hex").slice(0, 16)}`;
  const imports = found.files.map((f, i) => `import f${i} from ${JSON.stringify(f.path)} with { type: "file" };`);
  const entries = found.files.map((f, i) => `{ name: ${JSON.stringify(f.name)}, source: f${i}, size: ${statSync(f.path).size} }`);
  return (
    imports.join("\n") +
    `\nexport default { target: ${JSON.stringify(target)}, hash: ${JSON.stringify(hash)}, addon: ${JSON.stringify(found.addon)}, files: [${entries.join(", ")}] };\n`
  );
}

/**
 * The `tokenizers` package's prebuilt addon for a target (glibc on Linux, as Bun's own linux targets). The package
 * holds every platform's addon (~65 MB together); only this one is embedded. It needs no library of its own.
 */
export function tokenizersAddon(t: NativeTarget): { name: string; path: string } {
  const name = t.os === "linux" ? `tokenizers.linux-${t.arch}-gnu.node` : `tokenizers.darwin-${t.arch}.node`;
  const path = join(TOKENIZERS_ROOT, name);
  if (!existsSync(path)) throw new Error(`the tokenizers package has no prebuilt addon for ${t.os}-${t.arch} (${path})`);
  return { name, path };
}

function tokenizersBundleModule(t: NativeTarget): string {
  const { name, path } = tokenizersAddon(t);
  const hash = `tokenizers-${t.os}-${t.arch}-${createHash("sha256").update(readFileSync(path)).digest("hex").slice(0, 16)}`;
  return (
    `import f0 from ${JSON.stringify(path)} with { type: "file" };\n` +
    `export default { hash: ${JSON.stringify(hash)}, addon: ${JSON.stringify(name)}, files: [{ name: ${JSON.stringify(name)}, source: f0, size: ${statSync(path).size} }] };\n`
  );
}

export function nativePlugin(t: NativeTarget): BunPlugin {
  const files = nativeFiles(t);
  const hash = nativeHash(t, files);
  return {
    name: "infinity-onnxruntime-native",
    setup(build) {
      build.onResolve({ filter: /^infinity:native-bundle$/ }, () => ({ path: "native-bundle", namespace: "infinity" }));
      build.onLoad({ filter: /^native-bundle$/, namespace: "infinity" }, () => {
        const dir = nativeFolder(t);
        const imports = files.map((n, i) => `import f${i} from ${JSON.stringify(join(dir, n))} with { type: "file" };`);
        const entries = files.map(
          (n, i) => `{ name: ${JSON.stringify(n)}, source: f${i}, size: ${statSync(join(dir, n)).size} }`,
        );
        const contents =
          imports.join("\n") +
          `\nexport default { hash: ${JSON.stringify(hash)}, addon: ${JSON.stringify(ADDON)}, files: [${entries.join(", ")}] };\n`;
        return { contents, loader: "js" };
      });
      build.onLoad({ filter: /[\\/]onnxruntime-node[\\/]dist[\\/]binding\.js$/ }, async (args) => {
        const source = await Bun.file(args.path).text();
        if (!source.includes(ADDON_REQUIRE)) {
          throw new Error(`${args.path} no longer loads its addon with ${ADDON_REQUIRE}; update build/plugin.ts`);
        }
        const replaced = source.replace(ADDON_REQUIRE, `require(require(${JSON.stringify(LOADER)}).nativeAddonPath())`);
        return { contents: replaced, loader: "js" };
      });
      build.onResolve({ filter: /^infinity:sharp-bundle$/ }, () => ({ path: "sharp-bundle", namespace: "infinity" }));
      build.onLoad({ filter: /^sharp-bundle$/, namespace: "infinity" }, () => ({ contents: sharpBundleModule(t), loader: "js" }));
      // sharp tries its addon from several places; the first becomes the extracted one. Getting its path runs at
      // the module's top, outside sharp's try/catch, so a binary without sharp fails with its own message.
      build.onLoad({ filter: /[\\/]sharp[\\/]dist[\\/]sharp\.(mjs|cjs)$/ }, async (args) => {
        const source = await Bun.file(args.path).text();
        if (!source.includes(SHARP_REQUIRE)) {
          throw new Error(`${args.path} no longer loads its addon with ${SHARP_REQUIRE}; update build/plugin.ts`);
        }
        const esm = args.path.endsWith(".mjs");
        const header = esm
          ? `import { sharpAddonPath as __infinitySharpAddonPath } from ${JSON.stringify(SHARP_LOADER)};\n`
          : `const { sharpAddonPath: __infinitySharpAddonPath } = require(${JSON.stringify(SHARP_LOADER)});\n`;
        const body = source.replace(SHARP_REQUIRE, "require(__infinitySharpPath)");
        return { contents: `${header}const __infinitySharpPath = __infinitySharpAddonPath();\n${body}`, loader: "js" };
      });
      // The tokenizers package picks its addon among every platform's at run time; the binary holds the target's
      // only, extracted by build/runtime/tokenizers.ts. Its index.js only re-exports the addon's classes.
      build.onResolve({ filter: /^infinity:tokenizers-bundle$/ }, () => ({ path: "tokenizers-bundle", namespace: "infinity" }));
      build.onLoad({ filter: /^tokenizers-bundle$/, namespace: "infinity" }, () => ({ contents: tokenizersBundleModule(t), loader: "js" }));
      build.onLoad({ filter: /[\\/]node_modules[\\/]tokenizers[\\/]index\.js$/ }, async (args) => {
        const source = await Bun.file(args.path).text();
        if (!source.includes("module.exports.Tokenizer = nativeBinding.Tokenizer")) {
          throw new Error(`${args.path} no longer re-exports the addon's Tokenizer; update build/plugin.ts`);
        }
        return { contents: `module.exports = require(require(${JSON.stringify(TOKENIZERS_LOADER)}).tokenizersAddonPath());\n`, loader: "js" };
      });
      // transformers.js (the media worker's audio feature extractor) requires onnxruntime-node through
      // createRequire at run time, which finds no node_modules in the binary. Import it instead, so it is the
      // bundled onnxruntime-node whose addon comes from the extracted folder, as when run from source.
      build.onLoad({ filter: /[\\/]@huggingface[\\/]transformers[\\/]dist[\\/]transformers\.node\.mjs$/ }, async (args) => {
        const source = await Bun.file(args.path).text();
        if (!source.includes(TRANSFORMERS_ORT_REQUIRE)) {
          throw new Error(`${args.path} no longer loads onnxruntime-node with ${TRANSFORMERS_ORT_REQUIRE}; update build/plugin.ts`);
        }
        const body = source.replace(TRANSFORMERS_ORT_REQUIRE, "__infinityOrt");
        return { contents: `import __infinityOrt from "onnxruntime-node";\n${body}`, loader: "js" };
      });
    },
  };
}
