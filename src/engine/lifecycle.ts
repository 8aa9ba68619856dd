// Model lifecycle: which models are loaded, loading them when asked (concurrent callers share one load), unloading
// idle ones, and keeping the loaded ones within --max-models-memory-mb by unloading the least recently used idle
// models first. A failed load is not tried again before a backoff (requests meanwhile get 503 at once). A request
// holds a lease on the model it was given until it is answered: no eviction or idle unload takes a leased model,
// and an admin unload waits for its leases. The registry supplies how a model is built and released; routes never
// see these states change.
import type { ModelConfig } from "../config";
import { InfinityError, MemoryBudgetExceeded, ModelLoadFailed, ModelLoading } from "../errors";
import { log } from "../log";
import type { Metrics } from "../metrics";
import type { ModelLayout } from "../model/layout";

export type ModelState = "unloaded" | "loading" | "ready" | "broken";

/** A model that was used this recently is not evicted (a margin on top of leases: a burst may come back to it). */
export const EVICTION_GRACE_MS = 250;
/** The longest wait between tries of a model whose loads keep failing (unless the set backoff is longer). */
export const MAX_LOAD_RETRY_MS = 300_000;
/** How often idle models are looked for. */
const SWEEP_MS = 500;
/** How long an unload waits for the model's requests and queued work before releasing it anyway. */
const DRAIN_MS = 30_000;

/** A loaded model, as far as the lifecycle is concerned. */
export interface Loaded {
  /** Resident memory measured at load. */
  memoryBytes: number;
}

/** How the registry builds, watches and frees its models. */
export interface ModelOps<M extends Loaded> {
  build(slot: ModelSlot<M>): Promise<M>;
  /** No queued or running work. */
  isIdle(m: M): boolean;
  /** Resolves when no work is queued or running. */
  drained(m: M): Promise<void>;
  release(m: M): Promise<void>;
}

/** One configured model: its settings, what is known before loading, and its loaded form when there is one. */
export class ModelSlot<M extends Loaded = Loaded> {
  model: M | null = null;
  /** The last load failed (state "broken" while unloaded). */
  loadError: string | null = null;
  /** Epoch ms of the last request (0: none yet). */
  lastUsed = 0;
  /** Memory measured at the last load; null before the first. */
  measuredBytes: number | null = null;
  loadSeconds: number | null = null;
  pending: Promise<M> | null = null;
  /** An unload is queued or running: requests load the model again behind it rather than use it. */
  unloading = 0;
  loadStartedAt = 0;
  /** Loads that failed in a row (0 after a success). */
  failures = 0;
  /** Epoch ms before which a failed model is not loaded again (requests get 503 with Retry-After). */
  retryAt = 0;
  /** Requests given this model and not answered yet (see Lease). */
  leases = 0;
  private leaseWaiters: Array<() => void> = [];

  constructor(
    readonly config: ModelConfig,
    readonly layout: ModelLayout,
    readonly cacheScope: string,
  ) {}

  get name(): string {
    return this.config.servedModelName;
  }

  /** Lifecycle state; a loaded model's own health (engine broken, worker restarting) is the registry's to add. */
  get state(): ModelState {
    if (this.pending) return "loading";
    if (this.model) return "ready";
    return this.loadError ? "broken" : "unloaded";
  }

  /** A request was given the model: until it ends, no eviction or idle unload takes the model. */
  takeLease(): void {
    this.leases++;
  }

  endLease(): void {
    this.leases--;
    this.lastUsed = Date.now();
    if (this.leases === 0) for (const wake of this.leaseWaiters.splice(0)) wake();
  }

  /** Resolves when no request holds the model. */
  leasesEnded(): Promise<void> {
    return this.leases === 0 ? Promise.resolve() : new Promise((resolve) => this.leaseWaiters.push(resolve));
  }

  /** What loading it will take: the last measurement, else the weights on disk once per --instances (a floor). */
  get expectedBytes(): number {
    return this.measuredBytes ?? this.layout.weightBytes * Math.max(1, this.config.instances || 1);
  }
}

/**
 * The models one request was given, each held until the request is answered (release). A request that looks a
 * model up again gets the model it already holds, even while an unload waits for it.
 */
export class Lease {
  private readonly held = new Map<ModelSlot<Loaded>, Loaded>();

  heldModel<M extends Loaded>(slot: ModelSlot<M>): M | undefined {
    return this.held.get(slot) as M | undefined;
  }

  hold<M extends Loaded>(slot: ModelSlot<M>, model: M): void {
    if (this.held.has(slot)) return;
    this.held.set(slot, model);
    slot.takeLease();
  }

  release(): void {
    for (const slot of this.held.keys()) slot.endLease();
    this.held.clear();
  }
}

export interface LifecycleSettings {
  /** 0: unlimited. */
  maxModelsMemoryBytes: number;
  loadTimeoutMs: number;
  /** After a failed load, how long until the next try (doubling with each further failure); 0: every request tries. */
  loadRetryMs: number;
}

const mb = (bytes: number) => Math.round(bytes / 1048576);

export class Lifecycle<M extends Loaded> {
  /** Loads and unloads run one at a time: each load's memory is measured apart, and budget decisions see settled state. */
  private chain: Promise<unknown> = Promise.resolve();
  private sweeper: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly slots: ReadonlyMap<string, ModelSlot<M>>,
    private readonly ops: ModelOps<M>,
    private readonly settings: LifecycleSettings,
    private readonly metrics: Metrics | null,
  ) {}

  private serial<T>(op: () => Promise<T>): Promise<T> {
    const next = this.chain.then(op, op);
    this.chain = next.catch(() => {});
    return next;
  }

  /**
   * The model for a request: loaded first when needed, waiting at most the load timeout (then 503 + Retry-After).
   * With a lease, the model is held for the request from the moment it is handed over (same tick as the check).
   */
  async acquire(slot: ModelSlot<M>, lease?: Lease): Promise<M> {
    const deadline = Date.now() + this.settings.loadTimeoutMs;
    const held = lease?.heldModel(slot);
    if (held) return held;
    for (;;) {
      slot.lastUsed = Date.now();
      if (slot.model && !slot.pending && !slot.unloading) {
        lease?.hold(slot, slot.model);
        return slot.model;
      }
      this.refuseDuringBackoff(slot);
      // Loaded, or unloaded again before this request got it (then loaded again): checked at the top.
      await this.awaitLoad(slot, deadline);
    }
  }

  /** Within a failed model's backoff: 503 with the load's error and when it will be tried again. */
  private refuseDuringBackoff(slot: ModelSlot<M>): void {
    const left = slot.retryAt - Date.now();
    if (slot.model || slot.pending || left <= 0) return;
    const seconds = Math.ceil(left / 1000);
    throw new ModelLoadFailed(
      `model "${slot.name}" failed to load (${slot.failures} time${slot.failures === 1 ? "" : "s"} in a row): ${slot.loadError}; ` +
        `it is tried again in ${seconds} s (--model-load-retry-seconds), or now by POST /models/${slot.name}/load`,
      seconds,
    );
  }

  private async awaitLoad(slot: ModelSlot<M>, deadline: number): Promise<void> {
    const loading = this.load(slot);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const waited = Math.round((Date.now() - (slot.loadStartedAt || Date.now())) / 1000);
        const retry = Math.max(1, Math.ceil(slot.loadSeconds ?? 5));
        reject(new ModelLoading(`model "${slot.name}" is still loading (${waited} s so far); retry in a few seconds`, retry));
      }, Math.max(0, deadline - Date.now()));
    });
    try {
      await Promise.race([loading, timeout]);
    } catch (e) {
      if (e instanceof InfinityError) throw e;
      // The load itself failed (its error is the slot's): 503 with the backoff as Retry-After.
      const seconds = Math.max(1, Math.ceil((slot.retryAt - Date.now()) / 1000));
      throw new ModelLoadFailed(`model "${slot.name}" failed to load: ${(e as Error).message ?? String(e)}`, seconds);
    } finally {
      clearTimeout(timer);
    }
  }

  /** POST /models/{name}/load: an operator's try is not held back by the backoff. */
  retryNow(slot: ModelSlot<M>): void {
    slot.retryAt = 0;
  }

  /** How long after the n-th failure in a row the next load is tried: the set backoff, doubling, capped. */
  private backoffMs(failures: number): number {
    const base = this.settings.loadRetryMs;
    return Math.min(base * 2 ** Math.min(failures - 1, 30), Math.max(base, MAX_LOAD_RETRY_MS));
  }

  /** Loads a model unless it is loaded; concurrent callers share one load. */
  load(slot: ModelSlot<M>): Promise<M> {
    if (slot.pending) return slot.pending;
    if (slot.model && !slot.unloading) return Promise.resolve(slot.model);
    const pending = this.serial(async () => {
      if (slot.model) return slot.model;
      await this.makeRoom(slot);
      slot.loadStartedAt = Date.now();
      const t0 = performance.now();
      let m: M;
      try {
        m = await this.ops.build(slot);
      } catch (e) {
        slot.loadError = (e as Error).message ?? String(e);
        slot.failures++;
        slot.retryAt = Date.now() + this.backoffMs(slot.failures);
        this.metrics?.modelLoadFailures.inc({ model: slot.name });
        log.warn("model load failed", { model: slot.name, failures: slot.failures, retry_in_s: Math.ceil((slot.retryAt - Date.now()) / 1000), error: slot.loadError });
        throw e;
      }
      const seconds = (performance.now() - t0) / 1000;
      slot.model = m;
      slot.loadError = null;
      slot.failures = 0;
      slot.retryAt = 0;
      slot.loadSeconds = seconds;
      slot.measuredBytes = m.memoryBytes;
      this.metrics?.modelLoads.inc({ model: slot.name });
      this.metrics?.modelLoadSeconds.observe({ model: slot.name }, seconds);
      this.metrics?.memoryBytes.set({ model: slot.name }, m.memoryBytes);
      await this.trimAfterLoad(slot);
      return m;
    });
    slot.pending = pending;
    const clear = () => {
      if (slot.pending === pending) slot.pending = null;
    };
    pending.then(clear, clear);
    return pending;
  }

  /** Unloads a model (after its queued work, bounded), freeing its sessions and inference workers. */
  unload(slot: ModelSlot<M>, reason: "admin" | "idle" | "evicted"): Promise<void> {
    // Idle unloads give way to requests that arrive before they run; others hold new requests back at once.
    if (reason !== "idle") slot.unloading++;
    return this.serial(async () => {
      await this.unloadNow(slot, reason);
    }).finally(() => {
      if (reason !== "idle") slot.unloading--;
    });
  }

  /** Unloads now unless the reason no longer holds; answers whether the model was unloaded. */
  private async unloadNow(slot: ModelSlot<M>, reason: "admin" | "idle" | "evicted", forModel?: string): Promise<boolean> {
    const m = slot.model;
    if (!m) return false;
    // An idle unload queued behind other work is dropped when a request came meanwhile.
    if (reason === "idle" && (slot.leases > 0 || !this.ops.isIdle(m) || Date.now() - slot.lastUsed < slot.config.idleUnloadSeconds * 1000)) return false;
    // A victim chosen for eviction that a request took since (evictions run one after another) stays.
    if (reason === "evicted" && (slot.leases > 0 || !this.ops.isIdle(m))) return false;
    // From here requests start a new load, which waits behind this unload.
    slot.model = null;
    // An admin unload lets the requests that hold the model finish with it (bounded), then its queued work.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const drained = (async () => {
      await slot.leasesEnded();
      await this.ops.drained(m);
    })();
    await Promise.race([drained, new Promise<void>((r) => (timer = setTimeout(r, DRAIN_MS)))]);
    clearTimeout(timer);
    await this.ops.release(m).catch((e) => log.warn("releasing a model failed", { model: slot.name, error: (e as Error).message }));
    this.metrics?.modelUnloads.inc({ model: slot.name, reason });
    if (reason === "evicted") this.metrics?.modelEvictions.inc({ model: slot.name });
    this.metrics?.memoryBytes.set({ model: slot.name }, 0);
    log.info("model unloaded", { model: slot.name, reason, memory_mb: mb(m.memoryBytes), ...(forModel ? { for: forModel } : {}) });
    return true;
  }

  /** What --max-models-memory-mb leaves the named model beside the other loaded models; Infinity without a budget. */
  roomFor(name: string): number {
    const budget = this.settings.maxModelsMemoryBytes;
    if (!budget) return Infinity;
    return budget - this.loadedBytes(this.slots.get(name));
  }

  private loadedBytes(except?: ModelSlot<M>): number {
    let total = 0;
    for (const s of this.slots.values()) if (s !== except && s.model) total += s.model.memoryBytes;
    return total;
  }

  /** Idle loaded models no request holds, least recently used first. */
  private evictable(except: ModelSlot<M>): ModelSlot<M>[] {
    const now = Date.now();
    return [...this.slots.values()]
      .filter((s) => s !== except && s.model && !s.pending && s.leases === 0 && this.ops.isIdle(s.model) && now - s.lastUsed >= EVICTION_GRACE_MS)
      .sort((a, b) => a.lastUsed - b.lastUsed);
  }

  private budgetMessage(slot: ModelSlot<M>, need: number): string {
    const loaded = [...this.slots.values()].filter((s) => s.model);
    const list = loaded.length
      ? loaded
          .map((s) => `${s.name} (${mb(s.model!.memoryBytes)} MB, ${s.leases > 0 ? `in use by ${s.leases} request${s.leases === 1 ? "" : "s"}` : this.ops.isIdle(s.model!) ? "used just now" : "busy"})`)
          .join(", ")
      : "nothing";
    return (
      `loading model "${slot.name}" needs about ${mb(need)} MB, over --max-models-memory-mb ${mb(this.settings.maxModelsMemoryBytes)} ` +
      `with ${mb(this.loadedBytes())} MB loaded: ${list}; none of them can be unloaded now`
    );
  }

  /** Unloads least recently used idle models until the slot's expected memory fits, or refuses with 503. */
  private async makeRoom(slot: ModelSlot<M>): Promise<void> {
    const budget = this.settings.maxModelsMemoryBytes;
    if (!budget) return;
    const need = slot.expectedBytes;
    if (need > budget) {
      throw new MemoryBudgetExceeded(`model "${slot.name}" needs about ${mb(need)} MB, more than --max-models-memory-mb ${mb(budget)} allows`, 60);
    }
    const victims = this.evictable(slot);
    let freeable = 0;
    const chosen: ModelSlot<M>[] = [];
    for (const v of victims) {
      if (this.loadedBytes() - freeable + need <= budget) break;
      chosen.push(v);
      freeable += v.model!.memoryBytes;
    }
    if (this.loadedBytes() - freeable + need > budget) throw new MemoryBudgetExceeded(this.budgetMessage(slot, need), 1);
    // The victims are idle, so they release at once; awaited, so the next load measures its own memory. One that a
    // request took meanwhile stays (unloadNow checks again), and then the room may not be there.
    for (const v of chosen) await this.unloadNow(v, "evicted", slot.name);
    if (this.loadedBytes() + need > budget) throw new MemoryBudgetExceeded(this.budgetMessage(slot, need), 1);
  }

  /** A first load can measure more than its weights: unload more idle models if the budget is now exceeded. */
  private async trimAfterLoad(slot: ModelSlot<M>): Promise<void> {
    const budget = this.settings.maxModelsMemoryBytes;
    if (!budget) return;
    for (const v of this.evictable(slot)) {
      if (this.loadedBytes() <= budget) break;
      await this.unloadNow(v, "evicted");
    }
    if (this.loadedBytes() > budget) {
      log.warn("loaded models exceed --max-models-memory-mb (the last load measured more than expected)", {
        model: slot.name,
        loaded_mb: mb(this.loadedBytes()),
        budget_mb: mb(budget),
      });
    }
  }

  /** Starts unloading models idle for their --idle-unload-seconds. */
  startSweeper(): void {
    if (this.sweeper || ![...this.slots.values()].some((s) => s.config.idleUnloadSeconds > 0)) return;
    this.sweeper = setInterval(() => {
      const now = Date.now();
      for (const s of this.slots.values()) {
        const idle = s.config.idleUnloadSeconds;
        if (idle > 0 && s.model && !s.pending && s.leases === 0 && this.ops.isIdle(s.model) && now - s.lastUsed >= idle * 1000) void this.unload(s, "idle");
      }
    }, SWEEP_MS);
    this.sweeper.unref?.();
  }

  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
  }
}
