// Returns freed heap memory to the operating system after a model is unloaded. onnxruntime allocates with the C
// allocator; glibc keeps freed chunks in its per-thread arenas (each inference worker thread gets one), so without a
// trim much of an unloaded model's memory stays resident. A no-op where glibc's malloc_trim is not available.
import { log } from "../log";

let trim: (() => number) | null | undefined;

function load(): (() => number) | null {
  if (process.platform !== "linux") return null;
  try {
    // bun:ffi is loaded only here, only on Linux.
    const { dlopen, FFIType } = require("bun:ffi") as typeof import("bun:ffi");
    const libc = dlopen("libc.so.6", { malloc_trim: { args: [FFIType.u64], returns: FFIType.i32 } });
    return () => libc.symbols.malloc_trim(0) as number;
  } catch (e) {
    log.debug("malloc_trim is not available; freed memory stays with the allocator", { error: (e as Error).message });
    return null;
  }
}

/** Collects garbage (a model's tokenizer and buffers) and asks the C allocator to give free memory back. */
function collect(): boolean {
  Bun.gc(true);
  if (trim === undefined) trim = load();
  if (!trim) return false;
  trim();
  return true;
}

/**
 * Returns an unloaded model's memory: at once, and again shortly after, once its inference worker thread has
 * ended (termination is asynchronous, and a thread's arena is only free after it exits). True when glibc could
 * be asked.
 */
export function returnFreedMemory(): boolean {
  const trimmed = collect();
  setTimeout(collect, 1000).unref?.();
  return trimmed;
}
