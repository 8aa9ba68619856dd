// Runs inside the compiled binary only: the build plugin makes the `tokenizers` package (the Rust tokenizers'
// Node-API binding) load its addon from here. `infinity:tokenizers-bundle` is a virtual module the plugin generates
// per target: that target's addon and its hash. The addon is extracted like onnxruntime's (extract.ts), beside it,
// so a read-only container finds it where the image build's first run left it (INFINITY_NATIVE_DIR).
// @ts-expect-error virtual module, exists only during `bun build/compile.ts`
import bundle from "infinity:tokenizers-bundle";
import { prepareNative, type NativeBundle } from "./extract";

let addonPath: string | null = null;

/** Path of the extracted tokenizers addon; extracts on first call. */
export function tokenizersAddonPath(): string {
  addonPath ??= prepareNative(bundle as NativeBundle, process.env, "tokenizers native addon").addonPath;
  return addonPath;
}
