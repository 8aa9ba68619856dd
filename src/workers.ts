// The mechanics every worker pool shares: spawning, request/reply matching by id, least-busy choice, load
// messages replayed to a replacement when a worker crashes, and shutdown. Tokenizer and media pools build on it.

interface Pending<Res> {
  resolve: (r: Res) => void;
  reject: (e: Error) => void;
}

export interface PoolSlot<Res> {
  worker: Worker;
  pending: Map<number, Pending<Res>>;
  /** Work handed to this worker and not yet answered, in the caller's units (texts, files). */
  load: number;
  /** Whether this worker ever answered: one that fails before that (missing entry, broken addon) is not respawned. */
  answered: boolean;
}

export class WorkerPool<Req extends { id: number }, Res extends { id: number }> {
  private readonly slots: Array<PoolSlot<Res>> = [];
  private nextId = 1;
  private closed = false;
  /** Messages every worker must have seen (model loads), replayed to replacements. */
  private readonly setup: Req[] = [];

  constructor(
    private readonly entry: URL,
    readonly size: number,
    private readonly name: string,
  ) {}

  get isClosed(): boolean {
    return this.closed;
  }

  /** Starts the workers (pools whose workers are only needed for some models start them lazily). */
  start(): void {
    while (this.slots.length < this.size) this.slots.push(this.spawn());
  }

  id(): number {
    return this.nextId++;
  }

  private spawn(): PoolSlot<Res> {
    const worker = new Worker(this.entry.href);
    const slot: PoolSlot<Res> = { worker, pending: new Map(), load: 0, answered: false };
    worker.onmessage = (event: MessageEvent<Res>) => {
      slot.answered = true;
      const p = slot.pending.get(event.data.id);
      if (!p) return;
      slot.pending.delete(event.data.id);
      p.resolve(event.data);
    };
    worker.onerror = (event) => {
      // A crashed worker fails its pending work and is replaced, so the pool keeps its size.
      const err = new Error(`${this.name} worker failed: ${(event as ErrorEvent).message ?? "unknown error"}`);
      for (const p of slot.pending.values()) p.reject(err);
      slot.pending.clear();
      if (this.closed || !slot.answered) return;
      const index = this.slots.indexOf(slot);
      if (index >= 0) {
        worker.terminate();
        const fresh = this.spawn();
        this.slots[index] = fresh;
        for (const msg of this.setup) void this.send(fresh, { ...msg, id: this.id() }).catch(() => {});
      }
    };
    return slot;
  }

  send(slot: PoolSlot<Res>, msg: Req, cost = 0): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      slot.load += cost;
      slot.pending.set(msg.id, {
        resolve: (r) => { slot.load -= cost; resolve(r); },
        reject: (e) => { slot.load -= cost; reject(e); },
      });
      slot.worker.postMessage(msg);
    });
  }

  /** Sends `cost` units of work to the least-busy worker. */
  sendToLeastBusy(msg: Req, cost: number): Promise<Res> {
    const slot = this.slots.reduce((best, s) => (s.load < best.load ? s : best));
    return this.send(slot, msg, cost);
  }

  /** Sends a setup message (e.g. a model load) to every worker, now and to any replacement later. */
  broadcast(msg: Req): Promise<Res[]> {
    this.start();
    this.setup.push(msg);
    return Promise.all(this.slots.map((s) => this.send(s, { ...msg, id: this.id() })));
  }

  close(): void {
    this.closed = true;
    for (const s of this.slots) s.worker.terminate();
  }
}
