// One model's engine: queue -> batcher -> runners. A batch is cut at the moment a runner frees, from everything
// queued by then (cutting one batch ahead chose from the few inputs that had arrived while the last batch ran, and
// padded more); building its tensors takes microseconds against a run's milliseconds. With several runners (session
// instances of one model, each in its own inference worker), each free one takes the next batch.
import { recordSpan, traceOf } from "../tracing";
import type { Encoded } from "../tokenize/encode";
import type { BatchTensors } from "../model/session";
import type { Metrics } from "../metrics";
import { InferenceFailed, InfinityError, Unavailable } from "../errors";
import { log } from "../log";
import { DEFAULT_RUN_OVERHEAD_TOKENS, selectBatch, windowFor } from "./batcher";
import { tokenBatches, type BatchInput } from "../tasks/batch-input";
import type { Runner } from "../tasks/runner";
import { InputQueue, Job, type Item } from "./queue";

export interface EngineLimits {
  maxBatchSize: number;
  maxBatchTokens: number;
  maxQueueSize: number;
  /** What one run costs beyond its tokens, in tokens (DEFAULT_RUN_OVERHEAD_TOKENS when not given). */
  runOverheadTokens?: number;
}

export interface EngineResult<R> {
  results: R[];
  queueMs: number;
  inferenceMs: number;
}

export type EngineState = "loading" | "ready" | "broken" | "stopped";

interface Batch<R, I, T> {
  items: Item<R, I>[];
  tensors: T;
  tokens: number;
  /** Rows x padded length: the share of the token budget the batch takes. */
  padded: number;
  /** When the batch was cut from the queue (its tensors are assembled after). */
  cutAt: number;
}

/** I: what the queue holds (tokenized text by default); T: the tensors a batch becomes for the runner. */
export class Engine<R, I = Encoded, T = BatchTensors> {
  state: EngineState = "loading";
  lastError: string | null = null;
  private readonly queue: InputQueue<R, I>;
  private readonly input: BatchInput<I, T>;
  private runners: readonly Runner<R, T>[];
  /** Runners not running a batch now (all of them when idle). */
  private free: Runner<R, T>[];
  private consecutiveFailures = 0;
  private idleWaiters: Array<() => void> = [];
  private batchCount = 0;

  constructor(
    readonly name: string,
    /** One runner, or one per session instance: each runs one batch at a time. */
    runner: Runner<R, T> | readonly Runner<R, T>[],
    /** A pad id (text: token batches) or how this engine's inputs are batched. */
    padIdOrInput: number | BatchInput<I, T>,
    private limits: EngineLimits,
    private readonly metrics: Metrics | null = null,
  ) {
    this.input = typeof padIdOrInput === "number" ? (tokenBatches(padIdOrInput) as unknown as BatchInput<I, T>) : padIdOrInput;
    this.queue = new InputQueue<R, I>(limits.maxQueueSize);
    this.runners = Array.isArray(runner) ? [...runner] : [runner as Runner<R, T>];
    if (this.runners.length === 0) throw new Error(`engine ${name} needs a runner`);
    this.free = [...this.runners];
    metrics?.queueDepth.set({ model: name }, () => this.queue.size);
  }

  /** Work queued or running (the lifecycle unloads only idle models). */
  get busy(): boolean {
    return this.running || this.queued > 0;
  }

  /** A batch is running on some runner. */
  private get running(): boolean {
    return this.free.length < this.runners.length;
  }

  /** How many runners (session instances) this engine dispatches to. */
  get instances(): number {
    return this.runners.length;
  }

  /**
   * Dispatches to n copies of its first runner (a session whose instance count changed at warm-up: the runner
   * calls the session, which picks a free instance). Only while no batch runs.
   */
  setInstances(n: number): void {
    if (this.running) throw new Error(`engine ${this.name}: instances change while a batch runs`);
    this.runners = Array.from({ length: Math.max(1, n) }, () => this.runners[0]!);
    this.free = [...this.runners];
  }

  get queued(): number {
    return this.queue.size;
  }

  get batchLimits(): EngineLimits {
    return this.limits;
  }

  /** Lowers the token budget (memory budget), never below one full-length input. */
  setMaxBatchTokens(tokens: number): void {
    this.limits = { ...this.limits, maxBatchTokens: Math.max(1, Math.floor(tokens)) };
  }

  /** Sets the run overhead the batcher weighs padding against (warm-up calibration). */
  setRunOverheadTokens(tokens: number): void {
    this.limits = { ...this.limits, runOverheadTokens: Math.max(0, Math.round(tokens)) };
  }

  /** Queues already tokenized inputs; resolves with one result per input, in order. */
  submit(encoded: readonly I[], signal?: AbortSignal): Promise<EngineResult<R>> {
    if (this.state === "stopped") return Promise.reject(new Unavailable(`model ${this.name} is shutting down`));
    if (this.state === "loading") return Promise.reject(new Unavailable(`model ${this.name} is still loading`));
    if (encoded.length === 0) return Promise.resolve({ results: [], queueMs: 0, inferenceMs: 0 });
    return new Promise<EngineResult<R>>((resolve, reject) => {
      const job: Job<R> = new Job<R>(
        encoded.length,
        (results) => resolve({ results, queueMs: job.lastStartAt - job.enqueuedAt, inferenceMs: job.inferenceMs }),
        reject,
        traceOf(signal),
      );
      try {
        this.queue.push(job, encoded, this.input.lengthOf);
      } catch (e) {
        this.metrics?.rejected.inc({ model: this.name }, encoded.length);
        reject(e);
        return;
      }
      if (signal) {
        if (signal.aborted) this.queue.cancel(job);
        else signal.addEventListener("abort", () => this.queue.cancel(job), { once: true });
      }
      this.pump();
    });
  }

  /** Resolves when nothing is queued or running (graceful shutdown). */
  idle(): Promise<void> {
    if (!this.running && this.queued === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  private cut(): Batch<R, I, T> | null {
    const all = this.queue.view();
    if (all.length === 0) return null;
    // The batch takes the oldest input's group only; positions map back to queue indices.
    const groupOf = this.input.groupOf;
    let positions: number[] | null = null;
    let view = all;
    if (groupOf) {
      const group = groupOf(all[0]!.enc);
      if (all.some((i) => groupOf(i.enc) !== group)) {
        positions = [];
        all.forEach((item, i) => groupOf(item.enc) === group && positions!.push(i));
        view = positions.map((i) => all[i]!);
      }
    }
    const chosen = selectBatch(view, {
      maxBatchSize: this.limits.maxBatchSize,
      maxBatchTokens: this.limits.maxBatchTokens,
      window: windowFor(this.limits.maxBatchSize),
      runOverheadTokens: this.limits.runOverheadTokens ?? DEFAULT_RUN_OVERHEAD_TOKENS,
    });
    const items = this.queue.take(positions ? chosen.map((i) => positions![i]!) : chosen);
    const cutAt = performance.now();
    const { tensors, padded } = this.input.assemble(items.map((i) => i.enc));
    let tokens = 0;
    for (const i of items) tokens += i.length;
    return { items, tensors, tokens, padded, cutAt };
  }

  private pump(): void {
    // A broken engine keeps trying: a success makes it ready again.
    if (this.state !== "ready" && this.state !== "broken") return;
    while (this.free.length > 0) {
      const batch = this.cut();
      if (!batch) break;
      const runner = this.free.shift()!;
      void this.execute(batch, runner).finally(() => {
        this.free.push(runner);
        this.pump();
      });
    }
    this.notifyIdle();
  }

  private notifyIdle(): void {
    if (this.running || this.queued > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  private async execute(batch: Batch<R, I, T>, runner: Runner<R, T>): Promise<void> {
    const start = performance.now();
    const batchId = ++this.batchCount;
    for (const item of batch.items) item.job.lastStartAt = Math.max(item.job.lastStartAt, start);
    for (const item of batch.items) this.metrics?.queueSeconds.observe({ model: this.name }, (start - item.job.enqueuedAt) / 1000);
    let results: R[];
    try {
      results = await runner.run(batch.tensors);
      this.traceBatch(batch, batchId, start);
      this.consecutiveFailures = 0;
      if (this.state === "broken") this.state = "ready";
    } catch (e) {
      const message = (e as Error).message ?? String(e);
      this.lastError = message;
      log.error("inference failed", { model: this.name, batch: batch.items.length, error: message });
      if (++this.consecutiveFailures >= 3) this.state = "broken";
      // A typed error (a lost inference worker: 503) reaches the client as it is; anything else is a failed run.
      const error = e instanceof InfinityError ? e : new InferenceFailed(`inference failed: ${message}`);
      this.traceBatch(batch, batchId, start, error);
      this.failJobs(batch.items, error);
      return;
    }
    const ms = performance.now() - start;
    const labels = { model: this.name };
    this.metrics?.inferenceSeconds.observe(labels, ms / 1000);
    this.metrics?.batchSize.observe(labels, batch.items.length);
    this.metrics?.batchTokens.observe(labels, batch.padded);
    this.metrics?.tokens.inc(labels, batch.tokens);
    batch.items.forEach((item, row) => {
      const job = item.job;
      if (job.cancelled) return;
      job.results[item.index] = results[row]!;
      if (job.lastBatch !== batchId) {
        job.lastBatch = batchId;
        job.inferenceMs += ms;
      }
      if (--job.remaining === 0) job.resolve(job.results);
    });
  }

  /**
   * Under each traced request with inputs in this batch: its queue wait (enqueued -> the batch started), and the batch
   * (size, tokens, padding) with the inference call under it. One batch serves several requests: each gets its own.
   */
  private traceBatch(batch: Batch<R, I, T>, batchId: number, start: number, error?: Error): void {
    let jobs: Set<Job<R>> | null = null;
    for (const item of batch.items) if (item.job.trace) (jobs ??= new Set()).add(item.job);
    if (!jobs) return;
    const end = performance.now();
    // The batch from its cut (tensor assembly included) to its results; the inference call within it.
    const attributes = {
      "infinity.model": this.name,
      "infinity.batch.id": batchId,
      "infinity.batch.size": batch.items.length,
      "infinity.batch.tokens": batch.tokens,
      "infinity.batch.padded_tokens": batch.padded,
      "infinity.batch.padding_fraction": batch.padded > 0 ? 1 - batch.tokens / batch.padded : 0,
    };
    for (const job of jobs) {
      const mine = batch.items.filter((i) => i.job === job).length;
      recordSpan(job.trace!, "queue wait", job.enqueuedAt, batch.cutAt, { "infinity.model": this.name, "infinity.inputs": mine });
      const inBatch = recordSpan(job.trace!, "batch", batch.cutAt, end, { ...attributes, "infinity.batch.inputs_of_request": mine }, error);
      if (inBatch) recordSpan(inBatch, "inference", start, end, { "infinity.model": this.name }, error);
    }
  }

  /** Marks the engine ready to run batches. */
  start(): void {
    this.state = "ready";
    this.pump();
  }

  /** Stops taking work; inputs still queued (the shutdown timeout passed) are answered with 503, never dropped. */
  stop(): void {
    this.state = "stopped";
    const waiting = [...this.queue.view()];
    this.queue.take(this.queue.view().map((_, i) => i));
    this.failJobs(waiting, new Unavailable(`model ${this.name} stopped before these inputs ran (shutdown timeout)`));
  }

  private failJobs(items: readonly Item<R, I>[], error: Error): void {
    const jobs = new Set<Job<R>>();
    for (const item of items) jobs.add(item.job);
    for (const job of jobs) {
      if (!job.cancelled && job.remaining > 0) {
        job.cancelled = true;
        job.reject(error);
      }
    }
  }
}
