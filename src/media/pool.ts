// A pool of media worker threads: decoding and preprocessing (resize, mel spectrogram) are CPU work that must
// not hold up the HTTP event loop. Every worker holds every media tower's preprocessor; each input goes to the
// least-busy worker, so one request's inputs are preprocessed in parallel.
import { InvalidMedia } from "../errors";
import type { MediaModality, MediaRequest, MediaResponse } from "./protocol";

interface Slot {
  worker: Worker;
  pending: Map<number, { resolve: (r: MediaResponse) => void; reject: (e: Error) => void }>;
  load: number;
  /** Whether this worker ever answered: one that fails before that (missing entry, addon that will not load) is not respawned. */
  answered: boolean;
}

export interface MediaTowerSpec {
  key: string;
  modality: MediaModality;
  preprocessor: Record<string, unknown>;
  imageSize: number | null;
  maxPixels: number;
}

export class MediaPool {
  private readonly slots: Slot[] = [];
  private nextId = 1;
  private closed = false;
  private readonly loaded: Array<Extract<MediaRequest, { type: "load" }>> = [];

  constructor(readonly size: number) {}

  private spawn(): Slot {
    const worker = new Worker(new URL("./worker.ts", import.meta.url).href);
    const slot: Slot = { worker, pending: new Map(), load: 0, answered: false };
    worker.onmessage = (event: MessageEvent<MediaResponse>) => {
      slot.answered = true;
      const p = slot.pending.get(event.data.id);
      if (!p) return;
      slot.pending.delete(event.data.id);
      p.resolve(event.data);
    };
    worker.onerror = (event) => {
      // A crashed worker fails its pending inputs and is replaced; other requests are unaffected.
      const err = new Error(`media worker failed: ${(event as ErrorEvent).message ?? "unknown error"}`);
      for (const p of slot.pending.values()) p.reject(err);
      slot.pending.clear();
      if (this.closed || !slot.answered) return;
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

  private send(slot: Slot, msg: MediaRequest): Promise<MediaResponse> {
    return new Promise((resolve, reject) => {
      slot.load++;
      slot.pending.set(msg.id, {
        resolve: (r) => { slot.load--; resolve(r); },
        reject: (e) => { slot.load--; reject(e); },
      });
      slot.worker.postMessage(msg);
    });
  }

  /** Loads a tower's preprocessor into every worker; workers start with the first media model. */
  async load(spec: MediaTowerSpec): Promise<void> {
    while (this.slots.length < this.size) this.slots.push(this.spawn());
    const msg = { type: "load" as const, id: 0, ...spec };
    this.loaded.push(msg);
    const answers = await Promise.all(this.slots.map((s) => this.send(s, { ...msg, id: this.nextId++ })));
    for (const a of answers) if (!a.ok) throw new Error(`media preprocessor for ${spec.key} failed to load: ${a.error}`);
  }

  /** Preprocesses each input; a bad input fails the whole call with an error naming it (`input[i]`). */
  async process(key: string, inputs: readonly Uint8Array[], param = "input"): Promise<Float32Array[]> {
    if (this.closed) throw new Error("media pool is closed");
    if (!this.loaded.some((l) => l.key === key)) throw new Error(`media preprocessor ${key} is not loaded`);
    const one = inputs.length === 1;
    return Promise.all(
      inputs.map(async (bytes, i) => {
        const slot = this.slots.reduce((best, s) => (s.load < best.load ? s : best));
        const r = await this.send(slot, { type: "process", id: this.nextId++, key, bytes });
        const where = one && param === "input" ? "`input`" : `\`${param}[${i}]\``;
        if (!r.ok) {
          if (r.invalidInput) throw new InvalidMedia(`${where}: ${r.error}`, one ? param : `${param}[${i}]`, r.code);
          throw new Error(r.error);
        }
        return r.data!;
      }),
    );
  }

  close(): void {
    this.closed = true;
    for (const s of this.slots) s.worker.terminate();
  }
}
