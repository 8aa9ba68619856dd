// Returns freed heap memory to the operating system: after a model is unloaded, and in each inference worker once it
// has been idle for a moment after a burst of runs. onnxruntime (and the tokenizers' native code) allocate with the C
// allocator; glibc keeps freed chunks in its per-thread arenas (each inference and tokenizer worker thread gets one),
// so without a trim much of the memory a large request or an unloaded model used stays resident. malloc_trim(0) walks
// every arena, whichever thread calls it. A no-op where glibc's malloc_trim is not available (musl, macOS, Windows).
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

/**
 * Collects this thread's garbage (a model's tokenizer and buffers on the main thread; feed and output buffers in an
 * inference worker) and asks the C allocator to give free memory back. True when glibc could be asked.
 */
export function collect(): boolean {
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

/** How long an inference worker waits without a run before it collects and trims. */
export const IDLE_TRIM_MS = 250;
/** Padded tokens run since the last trim below which an idle worker does not bother (short requests leave little). */
export const IDLE_TRIM_MIN_TOKENS = 2048;

/**
 * An inference worker's idle trim: after runs of at least IDLE_TRIM_MIN_TOKENS padded tokens in all, once no run has
 * come for IDLE_TRIM_MS, the worker collects its garbage and trims the allocator (a few ms on this worker's thread,
 * never the main thread's). Under steady traffic it never fires; after a large request it hands back what the
 * request's batches left in the allocator.
 */
export class IdleTrim {
  private tokens = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** Trims done (tests). */
  count = 0;

  constructor(
    private readonly delayMs = IDLE_TRIM_MS,
    private readonly minTokens = IDLE_TRIM_MIN_TOKENS,
    private readonly run: () => boolean = collect,
  ) {}

  /** A run starts: no trim is due while it runs (a run that outlasts the delay would otherwise be followed by one). */
  busy(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** A run of `tokens` padded tokens ended: a trim follows when no run comes within the delay and enough ran. */
  ran(tokens: number): void {
    this.busy();
    this.tokens += tokens;
    if (this.tokens < this.minTokens) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      const tokens = this.tokens;
      this.tokens = 0;
      this.count++;
      const t0 = performance.now();
      const trimmed = this.run();
      log.debug("idle inference worker: garbage collected, allocator trimmed", { tokens_since_last: tokens, ms: +(performance.now() - t0).toFixed(2), malloc_trim: trimmed });
    }, this.delayMs);
    (this.timer as { unref?: () => void }).unref?.();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
