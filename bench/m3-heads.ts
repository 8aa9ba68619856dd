// bge-m3's pickled heads (BAAI's layout) after the encoder, alone (no model, no HTTP): relu(sparse_linear(h)) and
// colbert_linear(h) for every token of a batch of token states at bge-m3's size (1024 -> 1 and 1024 -> 1024), run
// the two ways the server could: as the session's head graph in onnxruntime (what it does: tasks/hybrid.ts
// pickledHeadsHead, model/dense-graph.ts headGraph) or in JavaScript per token vector (applyDense, the pooled
// embedders' Dense path). Prints the median and range of the per-batch time (wall and process CPU) of each and the
// largest difference between them.
//   npx bun bench/m3-heads.ts [--docs 4] [--tokens 128] [--hidden 1024] [--reps 5] [--warmup 1] [--threads 1]
import * as ort from "onnxruntime-node";
import type { DenseLayer } from "../src/model/dense";
import { headGraph } from "../src/model/dense-graph";
import { sessionOptions } from "../src/model/onnx";
import { applyDense } from "../src/tasks/embed";
import { uniform } from "./model";

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : d;
};
const docs = Number(arg("docs", "4"));
const tokens = Number(arg("tokens", "128"));
const hidden = Number(arg("hidden", "1024"));
const reps = Number(arg("reps", "5"));
const warmup = Number(arg("warmup", "1"));
const threads = Number(arg("threads", "1"));

const draw = uniform(11);
const rand = () => draw() - 0.5;
const states = Float32Array.from({ length: docs * tokens * hidden }, () => rand() * 4);
const linear = (outFeatures: number, activation: DenseLayer["activation"]): DenseLayer => ({
  inFeatures: hidden, outFeatures, activation, residual: null,
  weight: Float32Array.from({ length: outFeatures * hidden }, () => rand() / Math.sqrt(hidden)),
  bias: Float32Array.from({ length: outFeatures }, () => rand() * 0.1),
});
const sparse = linear(1, "relu");
const colbert = linear(hidden, "identity");
const { extra: _serverOnly, ...options } = sessionOptions("cpu", { device: "cpu", numThreads: threads });
const head = await ort.InferenceSession.create(headGraph([{ name: "sparse", layers: [sparse] }, { name: "colbert", layers: [colbert] }]), options);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (xs: number[]) => `median ${median(xs).toFixed(1)} ms (range ${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)})`;
async function time(run: () => Promise<void> | void): Promise<{ wall: number[]; cpu: number[] }> {
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let r = 0; r < warmup + reps; r++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await run();
    const c = process.cpuUsage(c0);
    if (r >= warmup) {
      wall.push(performance.now() - t0);
      cpu.push((c.user + c.system) / 1000);
    }
  }
  return { wall, cpu };
}

let graphSparse: Float32Array = new Float32Array(0);
let graphColbert: Float32Array = new Float32Array(0);
const graph = await time(async () => {
  const out = await head.run({ x: new ort.Tensor("float32", states, [docs, tokens, hidden]) });
  graphSparse = out.sparse!.data as Float32Array;
  graphColbert = out.colbert!.data as Float32Array;
});
await head.release();
const jsSparse = new Float32Array(docs * tokens);
const jsColbert = new Float32Array(docs * tokens * hidden);
const js = await time(() => {
  for (let t = 0; t < docs * tokens; t++) {
    const h = states.subarray(t * hidden, (t + 1) * hidden);
    jsSparse[t] = applyDense(h, [sparse])[0]!;
    jsColbert.set(applyDense(h, [colbert]), t * hidden);
  }
});
let worst = 0;
for (let i = 0; i < jsSparse.length; i++) worst = Math.max(worst, Math.abs(jsSparse[i]! - graphSparse[i]!));
for (let i = 0; i < jsColbert.length; i++) worst = Math.max(worst, Math.abs(jsColbert[i]! - graphColbert[i]!));
const n = docs * tokens;
console.log(JSON.stringify({ docs, tokens, hidden, threads, reps, graphWall: median(graph.wall), graphCpu: median(graph.cpu), jsWall: median(js.wall), jsCpu: median(js.cpu), maxDiff: worst }));
console.log(`${n} token vectors, ${hidden} -> 1 (relu) and ${hidden} -> ${hidden}: onnxruntime head graph (${threads} thread(s)) wall ${fmt(graph.wall)}, cpu ${fmt(graph.cpu)}; ` +
  `JavaScript per vector wall ${fmt(js.wall)}, cpu ${fmt(js.cpu)}; ${(median(js.cpu) / median(graph.cpu)).toFixed(1)}x the CPU; max |difference| ${worst.toExponential(1)}`);
