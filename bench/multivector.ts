// Multi-vector (ColBERT) cost on the benchmark model's shape (bge-small: 12 layers, hidden 384), quick and
// in-process: (1) onnxruntime alone against onnxruntime plus this server's multi-vector read (keep mask, a
// 384 -> 128 Dense projection per token, L2), the same batches alternating; (2) the response encoding cost per
// 128-float vector, JSON nested lists against base64 of the row-major float32 matrix; (3) a ColPali image document
// at the real export's size (448 px, 1024 image tokens + 6 prompt tokens: 1030 vectors): the server's work per image
// besides the graph, i.e. SigLIP preprocessing of a page-sized image (decoding excluded), reading 1030 vectors, and
// the answer's encoding. There is no ColPali graph of that size here, so its onnxruntime time is not measured.
//   npx bun bench/multivector.ts [--rounds 20] [--docs 2] [--tokens 180]
import * as ort from "onnxruntime-node";
import { join } from "node:path";
import { benchSession } from "./limit";
import { ensureBenchModel } from "./model";
import { readMultiVector, type MultiVector } from "../src/tasks/multivector";
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
const DIM = 128;

let seed = 7;
const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);

const dir = ensureBenchModel({ log: (m) => console.error(m) });
const session = await benchSession(join(dir, "onnx", "model.onnx"), 2);
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

const raw: number[] = [];
const full: number[] = [];
let last: MultiVector[] = [];
let lastOut: { data: Float32Array; dims: number[] } | null = null;
for (let r = 0; r < rounds + 2; r++) {
  // Alternate which goes first, so drift of the shared machine spreads over both.
  for (const which of r % 2 ? ["full", "raw"] : ["raw", "full"]) {
    const t0 = performance.now();
    const out = await session.run(feeds);
    if (which === "full") {
      const h = out.last_hidden_state!;
      const data = h.data as Float32Array;
      lastOut = { data, dims: h.dims as number[] };
      last = keep.map((k, b) => readMultiVector(data, h.dims as number[], b, k, dense));
    }
    const ms = performance.now() - t0;
    if (r >= 2) (which === "raw" ? raw : full).push(ms);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const range = (xs: number[]) => `${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)}`;
const vectors = last.reduce((s, m) => s + m.rows, 0);
console.log(`batch: ${docs} documents x ${tokens} tokens, ${vectors} kept vectors of ${DIM}; ${rounds} rounds each, alternating`);
console.log(`onnxruntime alone:        median ${median(raw).toFixed(1)} ms (range ${range(raw)}), ${(n / median(raw) * 1000).toFixed(0)} tokens/s`);
console.log(`+ multi-vector read:      median ${median(full).toFixed(1)} ms (range ${range(full)}), ${(n / median(full) * 1000).toFixed(0)} tokens/s, ratio ${(median(raw) / median(full)).toFixed(3)}`);

// The read alone (no onnxruntime run): steadier on a shared machine than the difference of two noisy medians.
const reads: number[] = [];
for (let r = 0; r < rounds; r++) {
  const t0 = performance.now();
  keep.map((k, b) => readMultiVector(lastOut!.data, lastOut!.dims, b, k, dense));
  reads.push(performance.now() - t0);
}
console.log(`multi-vector read alone:  median ${median(reads).toFixed(2)} ms per batch (range ${range(reads)}), ${((median(reads) * 1000) / vectors).toFixed(1)} us/vector (384 -> ${DIM} projection + L2)`);

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
let image: MultiVector = readMultiVector(graphOut, [1, imageVectors, DIM], 0, all, []);
for (let r = 0; r < rounds; r++) {
  const t0 = performance.now();
  image = readMultiVector(graphOut, [1, imageVectors, DIM], 0, all, []);
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
