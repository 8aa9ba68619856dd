// One model session, run in its own inference worker (session-worker.ts): onnxruntime-node runs synchronously on
// the calling thread, and the main thread must stay free for HTTP, tokenizing small requests and the other
// models' batches. This side builds feeds and matches replies; onnx.ts does the onnxruntime work. Knows nothing
// of requests.
import { log } from "../log";
import { ModelLoadError } from "../errors";
import type { Feed, OutputTensor, SessionSettings } from "./onnx";
import type { CreatedSession, SessionReply, SessionRequest } from "./session-protocol";

export type { Feed, OutputTensor, SessionSettings } from "./onnx";

/** A padded batch as flat row-major int32 arrays; the session converts to what the model declares. */
export interface BatchTensors {
  batch: number;
  seqLen: number;
  inputIds: Int32Array;
  attentionMask: Int32Array;
  tokenTypeIds: Int32Array | null;
}

type Request = SessionRequest extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;

/** The worker and its outstanding calls. A worker that dies fails what it held and every later call. */
class WorkerLink {
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: (r: SessionReply & { ok: true }) => void; reject: (e: Error) => void }>();
  private nextId = 1;
  private failure: Error | null = null;

  constructor() {
    this.worker = new Worker(new URL("./session-worker.ts", import.meta.url).href);
    // Sessions never keep the process alive by themselves (--preload-only, tests).
    (this.worker as unknown as { unref(): void }).unref();
    this.worker.onmessage = (event: MessageEvent<SessionReply>) => {
      const r = event.data;
      const p = this.pending.get(r.id);
      if (!p) return;
      this.pending.delete(r.id);
      if (r.ok) p.resolve(r);
      else p.reject(r.loadError ? new ModelLoadError(r.error) : new Error(r.error));
    };
    this.worker.onerror = (event) => this.fail(new Error(`inference worker failed: ${(event as ErrorEvent).message ?? "unknown error"}`));
  }

  private fail(e: Error): void {
    this.failure ??= e;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }

  call(msg: Request): Promise<SessionReply & { ok: true }> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...msg, id } as SessionRequest);
    });
  }

  terminate(): void {
    this.fail(new Error("the session was released"));
    this.worker.terminate();
  }
}

export class ModelSession {
  readonly provider: string;
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];

  private constructor(
    private readonly link: WorkerLink,
    created: CreatedSession,
  ) {
    this.provider = created.provider;
    this.inputNames = created.inputNames;
    this.outputNames = created.outputNames;
  }

  static async create(path: string, settings: SessionSettings): Promise<ModelSession> {
    const link = new WorkerLink();
    let created: CreatedSession;
    try {
      created = (await link.call({ type: "create", path, settings })).created!;
    } catch (e) {
      link.terminate();
      throw e instanceof ModelLoadError ? e : new ModelLoadError(`onnxruntime could not load ${path}: ${(e as Error).message}`);
    }
    if (created.fallbackReason !== null) {
      log.warn(`execution provider for --device ${settings.device} unavailable; fell back to ${created.provider}`, { model: path, reason: created.fallbackReason });
    }
    return new ModelSession(link, created);
  }

  hasInput(name: string): boolean {
    return this.inputNames.includes(name);
  }

  /** Runs one padded batch and returns the requested output as float32. */
  run(t: BatchTensors, outputName: string): Promise<OutputTensor> {
    return this.runFeeds(textFeeds(t, this.inputNames), outputName);
  }

  /**
   * Runs with feeds the caller builds (media towers: pixel_values, input_features; the dummy inputs of a combined
   * multimodal export). Int32 feeds are widened where the model declares int64; an input the model declares and
   * the feeds lack is a ModelLoadError.
   */
  async runFeeds(feeds: Record<string, Feed>, outputName: string): Promise<OutputTensor> {
    const needed: Record<string, Feed> = {};
    for (const name of this.inputNames) if (feeds[name]) needed[name] = feeds[name]!;
    return (await this.link.call({ type: "run", feeds: needed, outputName })).output!;
  }

  async release(): Promise<void> {
    await this.link.call({ type: "release" }).catch(() => {});
    this.link.terminate();
  }
}

/**
 * The token inputs among `names` (what the session declares), from one padded batch. Inputs it does not know
 * are left out, for the caller to add (a combined multimodal export) or for runFeeds to report.
 */
export function textFeeds(t: BatchTensors, names: readonly string[]): Record<string, Feed> {
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
      case "position_ids": {
        const pos = new Int32Array(t.inputIds.length);
        for (let b = 0; b < t.batch; b++) for (let s = 0; s < t.seqLen; s++) pos[b * t.seqLen + s] = s;
        feeds[name] = { data: pos, dims };
        break;
      }
    }
  }
  return feeds;
}
