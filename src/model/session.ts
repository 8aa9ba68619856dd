// One model session, created and run in its own inference worker (inference-worker.ts): onnxruntime-node runs
// synchronously on the calling thread, and the main thread must stay free for HTTP, tokenizing small requests and
// the other models' batches. This side builds feeds (pure functions over typed arrays), matches replies, and
// replaces a worker that dies or hangs; onnx.ts does the onnxruntime work. Knows nothing of requests.
import { log, logSettings } from "../log";
import { ModelLoadError, WorkerFailed } from "../errors";
import type { CreatedSession, InferenceReply, InferenceRequest, InjectedFault } from "./inference-protocol";
import type { Feed, InputSpec, OutputTensor, SessionHead, SessionSettings } from "./session-types";

export type { Feed, InputSpec, OutputTensor, SessionHead, SessionSettings };

/** How the main thread watches a session's worker. */
export interface WorkerOptions {
  /** Name in logs (the served model, or model/tower). */
  label?: string;
  /** A run with no answer after this long means a hung worker: it is replaced. 0: never. */
  timeoutMs?: number;
  /** Called once per worker lost (died, hung), before its replacement is started. */
  onFault?: (reason: string) => void;
}

/** A padded batch as flat row-major int32 arrays; the session converts to what the model declares. */
export interface BatchTensors {
  batch: number;
  seqLen: number;
  inputIds: Int32Array;
  attentionMask: Int32Array;
  tokenTypeIds: Int32Array | null;
  /** The one task adapter of every row (Jina v3 `task_id`); undefined for models without adapters. */
  taskId?: number;
}

/** starting: creating its session; restarting: a replacement after a fault; failed: the replacement failed too. */
export type WorkerState = "starting" | "ready" | "restarting" | "failed" | "released";

export interface WorkerStatus {
  state: WorkerState;
  /** Workers replaced after dying or hanging. */
  restarts: number;
  lastFault: string | null;
  /**
   * Resident memory this instance took, measured on the process's RSS: while its worker started and created the
   * session (weights, graph, the thread's runtime), plus what its own warm-up runs grew (its onnxruntime arena).
   */
  memoryBytes: number;
  /** Batches this instance has run (warm-up's included). */
  runs: number;
}

/** The process's resident bytes now. */
export function residentBytes(): number {
  return process.memoryUsage().rss;
}

/** Creating a session may compile kernels or engines (TensorRT) for minutes: it gets ten run timeouts. */
const CREATE_TIMEOUT_FACTOR = 10;

const WORKER_ENTRY = new URL("./inference-worker.ts", import.meta.url);

type Request = InferenceRequest extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;
type Ok = InferenceReply & { ok: true };

/** One worker and its outstanding calls. A worker that dies or hangs fails what it held and every later call. */
class WorkerLink {
  private readonly worker: Worker;
  private readonly pendingCalls = new Map<number, { resolve: (r: Ok) => void; reject: (e: Error) => void; timer: ReturnType<typeof setTimeout> | null }>();
  private nextId = 1;
  private lost: WorkerFailed | null = null;
  private lastError = "";

  constructor(private readonly onLost: (reason: string) => void) {
    this.worker = new Worker(WORKER_ENTRY.href);
    // Sessions never keep the process alive by themselves (--preload-only, tests).
    (this.worker as unknown as { unref(): void }).unref();
    this.worker.onmessage = (event: MessageEvent<InferenceReply>) => {
      const r = event.data;
      const p = this.pendingCalls.get(r.id);
      if (!p) return;
      this.pendingCalls.delete(r.id);
      if (p.timer) clearTimeout(p.timer);
      if (r.ok) p.resolve(r);
      else p.reject(r.loadError ? new ModelLoadError(r.error) : new Error(r.error));
    };
    this.worker.addEventListener("error", (event) => {
      this.lastError = (event as ErrorEvent).message ?? "";
    });
    this.worker.addEventListener("close", (event) => {
      const code = (event as unknown as { code?: number }).code;
      this.lose(`the inference worker exited (code ${code ?? "?"})${this.lastError ? `: ${this.lastError}` : ""}`);
    });
  }

  /** Calls in flight. */
  get pending(): number {
    return this.pendingCalls.size;
  }

  call(msg: Request, timeoutMs: number): Promise<Ok> {
    if (this.lost) return Promise.reject(this.lost);
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      const timer = timeoutMs > 0 ? setTimeout(() => this.lose(`the inference worker gave no answer within ${timeoutMs / 1000} s (hung)`), timeoutMs) : null;
      (timer as { unref?: () => void } | null)?.unref?.();
      this.pendingCalls.set(id, { resolve, reject, timer });
      this.worker.postMessage({ ...msg, id } as InferenceRequest);
    });
  }

  /** The worker is gone (or given up on): its calls fail, its thread is ended, the owner is told once. */
  lose(reason: string, tellOwner = true): void {
    if (this.lost) return;
    this.lost = new WorkerFailed(reason);
    for (const p of this.pendingCalls.values()) {
      if (p.timer) clearTimeout(p.timer);
      p.reject(this.lost);
    }
    this.pendingCalls.clear();
    this.worker.terminate();
    if (tellOwner) this.onLost(reason);
  }
}

/**
 * One instance of a model's session: one inference worker holding its own onnxruntime session. It runs one batch at
 * a time (onnxruntime-node runs synchronously on the worker's thread), and is replaced when its worker dies or hangs.
 */
class Instance {
  /** Started by create(), so each instance's memory is measured apart from the others'. */
  private link: WorkerLink | null = null;
  /** Settles when the current worker has its session (or failed to create it). */
  ready: Promise<void> = Promise.resolve();
  state: WorkerState = "starting";
  restarts = 0;
  /** Replacements in a row that failed to start: the backoff of retryLater. */
  private failedRetries = 0;
  lastFault: string | null = null;
  /** RSS growth while its worker started and created the session. */
  createBytes = 0;
  /** RSS growth during its warm-up runs (ModelSession.warmEach): its onnxruntime arena. */
  runBytes = 0;
  /** Runs answered. */
  runs = 0;

  constructor(public owner: ModelSession, readonly label: string) {}

  /** Starts the worker and creates the first session, measuring the RSS it adds; a failure ends the worker. */
  async create(): Promise<CreatedSession> {
    const before = residentBytes();
    const link = (this.link = this.spawn());
    try {
      const created = (await link.call(this.owner.createMessage(false), this.owner.timeoutMs * CREATE_TIMEOUT_FACTOR)).created!;
      this.state = "ready";
      this.createBytes = Math.max(0, residentBytes() - before);
      return created;
    } catch (e) {
      this.state = "released";
      link.lose("the session could not be created", false);
      throw e;
    }
  }

  /** Runs given to this instance and not yet settled (counted from the moment one is given, before any await). */
  running = 0;

  private spawn(): WorkerLink {
    const link: WorkerLink = new WorkerLink((reason) => {
      if (link === this.link) this.replace(reason);
    });
    return link;
  }

  /** A new worker with the same session; calls made meanwhile wait for it. */
  private replace(reason: string): void {
    // A worker lost while creating the first session fails create(); one lost while creating a replacement
    // leaves the instance "failed", and the next call tries once more, so a crash at load never loops.
    if (this.state === "released" || this.state === "starting" || this.state === "restarting") return;
    this.restarts++;
    this.lastFault = reason;
    this.state = "restarting";
    log.error("inference worker lost; starting a new one", { model: this.label, reason, restarts: this.restarts });
    this.owner.onFault(reason);
    const link = this.spawn();
    this.link = link;
    this.ready = link.call(this.owner.createMessage(true), this.owner.timeoutMs * CREATE_TIMEOUT_FACTOR).then(
      () => {
        if (this.link === link && this.state === "restarting") {
          this.state = "ready";
          this.failedRetries = 0;
        }
      },
      (e) => {
        if (this.link !== link || this.state === "released") return;
        this.state = "failed";
        this.lastFault = `the replacement inference worker failed: ${(e as Error).message}`;
        log.error("replacement inference worker failed", { model: this.label, error: (e as Error).message });
        this.retryLater();
      },
    );
  }

  /**
   * A failed instance tries again by itself (1 s, then doubling up to 30 s), so a model with no traffic (a readiness
   * probe took it out of the Service) still comes back; a call before that tries at once.
   */
  private retryLater(): void {
    const delay = Math.min(30_000, 1000 * 2 ** Math.min(5, this.failedRetries++));
    const timer = setTimeout(() => {
      if (this.state === "failed") this.replace(this.lastFault ?? "the inference worker failed");
    }, delay);
    (timer as { unref?: () => void }).unref?.();
  }

  get status(): WorkerStatus {
    return { state: this.state, restarts: this.restarts, lastFault: this.lastFault, memoryBytes: this.createBytes + this.runBytes, runs: this.runs };
  }

  async send(msg: Request): Promise<Ok> {
    await this.ready;
    if (this.state === "failed") {
      this.replace(this.lastFault ?? "the inference worker failed");
      await this.ready;
    }
    if (this.state === "released") throw new WorkerFailed(`model ${this.label} is shutting down`);
    if (this.state !== "ready") throw new WorkerFailed(`model ${this.label} has no working inference worker: ${this.lastFault}`);
    const reply = await this.link!.call(this.owner.withFault(msg), this.owner.timeoutMs);
    if (msg.type === "run") this.runs++;
    return reply;
  }

  /** Ends the worker. A run still in flight (shutdown timeout reached) fails with WorkerFailed. */
  async release(): Promise<void> {
    if (this.state === "released") return;
    this.state = "released";
    const link = this.link;
    if (!link) return;
    if (link.pending === 0) await link.call({ type: "release" }, 5000).catch(() => {});
    link.lose(`model ${this.label} is shutting down`, false);
  }
}

/**
 * A model's session: one or more instances (--instances), each in its own inference worker with its own
 * onnxruntime session of `numThreads` intra-op threads, so up to that many batches run at once. Each run goes to a
 * free instance. Several sessions in one worker would not run in parallel: onnxruntime-node runs a session
 * synchronously on the thread that calls it.
 */
export class ModelSession {
  provider = "";
  /** Declared type and shape of every input (past_key_values tensors are built from them). */
  inputSpecs: readonly InputSpec[] = [];
  inputNames: readonly string[] = [];
  outputNames: readonly string[] = [];
  private members: Instance[];
  /** The instance every run goes to during warmEach. */
  private pinned: Instance | null = null;
  private readonly injected: InjectedFault[] = [];
  private readonly label: string;
  readonly timeoutMs: number;

  private constructor(
    private readonly path: string | Uint8Array,
    public settings: SessionSettings,
    private readonly options: WorkerOptions,
    private readonly head: SessionHead | undefined,
    instances: number,
  ) {
    this.label = options.label ?? (typeof path === "string" ? path : "an in-memory graph");
    this.timeoutMs = options.timeoutMs ?? 0;
    const n = Math.max(1, Math.floor(instances));
    this.members = Array.from({ length: n }, (_, i) => new Instance(this, n > 1 ? `${this.label}#${i + 1}` : this.label));
  }

  /**
   * `path`: the ONNX file, or the graph's bytes; `head`: a graph one output goes through after each run;
   * `instances`: sessions (each in its own worker) running batches in parallel.
   */
  static async create(path: string | Uint8Array, settings: SessionSettings, options: WorkerOptions = {}, head?: SessionHead, instances = 1): Promise<ModelSession> {
    const s = new ModelSession(path, settings, options, head, instances);
    let created: CreatedSession;
    try {
      // One after another: each instance reads the weights once more, and a failure stops at the first.
      created = await s.members[0]!.create();
      for (const m of s.members.slice(1)) await m.create();
    } catch (e) {
      await s.release();
      throw e instanceof ModelLoadError ? e : new ModelLoadError(`onnxruntime could not load ${s.label}: ${(e as Error).message}`);
    }
    if (created.fallbackReason !== null) {
      log.warn(`execution provider for --device ${settings.device} unavailable; fell back to ${created.provider}`, { model: s.label, reason: created.fallbackReason });
    }
    s.provider = created.provider;
    s.inputSpecs = created.inputs;
    s.inputNames = created.inputs.map((i) => i.name);
    s.outputNames = created.outputNames;
    return s;
  }

  /** The message that creates this session in a worker; a replacement's may carry an injected fault. */
  createMessage(replacement: boolean): Request {
    return { type: "create", path: this.path, settings: this.settings, head: this.head, fault: replacement ? this.injected.shift() : undefined, log: logSettings() };
  }

  /** A run message with the next injected fault, if any (test-only). */
  withFault(msg: Request): Request {
    return msg.type === "run" && this.injected.length ? { ...msg, fault: this.injected.shift() } : msg;
  }

  onFault(reason: string): void {
    this.options.onFault?.(reason);
  }

  /** How many instances (workers) run this session's batches. */
  get instances(): number {
    return this.members.length;
  }

  /** The session's state: ready when every instance is; otherwise the first instance's that is not. */
  get status(): WorkerStatus {
    const down = this.members.find((m) => m.state !== "ready");
    const faulted = this.members.filter((m) => m.lastFault !== null);
    return {
      state: down?.state ?? "ready",
      restarts: this.members.reduce((s, m) => s + m.restarts, 0),
      lastFault: (down ?? faulted[faulted.length - 1])?.lastFault ?? null,
      memoryBytes: this.memoryBytes,
      runs: this.members.reduce((s, m) => s + m.runs, 0),
    };
  }

  /** What all instances took (each measured at its creation and its warm-up runs). */
  get memoryBytes(): number {
    return this.members.reduce((s, m) => s + m.createBytes + m.runBytes, 0);
  }

  /** What creating the instances took (weights, graph, workers), without their arenas. */
  get createBytes(): number {
    return this.members.reduce((s, m) => s + m.createBytes, 0);
  }

  /** The largest arena growth one instance's warm-up runs measured. */
  get maxRunBytes(): number {
    return Math.max(0, ...this.members.map((m) => m.runBytes));
  }

  /**
   * Warm-up: calls `run` (which must make exactly one run of this session, e.g. an engine submit of one batch) once
   * per instance, one after another, each run going to the next instance, and adds the RSS each run grew to that
   * instance's memory. Nothing else may run on this session meanwhile.
   */
  async warmEach(run: () => Promise<unknown>): Promise<void> {
    for (const m of this.members) {
      this.pinned = m;
      try {
        const before = residentBytes();
        await run();
        m.runBytes += Math.max(0, residentBytes() - before);
      } finally {
        this.pinned = null;
      }
    }
  }

  /** Each instance's worker state. */
  get instanceStatus(): WorkerStatus[] {
    return this.members.map((m) => m.status);
  }

  hasInput(name: string): boolean {
    return this.inputNames.includes(name);
  }

  /** Runs one padded batch and returns the requested output as float32. */
  run(t: BatchTensors, outputName: string): Promise<OutputTensor> {
    return this.runFeeds(textFeeds(t, this.inputNames, this.inputSpecs), outputName);
  }

  /** Runs one padded batch once and returns several outputs as float32 (bge-m3's dense, sparse and colbert heads). */
  runMany(t: BatchTensors, outputNames: readonly string[]): Promise<OutputTensor[]> {
    return this.runOutputs(textFeeds(t, this.inputNames, this.inputSpecs), outputNames);
  }

  /**
   * Runs with feeds the caller builds (media towers: pixel_values, input_features; the dummy inputs of a combined
   * multimodal export). Int32 feeds are widened where the model declares int64; an input the model declares and
   * the feeds lack is a ModelLoadError.
   */
  async runFeeds(feeds: Record<string, Feed>, outputName: string): Promise<OutputTensor> {
    return (await this.runOutputs(feeds, [outputName]))[0]!;
  }

  /** The instance for the next run: a ready one with nothing in flight, else the one with the least in flight. */
  private pick(): Instance {
    if (this.pinned) return this.pinned;
    let best = this.members[0]!;
    const score = (m: Instance) => m.running * 2 + (m.state === "ready" ? 0 : 1);
    for (const m of this.members) if (score(m) < score(best)) best = m;
    return best;
  }

  /**
   * Runs once and returns several outputs. A batch whose worker dies or hangs is run once more on the
   * replacement; when that fails too, the caller gets a WorkerFailed (503).
   */
  async runOutputs(feeds: Record<string, Feed>, outputNames: readonly string[]): Promise<OutputTensor[]> {
    const needed: Record<string, Feed> = {};
    for (const name of this.inputNames) if (feeds[name]) needed[name] = feeds[name]!;
    const instance = this.pick();
    instance.running++;
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          const reply = await instance.send({ type: "run", feeds: needed, outputNames: [...outputNames] });
          return reply.outputs!;
        } catch (e) {
          if (!(e instanceof WorkerFailed) || attempt >= 1 || instance.state === "released") throw e;
          log.warn("retrying a batch on the replacement inference worker", { model: instance.label });
        }
      }
    } finally {
      instance.running--;
    }
  }

  /**
   * Trades instances (and their thread setting) with another session of the same model: warm-up times a
   * candidate setting on the engines already built over this session, and keeps whichever was faster.
   */
  exchange(other: ModelSession): void {
    if (other.path !== this.path || other.head !== this.head) throw new Error("exchange: sessions of different models");
    [this.members, other.members] = [other.members, this.members];
    [this.settings, other.settings] = [other.settings, this.settings];
    for (const m of this.members) m.owner = this;
    for (const m of other.members) m.owner = other;
  }

  /**
   * Test-only fault injection: the next `times` messages that run a batch or create a replacement session make
   * the worker die or hang instead (see InjectedFault). Never reachable from a request.
   */
  injectFault(kind: InjectedFault, times = 1): void {
    for (let i = 0; i < times; i++) this.injected.push(kind);
  }

  /** Ends the workers. A run still in flight (shutdown timeout reached) fails with WorkerFailed. */
  async release(): Promise<void> {
    await Promise.all(this.members.map((m) => m.release()));
  }
}

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
/** Whether textFeeds builds an input of this name (token inputs and the inputs of decoder exports). */
export function isTextInput(name: string): boolean {
  return TEXT_INPUTS.has(name) || PAST_INPUT.test(name);
}
/** Jina v3's adapter selector: fed only to models with task adapters (ModelLayout.taskAdapters). */
export const TASK_ID_INPUT = "task_id";
const TEXT_INPUTS = new Set(["input_ids", "attention_mask", "token_type_ids", "position_ids", "num_logits_to_keep", "logits_to_keep"]);

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
      case TASK_ID_INPUT:
        if (t.taskId !== undefined) {
          // A scalar as the hub export declares it (rank 0); a [1] where an export declares one axis.
          const rank = specs.find((s) => s.name === name)?.shape.length ?? 0;
          feeds[name] = { data: Int32Array.of(t.taskId), dims: rank === 0 ? [] : [1] };
        }
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
