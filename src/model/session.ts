// One onnxruntime session: execution provider choice with CPU fallback, thread settings, and feeding the session
// exactly the inputs it declares, in the integer type it declares. Knows nothing of requests.
import * as ort from "onnxruntime-node";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { createRequire } from "node:module";
import { log } from "../log";
import { ModelLoadError } from "../errors";

export interface SessionSettings {
  device: string;
  numThreads: number;
}

/** A padded batch as flat row-major int32 arrays; the session converts to what the model declares. */
export interface BatchTensors {
  batch: number;
  seqLen: number;
  inputIds: Int32Array;
  attentionMask: Int32Array;
  tokenTypeIds: Int32Array | null;
}

/** What the model declares about one input: its element type and its shape (symbolic axes are strings). */
export interface InputSpec {
  name: string;
  type: string;
  shape: readonly (number | string)[];
}

export interface OutputTensor {
  name: string;
  data: Float32Array;
  dims: number[];
}

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

function isInt64(meta: ort.InferenceSession.ValueMetadata | undefined): boolean {
  return !meta || !meta.isTensor || meta.type === "int64";
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
 */
export function sessionOptions(provider: string, settings: SessionSettings): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: [provider],
    intraOpNumThreads: settings.numThreads,
    // One run at a time per session: inter-op parallelism only adds contention.
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
    enableCpuMemArena: true,
    enableMemPattern: true,
    extra: { session: { force_spinning_stop: "1" } },
  };
}

export class ModelSession {
  private constructor(
    private readonly session: ort.InferenceSession,
    readonly provider: string,
    readonly inputNames: readonly string[],
    readonly outputNames: readonly string[],
    private readonly int64Inputs: ReadonlySet<string>,
    /** Declared type and shape of every input (past_key_values tensors are built from them). */
    readonly inputSpecs: readonly InputSpec[] = [],
  ) {}

  static async create(path: string, settings: SessionSettings): Promise<ModelSession> {
    const order = providerOrder(settings.device);
    let lastError: unknown;
    for (const provider of order) {
      try {
        const session = await ort.InferenceSession.create(path, sessionOptions(provider, settings));
        if (provider !== order[0]) {
          log.warn(`execution provider ${order[0]} unavailable; fell back to ${provider}`, { model: path, reason: String((lastError as Error)?.message ?? lastError) });
        }
        const int64 = new Set<string>();
        const specs: InputSpec[] = [];
        session.inputNames.forEach((name, i) => {
          const meta = session.inputMetadata?.[i];
          if (isInt64(meta)) int64.add(name);
          specs.push(meta?.isTensor ? { name, type: meta.type, shape: meta.shape.slice() } : { name, type: "int64", shape: [] });
        });
        return new ModelSession(session, provider, session.inputNames, session.outputNames, int64, specs);
      } catch (e) {
        lastError = e;
      }
    }
    throw new ModelLoadError(`onnxruntime could not load ${path}: ${(lastError as Error)?.message ?? lastError}`);
  }

  hasInput(name: string): boolean {
    return this.inputNames.includes(name);
  }

  private tensor(name: string, data: Int32Array, dims: number[]): ort.Tensor {
    if (!this.int64Inputs.has(name)) return new ort.Tensor("int32", data, dims);
    // Widen through a 32-bit view of the int64 buffer (little-endian): no BigInt per element.
    const wide = new BigInt64Array(data.length);
    const halves = new Int32Array(wide.buffer);
    for (let i = 0; i < data.length; i++) {
      const v = data[i]!;
      halves[2 * i] = v;
      halves[2 * i + 1] = v < 0 ? -1 : 0;
    }
    return new ort.Tensor("int64", wide, dims);
  }

  /** Runs one padded batch and returns the requested output as float32. */
  run(t: BatchTensors, outputName: string): Promise<OutputTensor> {
    return this.runFeeds(textFeeds(t, this.inputNames, this.inputSpecs), outputName);
  }

  /**
   * Runs with feeds the caller builds (media towers: pixel_values, input_features; the dummy inputs of a combined
   * multimodal export). Int32 feeds are widened where the model declares int64.
   */
  async runFeeds(feeds: Record<string, Feed>, outputName: string): Promise<OutputTensor> {
    const tensors: Record<string, ort.Tensor> = {};
    for (const name of this.inputNames) {
      const f = feeds[name];
      if (!f) throw new ModelLoadError(`the ONNX model declares an input "${name}" this server cannot feed`);
      tensors[name] =
        f.data instanceof Float32Array ? new ort.Tensor("float32", f.data, f.dims)
        : f.data instanceof Uint16Array ? new ort.Tensor("float16", f.data, f.dims)
        : this.tensor(name, f.data, f.dims);
    }
    const out = await this.session.run(tensors, [outputName]);
    const tensor = out[outputName]!;
    const result = { name: outputName, data: toFloat32(tensor), dims: tensor.dims.slice() };
    tensor.dispose?.();
    return result;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/**
 * One named input as the caller builds it; int32 data is widened where the model declares int64, Uint16Array
 * holds float16 halves.
 */
export type Feed = { data: Float32Array | Int32Array | Uint16Array; dims: number[] };

const PAST_INPUT = /^past_key_values\.\d+\.(key|value)$/;

/**
 * An empty cache input of a decoder export (past_key_values.{i}.key/value [batch, kv_heads, 0, head_dim]): the
 * batch axis gets the batch size, every other symbolic axis (the past length) 0, fixed axes stay as declared.
 */
export function emptyPastFeed(spec: InputSpec, batch: number): Feed {
  const dims = spec.shape.map((d, i) => (typeof d === "number" && d >= 0 ? d : i === 0 ? batch : 0));
  if (dims[0] !== batch) dims[0] = batch;
  if (!dims.includes(0)) throw new ModelLoadError(`input ${spec.name} has no past-length axis to leave empty (shape ${JSON.stringify(spec.shape)})`);
  if (spec.type === "float16") return { data: new Uint16Array(0), dims };
  if (spec.type === "float32") return { data: new Float32Array(0), dims };
  throw new ModelLoadError(`input ${spec.name} has type ${spec.type}; only float32 and float16 caches can be fed`);
}

/**
 * Position ids from the attention mask, as transformers makes them for padded batches: the running count of real
 * tokens minus one, so left-padded rows start at 0 at their first real token; padded positions get 1.
 */
export function positionIds(t: BatchTensors): Int32Array {
  const pos = new Int32Array(t.inputIds.length);
  for (let b = 0; b < t.batch; b++) {
    let n = 0;
    for (let s = 0; s < t.seqLen; s++) {
      const i = b * t.seqLen + s;
      if (t.attentionMask[i] === 1) pos[i] = n++;
      else pos[i] = 1;
    }
  }
  return pos;
}

/**
 * The token inputs among `names` (what the session declares), from one padded batch, and the inputs of decoder
 * exports: empty past_key_values built from their declared `specs`, `num_logits_to_keep` (1: the last position,
 * all a pooled or scored decoder reads). Inputs it does not know are left out, for the caller to add (a combined
 * multimodal export) or for runFeeds to report.
 */
export function textFeeds(t: BatchTensors, names: readonly string[], specs: readonly InputSpec[] = []): Record<string, Feed> {
  const dims = [t.batch, t.seqLen];
  const feeds: Record<string, Feed> = {};
  for (const name of names) {
    switch (name) {
      case "input_ids":
        feeds[name] = { data: t.inputIds, dims };
        break;
      case "attention_mask":
        feeds[name] = { data: t.attentionMask, dims };
        break;
      case "token_type_ids":
        feeds[name] = { data: t.tokenTypeIds ?? new Int32Array(t.inputIds.length), dims };
        break;
      case "position_ids":
        feeds[name] = { data: positionIds(t), dims };
        break;
      case "num_logits_to_keep":
      case "logits_to_keep":
        feeds[name] = { data: Int32Array.of(1), dims: [] };
        break;
      default: {
        const spec = PAST_INPUT.test(name) ? specs.find((s) => s.name === name) : undefined;
        if (spec) feeds[name] = emptyPastFeed(spec, t.batch);
      }
    }
  }
  return feeds;
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

export function halfToFloat(h: Uint16Array): Float32Array {
  const out = new Float32Array(h.length);
  for (let i = 0; i < h.length; i++) {
    const x = h[i]!;
    const sign = x & 0x8000 ? -1 : 1;
    const exp = (x >> 10) & 0x1f;
    const frac = x & 0x3ff;
    out[i] =
      exp === 0 ? sign * frac * 2 ** -24 : exp === 31 ? (frac ? NaN : sign * Infinity) : sign * (1 + frac / 1024) * 2 ** (exp - 15);
  }
  return out;
}
