// Runs inside the compiled binary only: the build plugin makes sharp (the media worker's image decoder) load its
// addon from here. `infinity:sharp-bundle` is a virtual module the plugin generates per target: sharp's addon and
// libvips with their hash, or null when node_modules had no sharp packages for that target.
// @ts-expect-error virtual module, exists only during `bun build/compile.ts`
import bundle from "infinity:sharp-bundle";
import { prepareNative, type NativeBundle } from "./extract";

const embedded = bundle as (NativeBundle & { target: string }) | { target: string; missing: string };

let addonPath: string | null = null;

/** Path of the extracted sharp addon (libvips beside it where its RUNPATH looks); extracts on first call. */
export function sharpAddonPath(): string {
  if ("missing" in embedded) {
    throw new Error(
      `image and audio models are not supported by this binary: it was built for ${embedded.target} without sharp's ` +
        `native files (${embedded.missing} was not in node_modules); run them with \`bun src/cli.ts\` or rebuild ` +
        `after installing it`,
    );
  }
  addonPath ??= prepareNative(embedded, process.env, "sharp native libraries (addon and libvips)").addonPath;
  return addonPath;
}

/**
 * Extracts sharp's files along with onnxruntime's at start-up (every start loads onnxruntime), so that one run of the
 * binary, e.g. `infinity --version` in the Dockerfile, leaves everything a read-only container needs. Best effort:
 * a text-only server must not fail over them; the media worker extracts again, and reports, if this did not work.
 */
export function prepareSharpEarly(): void {
  if ("missing" in embedded) return;
  try {
    sharpAddonPath();
  } catch {
    // Left to the media worker, which fails the media model with this error.
  }
}
