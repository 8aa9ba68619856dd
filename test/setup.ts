// Preloaded by `bun test` (bunfig.toml). The whole suite runs in one process, and the tokenizer tests encode
// 1,000,000-character texts whole with the Rust library, whose allocations stay in glibc's per-thread malloc
// arenas once freed: `bun test test/tokenize` ended at 15.7 GB resident before this. Past 1 GiB resident, each
// test ends by collecting garbage (the library's encodings are freed with their wrappers) and handing the arenas'
// free pages back (src/model/trim.ts collect).
import { afterEach } from "bun:test";
import { collect } from "../src/model/trim";

const TRIM_ABOVE_BYTES = 1024 * 1024 * 1024;

afterEach(() => {
  if (process.memoryUsage.rss() > TRIM_ABOVE_BYTES) collect();
});
