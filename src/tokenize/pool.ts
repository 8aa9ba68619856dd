// A pool of tokenizer worker threads. Every worker holds every model's tokenizer; a request's texts are cut into
// chunks spread over the least-busy workers, so one large request does not hold up small ones.
import type { Encoded } from "./encode";
import type { WorkerRequest, WorkerResponse } from "./protocol";

interface Pending {
  resolve: (r: WorkerResponse) => void;
  reject: (e: Error) => void;
}

interface Slot {
  worker: Worker;
  pending: Map<number, Pending>;
  /** Texts handed to this worker and not yet answered. */
  load: number;
}

/** Texts per worker message: small enough to spread, large enough that messaging stays cheap. */
const CHUNK = 64;

export class TokenizerPool {
  private readonly slots: Slot[] = [];
  private nextId = 1;
  private closed = false;
  private readonly loaded: Array<Extract<WorkerRequest, { type: "load" }>> = [];

  constructor(readonly size: number) {
    for (let i = 0; i < size; i++) this.slots.push(this.spawn());
  }

  private spawn(): Slot {
    const worker = new Worker(new URL("./worker.ts", import.meta.url).href);
    const slot: Slot = { worker, pending: new Map(), load: 0 };
    worker.onmessage = (event: MessageEvent<WorkerResponse>) => {
      const p = slot.pending.get(event.data.id);
      if (!p) return;
      slot.pending.delete(event.data.id);
      p.resolve(event.data);
    };
    worker.onerror = (event) => {
      // A crashed worker fails its pending work, and is replaced so the pool keeps its size.
      const err = new Error(`tokenizer worker failed: ${(event as ErrorEvent).message ?? "unknown error"}`);
      for (const p of slot.pending.values()) p.reject(err);
      slot.pending.clear();
      if (this.closed) return;
      const index = this.slots.indexOf(slot);
      if (index >= 0) {
        worker.terminate();
        const fresh = this.spawn();
        this.slots[index] = fresh;
        for (const msg of this.loaded) void this.send(fresh, { ...msg, id: this.nextId++ }).catch(() => {});
      }
    };
    return slot;
  }

  private send(slot: Slot, msg: WorkerRequest, cost = 0): Promise<WorkerResponse> {
    return new Promise<WorkerResponse>((resolve, reject) => {
      slot.load += cost;
      slot.pending.set(msg.id, {
        resolve: (r) => { slot.load -= cost; resolve(r); },
        reject: (e) => { slot.load -= cost; reject(e); },
      });
      slot.worker.postMessage(msg);
    });
  }

  /** Loads a model's tokenizer into every worker. */
  async load(key: string, tokenizerJson: unknown, tokenizerConfig: Record<string, unknown>, maxLength: number): Promise<void> {
    const msg = { type: "load" as const, id: 0, key, tokenizerJson, tokenizerConfig, maxLength };
    this.loaded.push(msg);
    const answers = await Promise.all(this.slots.map((s) => this.send(s, { ...msg, id: this.nextId++ })));
    for (const a of answers) if (!a.ok) throw new Error(`tokenizer for ${key} failed to load: ${a.error}`);
  }

  /** Encodes texts (or pairs: firsts[i] with texts[i]); results in input order. */
  async encode(key: string, texts: string[], firsts?: string[]): Promise<Encoded[]> {
    if (this.closed) throw new Error("tokenizer pool is closed");
    // Checked here rather than answered by a worker: under `bun test`, Bun 1.4.5 was seen to drop a worker's
    // small error reply that follows transferred replies, which hung the caller.
    if (!this.loaded.some((l) => l.key === key)) throw new Error(`tokenizer ${key} is not loaded`);
    const chunks: Promise<Encoded[]>[] = [];
    for (let start = 0; start < texts.length; start += CHUNK) {
      const end = Math.min(texts.length, start + CHUNK);
      const slot = this.slots.reduce((best, s) => (s.load < best.load ? s : best));
      const msg: WorkerRequest = {
        type: "encode",
        id: this.nextId++,
        key,
        texts: texts.slice(start, end),
        pairs: firsts?.slice(start, end),
      };
      chunks.push(
        this.send(slot, msg, end - start).then((r) => {
          if (!r.ok) throw new Error(r.error);
          if (!r.ids) throw new Error("tokenizer worker answered without ids");
          return unpack(r.ids, r.typeIds, r.offsets);
        }),
      );
    }
    return (await Promise.all(chunks)).flat();
  }

  close(): void {
    this.closed = true;
    for (const s of this.slots) s.worker.terminate();
  }
}

function unpack(ids: Int32Array, typeIds: Int32Array | null, offsets: Int32Array): Encoded[] {
  const out: Encoded[] = new Array(offsets.length - 1);
  for (let i = 0; i < out.length; i++) {
    const a = offsets[i]!;
    const b = offsets[i + 1]!;
    out[i] = { ids: ids.subarray(a, b), typeIds: typeIds ? typeIds.subarray(a, b) : null };
  }
  return out;
}
