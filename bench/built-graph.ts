// Built graph against the export, on the same weights: the bench model (bge-small's optimum-style export, seeded
// random weights, bench/model.ts) is turned back into a safetensors repository (each MatMul weight named by the bias
// its Add reads, transposed back to torch's [out, in]), and the graph builder (src/model/build/) writes its graph from
// that. Measured side by side in one run:
//   - throughput of onnxruntime alone on both graphs, the same pre-built batches, rounds alternating, best round
//     each, at 1 and 2 intra-op threads (the limit's sweep);
//   - max abs difference of last_hidden_state between the two graphs;
//   - server start (spawn to /health 200, --no-model-warmup): the export; the built graph on an empty cache (the
//     build included) and again from the cache;
//   - peak RSS of a child process holding one session of each graph after the largest batch;
//   - int8 built graphs (Linear weights quantized at build time for MatMulNBits, 8 and 4 bits, blocks of 128 and 32,
//     accuracy_level 4: activations quantized per block of each row) against the float32 built graph: throughput at
//     2 threads, and the cosine of mean-pooled vectors to float32's over 256 workload texts, each run alone and in
//     length-mixed batches of 16 (the vector must not depend on the batch).
//
//   bun bench/built-graph.ts [--rounds N] [--out DIR]      (writes built-graph.md / .json into bench/results/)
//   bun bench/built-graph.ts --rss <model.onnx> <threads>  (the RSS child: prints one JSON line)
import * as ort from "onnxruntime-node";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { onnx } from "onnx-proto";
import { architectureFor, builtGraph, writeGraph } from "../src/model/build";
import type { Quantization } from "../src/model/build/quantize";
import { sessionOptions } from "../src/model/onnx";
import { listFolder } from "../src/model/resolve";
import { writeSafetensors } from "../src/model/safetensors";
import { ensureBenchModel, REPO_ROOT } from "./model";
import { makeWorkload } from "./workload";
import { startServer } from "./process";
import { peakRssMb } from "./stats";

const SHAPES = [
  { batch: 1, seq: 16 },
  { batch: 1, seq: 128 },
  { batch: 8, seq: 64 },
  { batch: 32, seq: 128 },
  { batch: 16, seq: 512 },
] as const;

/** The export's weights as a safetensors repository: BertModel names, torch layouts. Its config.json says BertModel. */
function safetensorsRepo(exportDir: string, out: string): void {
  if (existsSync(join(out, "model.safetensors"))) return;
  mkdirSync(out, { recursive: true });
  const model = onnx.ModelProto.decode(readFileSync(join(exportDir, "onnx", "model.onnx")));
  const data = readFileSync(join(exportDir, "onnx", "model.onnx_data"));
  const bytesOf = (t: onnx.ITensorProto): Uint8Array => {
    const ext = new Map((t.externalData ?? []).map((e) => [e.key, e.value]));
    if (ext.size) return data.subarray(Number(ext.get("offset") ?? 0), Number(ext.get("offset") ?? 0) + Number(ext.get("length")));
    if (t.rawData?.length) return t.rawData;
    return new Uint8Array(new Float32Array(t.floatData ?? []).buffer);
  };
  const inits = new Map(model.graph!.initializer!.map((t) => [t.name!, t]));
  const tensors: Record<string, { dtype: string; shape: number[]; bytes: Uint8Array }> = {};
  for (const [name, t] of inits) {
    if (!name.startsWith("m.") || t.dataType !== onnx.TensorProto.DataType.FLOAT) continue;
    tensors[name.slice(2)] = { dtype: "F32", shape: (t.dims ?? []).map(Number), bytes: bytesOf(t) };
  }
  const nodes = model.graph!.node!;
  // The skeleton stores equal tensors once (every zero bias, every LayerNorm weight of ones): Identity nodes name the rest.
  for (const n of nodes.filter((n) => n.opType === "Identity" && inits.has(n.input![0]!) && n.output![0]!.startsWith("m."))) {
    const t = inits.get(n.input![0]!)!;
    tensors[n.output![0]!.slice(2)] = { dtype: "F32", shape: (t.dims ?? []).map(Number), bytes: bytesOf(t) };
  }
  for (const mm of nodes.filter((n) => n.opType === "MatMul" && inits.has(n.input![1]!) && !n.input![1]!.startsWith("m."))) {
    const add = nodes.find((n) => n.opType === "Add" && n.input!.includes(mm.output![0]!));
    const bias = add?.input!.find((i) => i !== mm.output![0]);
    if (!bias?.startsWith("m.") || !bias.endsWith(".bias")) throw new Error(`no bias names the weight ${mm.input![1]}`);
    const t = inits.get(mm.input![1]!)!;
    const [rows, cols] = (t.dims ?? []).map(Number) as [number, number];
    const src = new Float32Array(new Uint8Array(bytesOf(t)).buffer);
    const dst = new Float32Array(rows * cols);
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c]!;
    tensors[`${bias.slice(2, -".bias".length)}.weight`] = { dtype: "F32", shape: [cols, rows], bytes: new Uint8Array(dst.buffer) };
  }
  writeSafetensors(join(out, "model.safetensors"), tensors);
  for (const f of listFolder(exportDir)) {
    if (f.startsWith("onnx/") || f === "bench-model.json") continue;
    mkdirSync(join(out, f, ".."), { recursive: true });
    copyFileSync(join(exportDir, f), join(out, f));
  }
}

function feeds(batch: number, seq: number, seed: number): Record<string, ort.Tensor> {
  let s = seed;
  const next = () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const n = batch * seq;
  const ids = new BigInt64Array(n);
  const mask = new BigInt64Array(n);
  for (let b = 0; b < batch; b++) {
    // Rows of different lengths (the last one full): padded batches as the server runs them.
    const len = b === batch - 1 ? seq : Math.max(2, Math.round(seq * (0.3 + 0.7 * next())));
    for (let t = 0; t < seq; t++) {
      ids[b * seq + t] = t < len ? BigInt(1000 + Math.floor(next() * 29000)) : 0n;
      mask[b * seq + t] = t < len ? 1n : 0n;
    }
  }
  return {
    input_ids: new ort.Tensor("int64", ids, [batch, seq]),
    attention_mask: new ort.Tensor("int64", mask, [batch, seq]),
    token_type_ids: new ort.Tensor("int64", new BigInt64Array(n), [batch, seq]),
  };
}

/** Real token ids, right-padded into one batch. */
function tokenFeeds(rows: Int32Array[]): Record<string, ort.Tensor> {
  const seq = Math.max(...rows.map((r) => r.length));
  const n = rows.length * seq;
  const ids = new BigInt64Array(n);
  const mask = new BigInt64Array(n);
  rows.forEach((r, b) => r.forEach((id, t) => ((ids[b * seq + t] = BigInt(id)), (mask[b * seq + t] = 1n))));
  return {
    input_ids: new ort.Tensor("int64", ids, [rows.length, seq]),
    attention_mask: new ort.Tensor("int64", mask, [rows.length, seq]),
    token_type_ids: new ort.Tensor("int64", new BigInt64Array(n), [rows.length, seq]),
  };
}

/** Mean over each row's real tokens of last_hidden_state [B, S, 384]. */
function pool(hidden: Float32Array, lengths: number[]): Float32Array[] {
  const seq = hidden.length / lengths.length / 384;
  return lengths.map((len, b) => {
    const v = new Float32Array(384);
    for (let t = 0; t < len; t++) for (let j = 0; j < 384; j++) v[j]! += hidden[(b * seq + t) * 384 + j]! / len;
    return v;
  });
}

function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! ** 2;
    nb += b[i]! ** 2;
  }
  return dot / Math.sqrt(na * nb);
}

async function session(path: string, threads: number): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(path, sessionOptions("cpu", { numThreads: threads } as never));
}

async function run(sess: ort.InferenceSession, f: Record<string, ort.Tensor>): Promise<Float32Array> {
  const wanted = Object.fromEntries(sess.inputNames.map((n) => [n, f[n]!]));
  const out = await sess.run(wanted);
  return out.last_hidden_state!.data as Float32Array;
}

async function rssChild(path: string, threads: number): Promise<void> {
  const sess = await session(path, threads);
  const biggest = SHAPES.at(-1)!;
  await run(sess, feeds(biggest.batch, biggest.seq, 7));
  process.stdout.write(JSON.stringify({ peakRssMb: peakRssMb(process.pid) }) + "\n");
}

async function timedStart(args: string[]): Promise<number> {
  const t0 = performance.now();
  const server = await startServer([...args, "--no-model-warmup"]);
  const ms = performance.now() - t0;
  await server.stop();
  return ms;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { rounds: { type: "string", default: "5" }, out: { type: "string", default: join(REPO_ROOT, "bench", "results") }, rss: { type: "boolean", default: false } }, allowPositionals: true, strict: false });
  if (values.rss) {
    const [path, threads] = process.argv.slice(process.argv.indexOf("--rss") + 1);
    return rssChild(path!, Number(threads));
  }
  const rounds = Number(values.rounds);
  const log = (m: string) => process.stderr.write(`[built-graph] ${m}\n`);
  const exportDir = ensureBenchModel({ log });
  const repo = join(REPO_ROOT, ".cache", "bench-model-safetensors");
  safetensorsRepo(exportDir, repo);
  const cache = mkdtempSync(join(tmpdir(), "infinity-bench-graphs-"));
  const config = JSON.parse(readFileSync(join(repo, "config.json"), "utf8"));
  const built = builtGraph(repo, listFolder(repo), config, cache, "bench");
  log(`graph built in ${built.ms.toFixed(0)} ms: ${built.path}`);
  const exported = join(exportDir, "onnx", "model.onnx");

  // Exactness: the same padded batches through both graphs (real positions only).
  let maxDiff = 0;
  {
    const [a, b] = [await session(exported, 2), await session(built.path, 2)];
    for (const { batch, seq } of SHAPES) {
      const f = feeds(batch, seq, 1);
      const [x, y] = [await run(a, f), await run(b, f)];
      const mask = f.attention_mask!.data as BigInt64Array;
      for (let i = 0; i < x.length; i++) if (mask[Math.floor(i / 384)] === 1n) maxDiff = Math.max(maxDiff, Math.abs(x[i]! - y[i]!));
    }
  }
  log(`max abs diff of last_hidden_state, built vs export: ${maxDiff.toExponential(2)}`);

  // Throughput: both graphs, the same batches, rounds alternating; the best round of each.
  const rows: Array<{ threads: number; batch: number; seq: number; exportTps: number; builtTps: number; ratio: number }> = [];
  for (const threads of [1, 2]) {
    const sessions = { export: await session(exported, threads), built: await session(built.path, threads) };
    for (const { batch, seq } of SHAPES) {
      const f = feeds(batch, seq, 3);
      const reps = Math.max(1, Math.round(4096 / (batch * seq)));
      const best = { export: Infinity, built: Infinity };
      for (const which of ["export", "built"] as const) await run(sessions[which], f);
      for (let r = 0; r < rounds; r++) {
        for (const which of r % 2 ? (["built", "export"] as const) : (["export", "built"] as const)) {
          const t0 = performance.now();
          for (let k = 0; k < reps; k++) await run(sessions[which], f);
          best[which] = Math.min(best[which], (performance.now() - t0) / reps);
        }
      }
      const tokens = batch * seq;
      const row = { threads, batch, seq, exportTps: (tokens / best.export) * 1000, builtTps: (tokens / best.built) * 1000, ratio: best.export / best.built };
      rows.push(row);
      log(`threads ${threads} ${batch}x${seq}: export ${row.exportTps.toFixed(0)} tok/s, built ${row.builtTps.toFixed(0)} tok/s, ${row.ratio.toFixed(3)}x`);
    }
  }

  // Start times: spawn to /health 200.
  const startCache = mkdtempSync(join(tmpdir(), "infinity-bench-start-"));
  const starts = {
    exportMs: await timedStart(["--model-id", exportDir, "--graph", "export"]),
    buildMs: await timedStart(["--model-id", repo, "--graph", "build", "--cache-dir", startCache]),
    cachedMs: await timedStart(["--model-id", repo, "--graph", "build", "--cache-dir", startCache]),
  };
  log(`start: export ${starts.exportMs.toFixed(0)} ms, built (first) ${starts.buildMs.toFixed(0)} ms, built (cached) ${starts.cachedMs.toFixed(0)} ms`);

  // Peak RSS: one session each in its own process, after the largest batch.
  const rss = async (path: string) => {
    const p = Bun.spawn([process.execPath, import.meta.path, "--rss", path, "2"], { stdout: "pipe", stderr: "inherit" });
    const line = (await new Response(p.stdout).text()).trim().split("\n").at(-1)!;
    return (JSON.parse(line) as { peakRssMb: number }).peakRssMb;
  };
  const memory = { exportMb: await rss(exported), builtMb: await rss(built.path) };
  log(`peak RSS: export ${memory.exportMb.toFixed(0)} MiB, built ${memory.builtMb.toFixed(0)} MiB`);

  // int8: MatMulNBits 8 and 4 bits against the float32 built graph.
  const texts = (await makeWorkload(repo, 256)).texts.map((t) => t.ids);
  const quantRows: Array<{ bits: number; block: number; tpsRatio: number; minCos: number; meanCos: number; batchDiff: number; dataMb: number }> = [];
  {
    const fp32 = await session(built.path, 2);
    const pooledAlone = async (sess: ort.InferenceSession) => Promise.all(texts.map(async (ids) => pool(await run(sess, tokenFeeds([ids])), [ids.length])[0]!));
    const pooledBatched = async (sess: ort.InferenceSession) => {
      const out: Float32Array[] = [];
      for (let i = 0; i < texts.length; i += 16) out.push(...pool(await run(sess, tokenFeeds(texts.slice(i, i + 16))), texts.slice(i, i + 16).map((t) => t.length)));
      return out;
    };
    const reference = await pooledAlone(fp32);
    for (const q of [{ bits: 8, block: 128 }, { bits: 8, block: 32 }, { bits: 4, block: 128 }, { bits: 4, block: 32 }] as Quantization[]) {
      const path = join(cache, `int${q.bits}-${q.block}`, "model.onnx");
      mkdirSync(join(cache, `int${q.bits}-${q.block}`), { recursive: true });
      writeGraph(architectureFor(config)!, repo, listFolder(repo), config, path, q);
      const sess = await session(path, 2);
      const alone = await pooledAlone(sess);
      const batched = await pooledBatched(sess);
      const cos = alone.map((v, i) => cosine(v, reference[i]!));
      let batchDiff = 0;
      alone.forEach((v, i) => v.forEach((x, j) => (batchDiff = Math.max(batchDiff, Math.abs(x - batched[i]![j]!)))));
      const f = feeds(32, 128, 3);
      const best = { fp32: Infinity, q: Infinity };
      for (let r = 0; r < rounds; r++) {
        for (const [which, sx] of r % 2 ? ([["q", sess], ["fp32", fp32]] as const) : ([["fp32", fp32], ["q", sess]] as const)) {
          const t0 = performance.now();
          await run(sx, f);
          best[which] = Math.min(best[which], performance.now() - t0);
        }
      }
      const row = { bits: q.bits, block: q.block, tpsRatio: best.fp32 / best.q, minCos: Math.min(...cos), meanCos: cos.reduce((a, c) => a + c, 0) / cos.length, batchDiff, dataMb: Bun.file(`${path}.data`).size / 2 ** 20 };
      quantRows.push(row);
      log(`int${q.bits}, blocks of ${q.block} (MatMulNBits): ${row.tpsRatio.toFixed(2)}x float32's throughput (32 x 128, 2 threads), cosine to float32 min ${row.minCos.toFixed(4)} mean ${row.meanCos.toFixed(4)}, alone vs batched max diff ${row.batchDiff.toExponential(1)}, weights ${row.dataMb.toFixed(0)} MiB`);
    }
  }

  const geo = (xs: number[]) => Math.exp(xs.reduce((a, x) => a + Math.log(x), 0) / xs.length);
  const bestThreads = (t: number) => rows.filter((r) => r.threads === t);
  const summary = { maxDiff, ratioGeomean: { 1: geo(bestThreads(1).map((r) => r.ratio)), 2: geo(bestThreads(2).map((r) => r.ratio)) }, starts, memory, buildMs: built.ms };
  mkdirSync(values.out as string, { recursive: true });
  writeFileSync(join(values.out as string, "built-graph.json"), JSON.stringify({ rows, quantRows, ...summary }, null, 2) + "\n");
  const md = [
    "# Built graph vs export (bge-small shape, same weights, fp32, CPU)",
    "",
    `\`bun bench/built-graph.ts\`, ${new Date().toISOString().slice(0, 10)}, best of ${rounds} alternating rounds per cell.`,
    "",
    "| threads | batch x seq | export tok/s | built tok/s | built / export |",
    "|---|---|---|---|---|",
    ...rows.map((r) => `| ${r.threads} | ${r.batch} x ${r.seq} | ${r.exportTps.toFixed(0)} | ${r.builtTps.toFixed(0)} | ${r.ratio.toFixed(2)}x |`),
    "",
    `Geometric mean built / export: ${summary.ratioGeomean[1].toFixed(2)}x at 1 thread, ${summary.ratioGeomean[2].toFixed(2)}x at 2. ` +
      `Max abs difference of last_hidden_state: ${maxDiff.toExponential(1)}.`,
    "",
    "| | export | built, first start | built, cached |",
    "|---|---|---|---|",
    `| start to /health 200 (no warm-up) | ${(starts.exportMs / 1000).toFixed(2)} s | ${(starts.buildMs / 1000).toFixed(2)} s | ${(starts.cachedMs / 1000).toFixed(2)} s |`,
    `| peak RSS, one session after 16 x 512 | ${memory.exportMb.toFixed(0)} MiB | ${memory.builtMb.toFixed(0)} MiB | |`,
    "",
    "| built graph | throughput / float32 (32 x 128, 2 threads) | cosine to float32, min / mean (256 texts) | alone vs batched, max abs diff | weights |",
    "|---|---|---|---|---|",
    `| float32 | 1.00x | 1 / 1 | | ${(Bun.file(`${built.path}.data`).size / 2 ** 20).toFixed(0)} MiB |`,
    ...quantRows.map((q) => `| ${q.bits}-bit MatMulNBits, blocks of ${q.block}${q.bits === 8 && q.block === 32 ? " (\`--dtype int8\`)" : ""} | ${q.tpsRatio.toFixed(2)}x | ${q.minCos.toFixed(4)} / ${q.meanCos.toFixed(4)} | ${q.batchDiff.toExponential(1)} | ${q.dataMb.toFixed(0)} MiB |`),
    "",
  ].join("\n");
  writeFileSync(join(values.out as string, "built-graph.md"), md);
  process.stdout.write(md);
  rmSync(cache, { recursive: true, force: true });
  rmSync(startCache, { recursive: true, force: true });
}

await main();
