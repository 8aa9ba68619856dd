// Runs inside the compiled binary only: the build plugin points onnxruntime-node's addon require here.
// `infinity:native-bundle` is a virtual module the plugin generates per target (the embedded files and their hash).
// @ts-expect-error virtual module, exists only during `bun build/compile.ts`
import bundle from "infinity:native-bundle";
import { prepareNative, type NativeBundle } from "./extract";
import { prepareSharpEarly } from "./sharp";

let addonPath: string | null = null;

/** Path of the extracted onnxruntime_binding.node; extracts on first call (sharp's files too, see sharp.ts). */
export function nativeAddonPath(): string {
  if (addonPath === null) {
    addonPath = prepareNative(bundle as NativeBundle, process.env).addonPath;
    prepareSharpEarly();
  }
  return addonPath;
}
