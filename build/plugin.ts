// Bun build plugin: embeds onnxruntime-node's native addon and shared library for one target, and makes
// onnxruntime-node load the addon from where build/runtime/native.ts extracts it at run time.
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
    },
  };
}
