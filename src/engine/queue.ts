// The queue of one engine: accepted inputs waiting for a batch, bounded, FIFO by arrival, with cancellation.
// The engine is its single owner; requests only add jobs and may cancel their own.
import type { TraceContext } from "../tracing";
import type { Encoded } from "../tokenize/encode";
import { Cancelled, Overloaded } from "../errors";

export class Job<R> {
  readonly results: R[];
  remaining: number;
  cancelled = false;
  readonly enqueuedAt = performance.now();
  /** When the last of its inputs started running: queue time ends there. */
  lastStartAt = 0;
  inferenceMs = 0;
  /** The last batch counted into inferenceMs (a job's inputs may share a batch). */
  lastBatch = 0;
  constructor(
    readonly size: number,
    readonly resolve: (results: R[]) => void,
    readonly reject: (e: Error) => void,
    /** The request's trace (tracing on), under which the engine records the job's queue wait and batches. */
    readonly trace: TraceContext | null = null,
  ) {
    this.results = new Array(size);
    this.remaining = size;
  }
}

/** One queued input: tokenized text (Encoded) by default, or a preprocessed media tensor. */
export interface Item<R, I = Encoded> {
  job: Job<R>;
  /** Position of this input in its request. */
  index: number;
  enc: I;
  length: number;
}

export class InputQueue<R, I = Encoded> {
  private items: Item<R, I>[] = [];

  constructor(private readonly maxSize: number) {}

  get size(): number {
    return this.items.length;
  }

  /** Accepts all inputs of a job or none of them. `lengthOf` is an input's cost in the batch token budget. */
  push(job: Job<R>, encoded: readonly I[], lengthOf: (input: I) => number = (e) => (e as Encoded).ids.length): void {
    if (this.items.length + encoded.length > this.maxSize) {
      throw new Overloaded(
        `queue full: ${this.items.length} inputs waiting (limit ${this.maxSize}); retry shortly`,
        Math.max(1, Math.ceil(this.items.length / this.maxSize)),
      );
    }
    encoded.forEach((enc, index) => this.items.push({ job, index, enc, length: lengthOf(enc) }));
  }

  /** Removes a cancelled job's waiting inputs and fails it. */
  cancel(job: Job<R>): void {
    if (job.cancelled || job.remaining === 0) return;
    job.cancelled = true;
    this.items = this.items.filter((i) => i.job !== job);
    job.reject(new Cancelled("the client disconnected; its queued inputs were dropped"));
  }

  view(): readonly Item<R, I>[] {
    return this.items;
  }

  /** Takes the items at these (ascending) indices out of the queue. */
  take(indices: readonly number[]): Item<R, I>[] {
    const taken = indices.map((i) => this.items[i]!);
    const drop = new Set(indices);
    // Chosen items come from the window at the head, so rebuilding only the head keeps this cheap.
    const headEnd = (indices[indices.length - 1] ?? -1) + 1;
    const head = this.items.slice(0, headEnd).filter((_, i) => !drop.has(i));
    this.items = head.concat(this.items.slice(headEnd));
    return taken;
  }
}
