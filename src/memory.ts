// Handing freed native memory back to the operating system.
//
// The Rust tokenizers binding encodes on libuv's thread pool and allocates through glibc's malloc, which gives each
// thread its own arena and keeps what is freed inside an arena for reuse. Encoding one 1,000,000-character text
// whole allocates hundreds of MiB on whichever pool thread ran it, and after a few such requests every arena holds
// its own peak: a server of one small model measured 129 MiB resident when ready and 820-960 MiB after two rounds
// of four concurrent requests of 1,000,000 characters, for good (2026-12-01; `bun test test/tokenize` ended at 15.7
// GiB resident, of which malloc_trim handed 4.7 GiB back in one call). `malloc_trim(0)` returns the free pages of
// every arena. It is glibc's: on other C libraries (musl, macOS) there is nothing to call and nothing is done.
import { dlopen, FFIType } from "bun:ffi";

type Trim = (pad: number) => number;

let trim: Trim | null | undefined;

function glibcTrim(): Trim | null {
  if (process.platform !== "linux") return null;
  try {
    const libc = dlopen("libc.so.6", { malloc_trim: { args: [FFIType.u64], returns: FFIType.i32 } });
    return (pad: number) => libc.symbols.malloc_trim(pad);
  } catch {
    return null;
  }
}

/** Whether this process can hand freed native memory back (glibc's malloc_trim was found). */
export function canReturnFreedMemory(): boolean {
  if (trim === undefined) trim = glibcTrim();
  return trim !== null;
}

/**
 * Returns the free pages of every malloc arena to the operating system. Cheap next to the work that freed them (a
 * few ms after a 1,000,000-character text); callers use it after such work, not after every small request.
 * Returns whether anything could be called.
 */
export function returnFreedMemory(): boolean {
  if (!canReturnFreedMemory()) return false;
  trim!(0);
  return true;
}

/**
 * Characters a tokenizer worker's batch may hold before it hands freed memory back afterwards: below this the
 * binding's allocations are small enough for the arenas' own reuse.
 */
export const RETURN_MEMORY_AFTER_CHARS = 200_000;
