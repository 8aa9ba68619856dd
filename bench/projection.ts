// A ColBERT document batch's work after the model, alone (no model, no HTTP): PyLate's 1_Dense projection of every
// token vector, the keep mask and per-token L2, on a realistic batch. The server now projects with onnxruntime (the
// session's head graph, model/dense-graph.ts; it runs in the inference worker) and reads on the main thread
// (readMultiVector); a checkout from before the head (--src DIR: its src folder; it has no colbertHead) projected in
// JavaScript inside readMultiVector on the main thread. Run both checkouts' copies alternately for an A/B. Prints
// the median and range of the per-batch time (wall and process CPU), the main thread's share of it, the largest
// difference from a plain per-vector JavaScript reference (applyDense + L2) and an FNV-1a hash of the output bytes.
//   npx bun bench/projection.ts [--src DIR] [--docs 32] [--tokens 180] [--hidden 384] [--dim 128] [--reps 10] [--warmup 2] [--threads 1]
import { resolve } from "node:path";
import * as ort from "onnxruntime-node";
import type { DenseLayer } from "../src/model/dense";
import type { MultiVector } from "../src/tasks/multivector";
import { applyDense, l2normalize } from "../src/tasks/embed";
import { denseGraph } from "../src/model/dense-graph";
import { sessionOptions } from "../src/model/onnx";
import { uniform } from "./model";

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : d;
};
const src = resolve(arg("src", resolve(import.meta.dir, "../src")));
const docs = Number(arg("docs", "32"));
const tokens = Number(arg("tokens", "180"));
const hidden = Number(arg("hidden", "384"));
const dim = Number(arg("dim", "128"));
const reps = Number(arg("reps", "10"));
const warmup = Number(arg("warmup", "2"));
const threads = Number(arg("threads", "1"));

const mod = await import(`${src}/tasks/multivector.ts`);
const jsProjection = !("colbertHead" in mod);

const rand = uniform(7);
// Hidden states in a transformer's range, ~90% of positions kept (a punctuation skiplist), PyLate's bias-free
// identity 384 -> 128 Dense.
const states = Float32Array.from({ length: docs * tokens * hidden }, () => (rand() - 0.5) * 4);
const keep = Array.from({ length: docs }, () => Uint8Array.from({ length: tokens }, () => (rand() < 0.9 ? 1 : 0)));
const dense: DenseLayer[] = [{
  inFeatures: hidden, outFeatures: dim, bias: null, activation: "identity", residual: null,
  weight: Float32Array.from({ length: dim * hidden }, () => (rand() - 0.5) * 0.1),
}];
const dims = [docs, tokens, hidden];
const { extra: _serverOnly, ...options } = sessionOptions("cpu", { device: "cpu", numThreads: threads });
const head = jsProjection ? null : await ort.InferenceSession.create(denseGraph(dense), options);

const wall: number[] = [];
const cpu: number[] = [];
const mainWall: number[] = [];
let out: MultiVector[] = [];
for (let r = 0; r < warmup + reps; r++) {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let t1 = t0;
  if (head) {
    const y = (await head.run({ x: new ort.Tensor("float32", states, dims) })).y!;
    t1 = performance.now();
    out = keep.map((k, b) => mod.readMultiVector(y.data as Float32Array, y.dims, b, k));
  } else {
    out = keep.map((k, b) => mod.readMultiVector(states, dims, b, k, dense));
  }
  const t2 = performance.now();
  const c = process.cpuUsage(c0);
  if (r >= warmup) {
    wall.push(t2 - t0);
    mainWall.push(t2 - t1);
    cpu.push((c.user + c.system) / 1000);
  }
}
await head?.release();

// The reference: each kept vector through applyDense (one vector at a time) and L2, as sentence-transformers does.
let worst = 0;
keep.forEach((k, b) => {
  let row = 0;
  for (let i = 0; i < tokens; i++) {
    if (!k[i]) continue;
    const o = (b * tokens + i) * hidden;
    const want = l2normalize(applyDense(states.slice(o, o + hidden), dense));
    for (let j = 0; j < dim; j++) worst = Math.max(worst, Math.abs(out[b]!.data[row * dim + j]! - want[j]!));
    row++;
  }
});
let hash = 0x811c9dc5;
let vectors = 0;
for (const m of out) {
  vectors += m.rows;
  const bytes = new Uint8Array(m.data.buffer, m.data.byteOffset, m.data.byteLength);
  for (let i = 0; i < bytes.length; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193) >>> 0;
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (xs: number[]) => `median ${median(xs).toFixed(2)} ms (range ${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)})`;
const projection = jsProjection ? "JavaScript" : `onnxruntime head, ${threads} thread(s)`;
console.log(JSON.stringify({ src, projection, docs, tokens, hidden, dim, vectors, reps, wallMedian: median(wall), cpuMedian: median(cpu), mainThreadMedian: median(mainWall), maxDiff: worst, hash: hash.toString(16) }));
console.log(`${vectors} vectors, ${hidden} -> ${dim}, projection by ${projection}: wall ${fmt(wall)}, cpu ${fmt(cpu)}, main thread ${fmt(mainWall)}; ` +
  `${((median(wall) * 1000) / vectors).toFixed(2)} us/vector; max |difference| from the reference ${worst.toExponential(1)}; output hash ${hash.toString(16)}`);
