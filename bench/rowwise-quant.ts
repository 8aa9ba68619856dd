// The cost of the per-input int8 rewrite (src/model/rowwise-quant.ts), with onnxruntime alone (no server, no HTTP):
// the benchmark's int8 model (bun bench/model.ts --int8) as exported (one activation scale per batch tensor) and as
// the server loads it (scales per input), on batches of the benchmark workload's texts (mixed lengths, padded to the
// longest), both sessions with the server's options. Rounds alternate the two graphs; prints tokens/s (real tokens)
// per batch size, median and range over rounds, and the largest difference between a batched row and that text
// alone through the original graph (0 for the rewritten graph).
//   npx bun bench/rowwise-quant.ts [--model .cache/bench-model-int8] [--texts 64] [--batches 1,8,32] [--rounds 5] [--threads 2]
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import * as ort from "onnxruntime-node";
import { sessionOptions } from "../src/model/onnx";
import { rowwiseQuantGraph } from "../src/model/rowwise-quant";
import { DEFAULT_OUT, REPO_ROOT } from "./model";
import { makeWorkload, type WorkloadText } from "./workload";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: DEFAULT_OUT.int8 },
    texts: { type: "string", default: "64" },
    batches: { type: "string", default: "1,8,32" },
    rounds: { type: "string", default: "5" },
    threads: { type: "string", default: "2" },
  },
});
const dir = resolve(REPO_ROOT, values.model!);
const source = join(dir, "onnx", "model.onnx");
const rewritten = rowwiseQuantGraph(source);
if (!rewritten || !("path" in rewritten)) throw new Error(`not rewritten: ${JSON.stringify(rewritten)}`);
const threads = Number(values.threads);
const open = (path: string) => ort.InferenceSession.create(path, sessionOptions("cpu", { device: "cpu", numThreads: threads, externalDataDir: join(dir, "onnx") }));
const sessions = { original: await open(source), "per input": await open(rewritten.path) };
const pool = (await makeWorkload(dir, Number(values.texts))).texts;

function feeds(texts: readonly WorkloadText[]): Record<string, ort.Tensor> {
  const seq = Math.max(...texts.map((t) => t.ids.length));
  const ids = new BigInt64Array(texts.length * seq);
  const mask = new BigInt64Array(texts.length * seq);
  texts.forEach((t, b) => t.ids.forEach((v, i) => ((ids[b * seq + i] = BigInt(v)), (mask[b * seq + i] = 1n))));
  const dims = [texts.length, seq];
  return { input_ids: new ort.Tensor("int64", ids, dims), attention_mask: new ort.Tensor("int64", mask, dims), token_type_ids: new ort.Tensor("int64", new BigInt64Array(ids.length), dims) };
}

const batchesOf = (size: number) => Array.from({ length: Math.ceil(pool.length / size) }, (_, k) => pool.slice(k * size, (k + 1) * size));
const tokens = pool.reduce((n, t) => n + t.ids.length, 0);
console.log(`${pool.length} texts, ${tokens} tokens; ${threads} threads; ${rewritten.quantizers} DynamicQuantizeLinear made per input`);

// Batched rows against each text alone through the original graph.
const alone = await Promise.all(pool.map(async (t) => (await sessions.original.run(feeds([t]))).last_hidden_state!.data as Float32Array));
for (const [name, s] of Object.entries(sessions)) {
  let worst = 0;
  for (const batch of batchesOf(32)) {
    const out = (await s.run(feeds(batch))).last_hidden_state!;
    const [, seq, hidden] = out.dims as [number, number, number];
    batch.forEach((t, b) => {
      const ref = alone[pool.indexOf(t)]!;
      for (let i = 0; i < t.ids.length * hidden; i++) worst = Math.max(worst, Math.abs((out.data as Float32Array)[b * seq * hidden + i]! - ref[i]!));
    });
  }
  console.log(`${name}: largest |batched - alone| over batches of 32: ${worst.toExponential(2)}`);
}

for (const size of values.batches!.split(",").map(Number)) {
  const batches = batchesOf(size).map(feeds);
  for (const s of Object.values(sessions)) await s.run(batches[0]!); // uncounted
  const rates: Record<string, number[]> = { original: [], "per input": [] };
  for (let r = 0; r < Number(values.rounds); r++) {
    for (const [name, s] of r % 2 ? Object.entries(sessions).reverse() : Object.entries(sessions)) {
      const start = performance.now();
      for (const f of batches) await s.run(f);
      rates[name]!.push(tokens / ((performance.now() - start) / 1000));
    }
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const line = Object.entries(rates).map(([n, xs]) => `${n} ${med(xs).toFixed(0)} tok/s (${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)})`);
  console.log(`batch ${size}: ${line.join(", ")}; per input / original ${(med(rates["per input"]!) / med(rates.original!)).toFixed(3)}`);
}
rewritten.remove();
