// What touches onnxruntime itself: execution provider choice with CPU fallback, session options, tensors in the
// element type the model declares, float32 outputs. Runs inside a model's inference worker (inference-worker.ts);
// the rest of the server talks to it through ModelSession (session.ts) and never loads onnxruntime on the main
// thread.
import * as ort from "onnxruntime-node";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { createRequire } from "node:module";
import { ModelLoadError } from "../errors";
import type { Feed, InputSpec, OutputTensor, SessionSettings } from "./session";
import { halfToFloat } from "./half";

export { halfToFloat };

const PROVIDER_OF_DEVICE: Record<string, string> = {
  cpu: "cpu", cuda: "cuda", tensorrt: "tensorrt", coreml: "coreml", dml: "dml", webgpu: "webgpu",
};

/** Whether the CUDA provider's shared library was installed next to the addon (ONNXRUNTIME_NODE_INSTALL=cuda12). */
function cudaInstalled(): boolean {
  try {
    const req = createRequire(import.meta.url);
    const root = dirname(req.resolve("onnxruntime-node/package.json"));
    return existsSync(join(root, "bin", "napi-v6", process.platform, process.arch, "libonnxruntime_providers_cuda.so"));
  } catch {
    return false;
  }
}

/** Providers to try, in order, for a --device value. "auto" picks a GPU provider only where one is installed. */
export function providerOrder(device: string, platform = process.platform, hasCuda = cudaInstalled): string[] {
  if (device === "auto") {
    if (platform === "darwin") return ["coreml", "cpu"];
    if (platform === "win32") return ["dml", "cpu"];
    return hasCuda() ? ["cuda", "cpu"] : ["cpu"];
  }
  const p = PROVIDER_OF_DEVICE[device];
  return p && p !== "cpu" ? [p, "cpu"] : ["cpu"];
}

/**
 * What every session is created with. onnxruntime's pool threads keep spinning for ~30-40 ms after a run
 * returns; `force_spinning_stop` ends that when the run returns (they still spin between the operators of a
 * run). Measured with two models in one server and single requests alternating between them back to back (2 cores,
 * 2 threads each): p50 36.8 ms with the default, 17.2 ms with the stop (one model alone: 17.8); the idle model's
 * spinning took a core from the busy one. With one model: 32-input requests at concurrency 16 ran 7,644-7,788 and
 * 7,673-7,723 tokens/s (default, stop; three alternating rounds); at ~8 requests/s the server used 0.57 cores with
 * the default and 0.33 with the stop, at the same latency; back to back at concurrency 1, p50 was within noise
 * (17.75 / 20.01 against 18.65 / 20.25 ms). `allow_spinning=0` instead cost ~1.6 ms per request there.
 * Memory: arena on, memory pattern off (below).
 */
export function sessionOptions(provider: string, settings: SessionSettings): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: [provider],
    intraOpNumThreads: settings.numThreads,
    // One run at a time per session: inter-op parallelism only adds contention.
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
    // The arena stays: without it glibc keeps the freed activations, and a server after one request of 64 x 512
    // tokens held 352 MiB (peak 380) instead of 331 (334). The memory pattern (a planned block per input shape) goes:
    // batch shapes vary from run to run, and it held 29 MiB for nothing (331 -> 302 MiB; bench/memory.ts), while
    // 90 interleaved runs of mixed shapes took 0.99x the time without it (median pair ratio 0.994).
    enableCpuMemArena: true,
    enableMemPattern: false,
    extra: {
      session: {
        force_spinning_stop: "1",
        // onnxruntime reads external data from this folder instead of the graph file's (it refuses paths that leave
        // the graph file's folder, links included).
        ...(settings.externalDataDir ? { model_external_initializers_file_folder_path: settings.externalDataDir } : {}),
      },
    },
  };
}

export interface OrtSession {
  session: ort.InferenceSession;
  provider: string;
  /** Why the first provider of the order was not used (null when it was). */
  fallbackReason: string | null;
  inputs: InputSpec[];
}

/** The inputs as the model declares them; a non-tensor input reports its type as "unknown". */
function declaredInputs(session: ort.InferenceSession): InputSpec[] {
  return session.inputNames.map((name, i) => {
    const meta = session.inputMetadata?.[i];
    if (!meta || !meta.isTensor) return { name, type: "int64", shape: [] };
    return { name, type: String(meta.type), shape: meta.shape.slice() };
  });
}

/** Creates a session on the first provider of `device`'s order that loads; throws ModelLoadError when none does. */
export async function createOrtSession(path: string | Uint8Array, settings: SessionSettings): Promise<OrtSession> {
  const order = providerOrder(settings.device);
  let lastError: unknown;
  for (const provider of order) {
    try {
      const session = typeof path === "string" ? await ort.InferenceSession.create(path, sessionOptions(provider, settings)) : await ort.InferenceSession.create(path, sessionOptions(provider, settings));
      const fallbackReason = provider === order[0] ? null : String((lastError as Error)?.message ?? lastError);
      return { session, provider, fallbackReason, inputs: declaredInputs(session) };
    } catch (e) {
      lastError = e;
    }
  }
  throw new ModelLoadError(`onnxruntime could not load ${typeof path === "string" ? path : "the in-memory graph"}: ${(lastError as Error)?.message ?? lastError}`);
}

/** Widens int32 to int64 through a 32-bit view of the int64 buffer (little-endian): no BigInt per element. */
function widen(data: Int32Array): BigInt64Array {
  const wide = new BigInt64Array(data.length);
  const halves = new Int32Array(wide.buffer);
  for (let i = 0; i < data.length; i++) {
    const v = data[i]!;
    halves[2 * i] = v;
    halves[2 * i + 1] = v < 0 ? -1 : 0;
  }
  return wide;
}

/** One feed as a tensor of the element type the model declares: int32 is widened to int64 unless the model takes int32. */
export function toTensor(f: Feed, declared: string): ort.Tensor {
  if (f.data instanceof Float32Array) return new ort.Tensor("float32", f.data, f.dims);
  if (f.data instanceof Uint16Array) return new ort.Tensor("float16", f.data, f.dims);
  if (declared === "int32") return new ort.Tensor("int32", f.data, f.dims);
  return new ort.Tensor("int64", widen(f.data), f.dims);
}

/** Runs once with exactly the inputs the session declares and returns the named outputs as float32. */
export async function runOnce(s: OrtSession, feeds: Record<string, Feed>, outputNames: readonly string[]): Promise<OutputTensor[]> {
  const tensors: Record<string, ort.Tensor> = {};
  for (const input of s.inputs) {
    const f = feeds[input.name];
    if (!f) throw new ModelLoadError(`the ONNX model declares an input "${input.name}" this server cannot feed`);
    tensors[input.name] = toTensor(f, input.type);
  }
  const out = await s.session.run(tensors, [...outputNames]);
  return outputNames.map((name) => {
    const tensor = out[name]!;
    const result = { name, data: toFloat32(tensor), dims: tensor.dims.slice() };
    tensor.dispose?.();
    return result;
  });
}

/** float16 outputs (model_fp16.onnx) arrive as Float16Array or raw uint16 halves depending on the runtime. */
export function toFloat32(tensor: ort.Tensor): Float32Array {
  const data = tensor.data as unknown;
  if (data instanceof Float32Array) return data;
  if (data instanceof Uint16Array && tensor.type === "float16") return halfToFloat(data);
  if (ArrayBuffer.isView(data) && !(data instanceof DataView) && !(data instanceof BigInt64Array) && !(data instanceof BigUint64Array)) {
    return Float32Array.from(data as unknown as ArrayLike<number>);
  }
  throw new ModelLoadError(`unsupported output type ${tensor.type}`);
}

