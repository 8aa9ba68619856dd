// Which model serves a name and a capability: keeps the configured models (read, loaded, unloaded, their state and
// memory) and answers lookups from the HTTP layer. How a model is loaded is load-model.ts with its family's module
// (families/); how it is warmed up and measured, warm-up.ts; when it loads and unloads, lifecycle.ts.
import type { ModelConfig } from "../config";
import { CapabilityMismatch, ModelLoadError, ModelNotFound, Unavailable } from "../errors";
import { log } from "../log";
import type { Metrics } from "../metrics";
import { readLayout, type ModelLayout } from "../model/layout";
import type { Task } from "../model/model-task";
import type { MediaPool } from "../media/pool";
import { resolveModel, type HubSettings } from "../model/resolve";
import { prepareGraph } from "../model/build";
import { modelCacheScope } from "../cache/scope";
import { primeRuntime } from "../model/prime";
import { returnFreedMemory } from "../model/trim";
import type { TokenizerPool } from "../tokenize/pool";
import { Lease, Lifecycle, ModelSlot, type LifecycleSettings, type ModelState } from "./lifecycle";
import { loadModel } from "./load-model";
import { enginesOf, modelError, modelState, poolingOf, type ServedModel } from "./served";
import { applyMemoryBudget, checkQuantizationRanges, warmUp } from "./warm-up";

/** Which graph runs and why, for the load log. */
function graphLabel(layout: ModelLayout): string {
  const g = layout.graph;
  if (g.source === "export") return `export (${g.reason})`;
  return `built as ${g.architecture} (${g.reason}; ${g.cached ? "from the cache" : `built in ${g.seconds.toFixed(1)} s`})`;
}

/** Route families a model can serve. */
export type Capability = "embed" | "rerank" | "classify" | "embed_sparse";

/** Model names clients send to mean "whichever is served" (infinity_client sends "default/not-specified"). */
export const UNNAMED_MODELS: readonly string[] = ["", "default/not-specified"];

/** The routes a task serves: a sparse encoder answers /embeddings (indices + values) and /embed_sparse. */
export function capabilitiesOf(task: Task): Capability[] {
  // Embedding models also rerank, by similarity: cosine (dense), dot product (sparse), MaxSim (multi-vector).
  if (task === "sparse" || task === "hybrid") return ["embed", "embed_sparse", "rerank"];
  if (task === "embed" || task === "multivector") return ["embed", "rerank"];
  return [task];
}

/** What a model embeds, for /models and error messages. */

/** The route that serves a task, for error messages. */
export const ROUTE_OF: Record<Capability, string> = { embed: "/embeddings", rerank: "/rerank", classify: "/classify", embed_sparse: "/embed_sparse" };

/** What /models and /health show of one configured model, loaded or not. */
export interface ModelEntry {
  name: string;
  config: ModelConfig;
  layout: ModelLayout;
  /** unloaded / loading / ready / broken (a failed load, a failing engine, an inference worker being replaced). */
  state: ModelState;
  /** The loaded model, or null. */
  model: ServedModel | null;
  /** Memory measured at the last load (null before the first). */
  memoryBytes: number | null;
  /** Epoch ms of the last request, or null. */
  lastUsed: number | null;
  loadSeconds: number | null;
  error: string | null;
}

export class Registry {
  private readonly slots = new Map<string, ModelSlot<ServedModel>>();
  private readonly lifecycle: Lifecycle<ServedModel>;
  private loading = true;
  /** The models each request in progress was given (by its AbortSignal), held until endRequest. */
  private readonly leases = new WeakMap<AbortSignal, Lease>();

  constructor(
    private readonly pool: TokenizerPool,
    private readonly metrics: Metrics | null,
    /** Media workers, for multimodal models; settings of their decoders. */
    private readonly mediaPool: MediaPool | null = null,
    private readonly mediaLimits: { maxImagePixels: number } = { maxImagePixels: 25_000_000 },
    lifecycle: LifecycleSettings = { maxModelsMemoryBytes: 0, loadTimeoutMs: 60_000, loadRetryMs: 10_000 },
  ) {
    this.lifecycle = new Lifecycle(
      this.slots,
      {
        build: (slot) => this.build(slot),
        isIdle: (m) => enginesOf(m).every((e) => !e.busy),
        drained: async (m) => {
          await Promise.all(enginesOf(m).map((e) => e.idle()));
        },
        release: (m) => this.release(m),
      },
      lifecycle,
      metrics,
    );
  }

  /** The loaded models. */
  list(): ServedModel[] {
    const out: ServedModel[] = [];
    for (const s of this.slots.values()) if (s.model) out.push(s.model);
    return out;
  }

  /** Every configured model with its lifecycle state, loaded or not. */
  entries(): ModelEntry[] {
    return [...this.slots.values()].map((s) => {
      const m = s.model;
      const engineState = m ? modelState(m) : null;
      const state: ModelState = s.pending ? "loading" : engineState === null ? s.state : engineState === "ready" ? "ready" : "broken";
      return {
        name: s.name,
        config: s.config,
        layout: s.layout,
        state,
        model: m,
        memoryBytes: s.measuredBytes,
        lastUsed: s.lastUsed || null,
        loadSeconds: s.loadSeconds,
        error: m ? modelError(m) : s.loadError,
      };
    });
  }

  /** Ready to serve: every loaded model is ready; on-demand models that are not loaded do not count against it. */
  get ready(): boolean {
    return !this.loading && this.slots.size > 0 && this.list().every((m) => modelState(m) === "ready");
  }

  get isLoading(): boolean {
    return this.loading;
  }

  /**
   * By served name; with one model configured, any name (or none); with several and no name (or
   * "default/not-specified"), the one model that can serve the capability, when there is exactly one.
   */
  private slotFor(name: string | undefined, capability: Capability, route: string): ModelSlot<ServedModel> {
    let slot: ModelSlot<ServedModel> | undefined;
    if (name !== undefined && UNNAMED_MODELS.includes(name)) name = undefined;
    const able = [...this.slots.values()].filter((s) => capabilitiesOf(s.layout.task).includes(capability));
    // The models made for the route come first (a reranker for /rerank, which embedders also serve by similarity).
    const made = able.filter((s) => capabilitiesOf(s.layout.task)[0] === capability);
    if (this.slots.size === 1) slot = this.slots.values().next().value;
    else if (name !== undefined) slot = this.slots.get(name);
    else if (made.length === 1) slot = made[0];
    else if (able.length === 1) slot = able[0];
    if (!slot) {
      const names = [...this.slots.keys()];
      const routes = (s: ModelSlot<ServedModel>) => capabilitiesOf(s.layout.task).map((c) => ROUTE_OF[c]).join(", ");
      throw new ModelNotFound(
        name !== undefined
          ? `model "${name}" is not served; served models: ${names.join(", ")}`
          : able.length === 0
            ? `no served model serves ${route}; served models: ${[...this.slots.values()].map((s) => `${s.name} (${routes(s)})`).join(", ")}`
            : `several models serve ${route}; name one in \`model\`: ${able.map((s) => s.name).join(", ")}`,
        "model",
      );
    }
    return slot;
  }

  /**
   * The model for a request: by served name; with one model configured, any name (or none) selects it. A model
   * that is not loaded is loaded first (concurrent requests share the load), waiting at most --model-load-timeout.
   * `request` (the request's AbortSignal) holds the model for that request until endRequest: no eviction or idle
   * unload takes it meanwhile, an admin unload waits for it, and the request's later lookups get the same model.
   */
  async lookup(name: string | undefined, capability: Capability, route: string = ROUTE_OF[capability], request?: AbortSignal): Promise<ServedModel> {
    const slot = this.slotFor(name, capability, route);
    const served = capabilitiesOf(slot.layout.task);
    if (!served.includes(capability)) {
      throw new CapabilityMismatch(
        `model "${slot.name}" is a ${slot.layout.task} model and serves ${served.map((c) => ROUTE_OF[c]).join(" and ")}, not ${route}`,
        "model",
      );
    }
    if (this.loading && !slot.model) throw new Unavailable(`model "${slot.name}" is not loaded yet: the server is starting`);
    let lease: Lease | undefined;
    if (request) {
      lease = this.leases.get(request);
      if (!lease) this.leases.set(request, (lease = new Lease()));
    }
    return this.lifecycle.acquire(slot, lease);
  }

  /** A request was answered: the models it was given may be unloaded again. */
  endRequest(request: AbortSignal): void {
    this.leases.get(request)?.release();
    this.leases.delete(request);
  }

  /** POST /models/{name}/load: loads a model (or waits for its load), bounded like a request; tried even in a backoff. */
  async loadModel(name: string): Promise<ModelEntry> {
    const slot = this.slotByName(name);
    this.lifecycle.retryNow(slot);
    await this.lifecycle.acquire(slot);
    return this.entries().find((e) => e.name === slot.name)!;
  }

  /** POST /models/{name}/unload: unloads a model after its queued work. */
  async unloadModel(name: string): Promise<ModelEntry> {
    const slot = this.slotByName(name);
    if (slot.pending) await slot.pending.catch(() => {});
    await this.lifecycle.unload(slot, "admin");
    return this.entries().find((e) => e.name === slot.name)!;
  }

  private slotByName(name: string): ModelSlot<ServedModel> {
    const slot = this.slots.get(name);
    if (!slot) throw new ModelNotFound(`model "${name}" is not served; served models: ${[...this.slots.keys()].join(", ")}`, "name");
    return slot;
  }

  /**
   * Reads every model's folder (downloads run in parallel), then loads the models marked --load startup one at a
   * time, so each model's resident memory is measured apart from the others'. On-demand models load on first use.
   */
  async loadAll(configs: readonly ModelConfig[], hub: HubSettings): Promise<void> {
    const fail = (c: ModelConfig) => (e: unknown) => {
      throw new ModelLoadError(`model ${c.servedModelName} (${c.modelId}) failed to load: ${(e as Error).message}`);
    };
    const read = await Promise.all(
      configs.map((c) =>
        resolveModel(c.modelId, c.revision, c.dtype, hub, c.graph)
          .then((r) => {
            const graph = prepareGraph(r.dir, r.files, c.modelId, c.graph, c.dtype, hub.cacheDir);
            const layout = readLayout(r.dir, r.files, c.dtype, c.poolingMethod, c.maxLength, graph);
            return { layout, scope: modelCacheScope(c.modelId, r, layout) };
          })
          .catch(fail(c)),
      ),
    );
    configs.forEach((c, i) => this.slots.set(c.servedModelName, new ModelSlot<ServedModel>(c, read[i]!.layout, read[i]!.scope)));
    // Before any model is measured: the runtime's one-time state is the process's, not the first model's.
    if (configs.length) {
      await primeRuntime(this.pool, configs[0]!.device).catch((e) => log.warn("runtime priming failed; the first model's measured memory includes the runtime's", { error: (e as Error).message }));
    }
    for (const slot of this.slots.values()) {
      if (slot.config.load === "startup") await this.lifecycle.load(slot);
      else log.info("model on demand", { model: slot.name, task: slot.layout.task, file: slot.layout.onnxFile, graph: graphLabel(slot.layout) });
    }
    this.loading = false;
    this.lifecycle.startSweeper();
  }

  /** Builds a model: sessions, tokenizer, engines, warm-up, memory budget; then starts its engines. */
  private async build(slot: ModelSlot<ServedModel>): Promise<ServedModel> {
    const c = slot.config;
    let m: ServedModel | null = null;
    try {
      m = await loadModel(c, slot.layout, slot.cacheScope, { pool: this.pool, metrics: this.metrics, mediaPool: this.mediaPool, mediaLimits: this.mediaLimits });
      await warmUp(m, (name) => this.lifecycle.roomFor(name));
      applyMemoryBudget(m);
      await checkQuantizationRanges(m);
    } catch (e) {
      if (m) await this.release(m);
      throw new ModelLoadError(`model ${c.servedModelName} (${c.modelId}) failed to load: ${(e as Error).message}`);
    }
    if (m.task === "embed" && m.layout.poolingSource === "--pooling-method" && poolingOf(m.layout, m.session).method === "sentence_embedding") {
      log.warn("--pooling-method ignored: the export pools inside its graph (sentence_embedding output)", { model: m.name, pooling_method: m.layout.pooling });
    }
    for (const e of enginesOf(m)) e.start();
    log.info("model ready", {
      model: m.name,
      task: m.task,
      file: m.layout.onnxFile,
      graph: graphLabel(m.layout),
      provider: m.provider,
      dtype: m.layout.dtype,
      pooling: m.task === "embed" ? `${poolingOf(m.layout, m.session).method} (${poolingOf(m.layout, m.session).source})` : undefined,
      max_length: m.layout.maxLength,
      batch_size: m.config.batchSize,
      max_batch_tokens: `${m.engine.batchLimits.maxBatchTokens} (${m.maxBatchTokensSource})`,
      memory_mb: Math.round(m.memoryBytes / 1048576),
      warmup_tokens_per_s: m.warmupTokensPerSecond ? Math.round(m.warmupTokensPerSecond) : undefined,
      run_overhead_tokens: `${m.engine.batchLimits.runOverheadTokens} (${m.runOverheadSource})`,
      instances: `${m.session.instances} x ${m.session.settings.numThreads} threads (${m.instancesSource})`,
      instances_mb: m.session.instanceStatus.map((w) => Math.round(w.memoryBytes / 1048576)).join(", "),
    });
    return m;
  }

  /** Stops a model's engines and frees its sessions (their inference workers end), then returns the memory. */
  private async release(m: ServedModel): Promise<void> {
    for (const e of enginesOf(m)) e.stop();
    if (m.task === "embed" && m.media) await m.media.session?.release().catch(() => {});
    await m.session.release().catch(() => {});
    m.logitsGraph?.remove();
    if (m.task === "embed") m.media?.split?.remove();
    await this.pool.unload(m.name).catch(() => {});
    returnFreedMemory();
  }

  async idle(): Promise<void> {
    await Promise.all(this.list().flatMap((m) => enginesOf(m).map((e) => e.idle())));
  }

  async close(): Promise<void> {
    this.lifecycle.stop();
    for (const m of this.list()) await this.release(m);
  }
}

