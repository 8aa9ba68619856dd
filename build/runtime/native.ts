// Runs inside the compiled binary only: the build plugin points onnxruntime-node's addon require here.
// `infinity:native-bundle` is a virtual module the plugin generates per target (the embedded files and their hash).
// @ts-expect-error virtual module, exists only during `bun build/compile.ts`
import bundle from "infinity:native-bundle";
import { prepareNative, type NativeBundle } from "./extract";

let addonPath: string | null = null;

/** Path of the extracted onnxruntime_binding.node; extracts on first call. */
export function nativeAddonPath(): string {
  addonPath ??= prepareNative(bundle as NativeBundle, process.env).addonPath;
  return addonPath;
}
