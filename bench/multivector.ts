// Multi-vector (ColBERT) cost on the benchmark model's shape (bge-small: 12 layers, hidden 384), quick and
// in-process: (1) onnxruntime alone against onnxruntime plus what the server does after the run for a PyLate export
// (the 384 -> 128 Dense projection as the session's head graph, run by onnxruntime in the worker; then keep mask and
// L2 on the main thread), the same batches alternating; (2) the response encoding cost per
// 128-float vector, JSON nested lists against base64 of the row-major float32 matrix; (3) a ColPali image document
// at the real export's size (448 px, 1024 image tokens + 6 prompt tokens: 1030 vectors): the server's work per image
// besides the graph, i.e. SigLIP preprocessing of a page-sized image (decoding excluded), reading 1030 vectors, and
// the answer's encoding. There is no ColPali graph of that size here, so its onnxruntime time is not measured.
// Times are wall clock and process CPU (user + system, all threads: onnxruntime's too); CPU time moves less when
// other processes share the machine. --src DIR takes readMultiVector from another checkout's src folder (A/B of
// the read; alternate the two runs): one from before the head (no colbertHead export) projects in JavaScript inside
// readMultiVector, as the server did then. --read-only stops after (1).
//   npx bun bench/multivector.ts [--rounds 20] [--docs 2] [--tokens 180] [--threads 2] [--src DIR] [--read-only]
import * as ort from "onnxruntime-node";
import { join, resolve } from "node:path";
import { benchSession } from "./limit";
import { ensureBenchModel, uniform } from "./model";
import { readMultiVector as ownRead, type MultiVector } from "../src/tasks/multivector";
import { denseGraph } from "../src/model/dense-graph";
import { sessionOptions } from "../src/model/onnx";
import { toBase64 } from "../src/tasks/embed";
import { matrixRows } from "../src/server/routes/embeddings";
import type { DenseLayer } from "../src/model/dense";
import { imageConfigFrom, preprocessImage } from "../src/media/image";

const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const rounds = arg("rounds", 20);
const docs = arg("docs", 2);
const tokens = arg("tokens", 180);
// onnxruntime intra-op threads; with 1 no pool thread spins, so its CPU time is its work.
const threads = arg("threads", 2);
const DIM = 128;
const src = process.argv.indexOf("--src") > 0 ? resolve(process.argv[process.argv.indexOf("--src") + 1]!) : null;
const other = src ? await import(`${src}/tasks/multivector.ts`) : null;
const jsProjection = other !== null && !("colbertHead" in other);

const rand = uniform(7);

const dir = ensureBenchModel({ log: (m) => console.error(m) });
const session = await benchSession(join(dir, "onnx", "model.onnx"), threads);
const n = docs * tokens;
const ids = new BigInt64Array(n);
for (let i = 0; i < n; i++) ids[i] = BigInt(i % tokens === 0 ? 101 : i % tokens === tokens - 1 ? 102 : 1000 + Math.floor(rand() * 29000));
const feeds: Record<string, ort.Tensor> = {};
for (const name of session.inputNames) {
  feeds[name] = new ort.Tensor("int64", name === "input_ids" ? ids : name === "attention_mask" ? new BigInt64Array(n).fill(1n) : new BigInt64Array(n), [docs, tokens]);
}
const keep = Array.from({ length: docs }, () => Uint8Array.from({ length: tokens }, () => (rand() < 0.9 ? 1 : 0)));
const dense: DenseLayer[] = [{
  inFeatures: 384, outFeatures: DIM, bias: null, activation: "identity", residual: null,
  weight: Float32Array.from({ length: DIM * 384 }, () => rand() - 0.5),
}];
// The server's head: the Dense graph in its own session with the model's settings, run on the output right after.
const { extra: _serverOnly, ...headOptions } = sessionOptions("cpu", { device: "cpu", numThreads: threads });
const head = jsProjection ? null : await ort.InferenceSession.create(denseGraph(dense), headOptions);
const project = async (h: ort.Tensor): Promise<{ data: Float32Array; dims: number[] }> => {
  const y = head ? (await head.run({ x: h })).y! : h;
  return { data: y.data as Float32Array, dims: y.dims as number[] };
};
/** The read after the run (and the head): keep mask and L2; an older checkout's projects in JavaScript here. */
const read = (data: Float32Array, dims: number[], b: number, k: Uint8Array, layers: DenseLayer[] = dense): MultiVector =>
  jsProjection ? other.readMultiVector(data, dims, b, k, layers) : ((other?.readMultiVector ?? ownRead) as typeof ownRead)(data, dims, b, k);

const raw: number[] = [];
const full: number[] = [];
const rawCpu: number[] = [];
const fullCpu: number[] = [];
let last: MultiVector[] = [];
let lastOut: ort.Tensor | null = null;
for (let r = 0; r < rounds + 2; r++) {
  // Alternate which goes first, so drift of the shared machine spreads over both.
  for (const which of r % 2 ? ["full", "raw"] : ["raw", "full"]) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const out = await session.run(feeds);
    if (which === "full") {
      lastOut = out.last_hidden_state!;
      const y = await project(lastOut);
      last = keep.map((k, b) => read(y.data, y.dims, b, k));
    }
    const ms = performance.now() - t0;
    const c = process.cpuUsage(c0);
    if (r >= 2) (which === "raw" ? raw : full).push(ms);
    if (r >= 2) (which === "raw" ? rawCpu : fullCpu).push((c.user + c.system) / 1000);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const range = (xs: number[]) => `${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)}`;
const vectors = last.reduce((s, m) => s + m.rows, 0);
console.log(`readMultiVector from ${src ?? "this checkout"}, projection ${jsProjection ? "in JavaScript (inside the read)" : "by onnxruntime (the head graph)"}; onnxruntime with ${threads} thread(s)`);
console.log(`batch: ${docs} documents x ${tokens} tokens, ${vectors} kept vectors of ${DIM}; ${rounds} rounds each, alternating`);
console.log(`onnxruntime alone:        median ${median(raw).toFixed(1)} ms (range ${range(raw)}), ${(n / median(raw) * 1000).toFixed(0)} tokens/s`);
console.log(`+ projection and read:    median ${median(full).toFixed(1)} ms (range ${range(full)}), ${(n / median(full) * 1000).toFixed(0)} tokens/s, ratio ${(median(raw) / median(full)).toFixed(3)}`);
console.log(`process CPU:              onnxruntime alone median ${median(rawCpu).toFixed(1)} ms (range ${range(rawCpu)}), + read ${median(fullCpu).toFixed(1)} ms (range ${range(fullCpu)})`);

// The work after the model alone (no model run): steadier on a shared machine than the difference of two noisy
// medians. The projection (the head's run, or JavaScript inside the read) and the main thread's read, timed apart.
const projections: number[] = [];
const projectionsCpu: number[] = [];
const reads: number[] = [];
const readsCpu: number[] = [];
for (let r = 0; r < rounds; r++) {
  let c0 = process.cpuUsage();
  let t0 = performance.now();
  const y = await project(lastOut!);
  projections.push(performance.now() - t0);
  let c = process.cpuUsage(c0);
  projectionsCpu.push((c.user + c.system) / 1000);
  c0 = process.cpuUsage();
  t0 = performance.now();
  keep.map((k, b) => read(y.data, y.dims, b, k));
  reads.push(performance.now() - t0);
  c = process.cpuUsage(c0);
  readsCpu.push((c.user + c.system) / 1000);
}
if (head) console.log(`head (384 -> ${DIM} MatMul):  median ${median(projections).toFixed(2)} ms per batch (range ${range(projections)}); CPU ${median(projectionsCpu).toFixed(2)} ms (range ${range(projectionsCpu)})`);
console.log(`read on the main thread:  median ${median(reads).toFixed(2)} ms per batch (range ${range(reads)}), ${((median(reads) * 1000) / vectors).toFixed(1)} us/vector (${jsProjection ? `384 -> ${DIM} projection + ` : ""}keep + L2); CPU ${median(readsCpu).toFixed(2)} ms (range ${range(readsCpu)})`);
// The share of a request's work after the model: (projection + read) against onnxruntime alone + that (CPU, then wall medians).
const share = (after: number, ort: number) => `${((100 * after) / (ort + after)).toFixed(1)}%`;
const afterCpu = median(readsCpu) + (head ? median(projectionsCpu) : 0);
const afterWall = median(reads) + (head ? median(projections) : 0);
console.log(`share of run + projection + read: CPU ${share(afterCpu, median(rawCpu))}, wall ${share(afterWall, median(raw))}; main thread's read alone: CPU ${share(median(readsCpu), median(rawCpu))}`);
await head?.release();
if (process.argv.includes("--read-only")) {
  await session.release();
  process.exit(0);
}

// Encoding: the same answers through both encodings, many times.
const reps = 50;
const time = (f: () => string) => {
  let bytes = 0;
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) bytes = f().length;
  return { usPerVector: ((performance.now() - t0) * 1000) / (reps * vectors), bytesPerVector: bytes / vectors };
};
for (let k = 0; k < 2; k++) {
  const json = time(() => JSON.stringify({ data: last.map((m, index) => ({ object: "embedding", embedding: matrixRows(m.data, m.rows, m.dim), index })) }));
  const b64 = time(() => JSON.stringify({ data: last.map((m, index) => ({ object: "embedding", embedding: toBase64(m.data), shape: [m.rows, m.dim], index })) }));
  console.log(`encoding (pass ${k + 1}): JSON ${json.usPerVector.toFixed(2)} us/vector, ${json.bytesPerVector.toFixed(0)} bytes/vector; base64 ${b64.usPerVector.toFixed(2)} us/vector, ${b64.bytesPerVector.toFixed(0)} bytes/vector`);
}
await session.release();

// (3) ColPali image documents: 448x448 bicubic from a 1700x2200 page (A4 at 200 dpi), rescale, normalise.
const page = { width: 1700, height: 2200, data: Uint8Array.from({ length: 1700 * 2200 * 3 }, () => Math.floor(rand() * 256)) };
const siglip = imageConfigFrom({ size: { height: 448, width: 448 }, resample: 3, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5] }, null);
const pre: number[] = [];
for (let r = 0; r < Math.min(rounds, 10); r++) {
  const t0 = performance.now();
  preprocessImage(page, siglip);
  pre.push(performance.now() - t0);
}
const imageVectors = 1030;
const graphOut = Float32Array.from({ length: imageVectors * DIM }, () => rand() - 0.5);
const all = new Uint8Array(imageVectors).fill(1);
const imageReads: number[] = [];
let image: MultiVector = read(graphOut, [1, imageVectors, DIM], 0, all, []);
for (let r = 0; r < rounds; r++) {
  const t0 = performance.now();
  image = read(graphOut, [1, imageVectors, DIM], 0, all, []);
  imageReads.push(performance.now() - t0);
}
const encodeImage = (f: () => string) => {
  const t0 = performance.now();
  let bytes = 0;
  for (let i = 0; i < 20; i++) bytes = f().length;
  return { ms: (performance.now() - t0) / 20, bytes };
};
const imageJson = encodeImage(() => JSON.stringify({ embedding: matrixRows(image.data, image.rows, image.dim) }));
const imageB64 = encodeImage(() => JSON.stringify({ embedding: toBase64(image.data), shape: [image.rows, image.dim] }));
console.log(`ColPali image (1700x2200 page -> 448x448, ${imageVectors} vectors of ${DIM}): preprocessing median ${median(pre).toFixed(1)} ms (range ${range(pre)}); ` +
  `read ${median(imageReads).toFixed(2)} ms; answer JSON ${imageJson.ms.toFixed(2)} ms / ${(imageJson.bytes / 1024).toFixed(0)} KiB, base64 ${imageB64.ms.toFixed(2)} ms / ${(imageB64.bytes / 1024).toFixed(0)} KiB`);
