// Batch shape probe: onnxruntime alone, tokens/s for each input length x batch size (all inputs of one length, so
// no padding), rounds interleaved so drift hits every cell alike; the best round per cell is printed. This is
// what the CPU defaults were chosen from: the automatic token budget (src/engine/registry.ts, CPU_BATCH_TOKENS)
// and the run overhead in tokens (src/engine/batcher.ts, DEFAULT_RUN_OVERHEAD_TOKENS). Rerun it on other hardware
// or another model to re-derive them.
//
//   bun bench/shape.ts [path/to/model.onnx] [--threads N] [--rounds R]
//   (default model: the benchmark model, generated on demand; its inputs must be input_ids, attention_mask and
//   optionally token_type_ids)
import { join } from "node:path";
import { benchSession, makeBatch } from "./limit";
import { ensureBenchModel } from "./model";

const args = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const threads = flag("--threads", 2);
const rounds = flag("--rounds", 3);
const path = args[0] && !args[0].startsWith("--") ? args[0] : join(ensureBenchModel(), "onnx", "model.onnx");
const session = await benchSession(path, threads);
const LENGTHS = [12, 48, 100, 160, 250];
const SIZES = [1, 2, 4, 8, 16, 32];

/** b inputs of `len` tokens each (token id 1000: the content does not change the compute). */
const feeds = (b: number, len: number) =>
  makeBatch(Array.from({ length: b }, () => ({ text: "", ids: new Int32Array(len).fill(1000) })), session.inputNames).feeds;

const best = new Map<string, { tps: number; ms: number }>();
for (let round = 0; round < rounds; round++) {
  for (const len of LENGTHS) {
    for (const b of SIZES) {
      const f = feeds(b, len);
      await session.run(f);
      let tokens = 0, runs = 0;
      const t0 = performance.now();
      // At least ~2400 tokens and 300 ms per cell.
      while (tokens < 2400 || performance.now() - t0 < 300) {
        await session.run(f);
        tokens += b * len;
        runs++;
      }
      const ms = performance.now() - t0;
      const key = `${len}x${b}`;
      const tps = tokens / (ms / 1000);
      if (!best.has(key) || tps > best.get(key)!.tps) best.set(key, { tps, ms: ms / runs });
    }
  }
}

console.log(`tokens/s (best of ${rounds} rounds), ${threads} intra-op thread(s), ${path}`);
console.log(["length \\ batch", ...SIZES].join("\t"));
for (const len of LENGTHS) console.log([len, ...SIZES.map((b) => best.get(`${len}x${b}`)!.tps.toFixed(0))].join("\t"));
// time(batch) ~ overhead + perToken x padded tokens, fit per length from batch 1 and the batch nearest 512 tokens.
// Short lengths only: for long inputs the fixed part is a small share of a run and drift swamps it.
console.log("\nper-run fit: ms = overhead + perToken x tokens (from batch 1 and the largest batch <= 512 tokens)");
for (const len of LENGTHS.filter((l) => l <= 48)) {
  const b = Math.max(2, ...SIZES.filter((s) => s * len <= 512));
  const one = best.get(`${len}x1`)!.ms, many = best.get(`${len}x${b}`)!.ms;
  const perToken = (many - one) / ((b - 1) * len);
  const overhead = one - perToken * len;
  console.log(`length ${len}: overhead ${overhead.toFixed(2)} ms, ${perToken.toFixed(4)} ms/token -> overhead = ${(overhead / perToken).toFixed(0)} tokens`);
}
