// GET /models (OpenAI list, with each model's capabilities, limits and lifecycle state) and the admin routes
// POST /models/{name}/load and /unload (behind the API key like every API route; hub names "org/name" included).

import { capabilitiesOf, type ModelEntry } from "../../engine/registry";
import { poolingOf, workersOf } from "../../engine/served";
import { router, type ServerContext } from "../context";

const started = Math.floor(Date.now() / 1000);

function describe(e: ModelEntry) {
  const m = e.model;
  const layout = e.layout;
  const task = layout.task;
  return {
    id: e.name,
    object: "model" as const,
    created: started,
    owned_by: "infinity",
    capabilities: capabilitiesOf(task),
    modalities: layout.modalities,
    task,
    backend: m ? `onnxruntime/${m.provider}` : null,
    model_id: e.config.modelId,
    dtype: layout.dtype,
    // Which graph runs: the repository's ONNX export, or one built from config.json + safetensors, and why.
    graph: { source: layout.graph.source, reason: layout.graph.reason, architecture: layout.graph.architecture, cached: layout.graph.source === "build" ? layout.graph.cached : null },
    max_length: layout.maxLength,
    // A ColBERT model's vectors have the size of its last Dense projection (known before loading for PyLate folders);
    // ColPali's, config.json's embedding_dim.
    dimensions: task === "embed" || task === "hybrid" ? layout.hiddenSize : task === "multivector" ? (layout.colpali?.dim ?? layout.dense.at(-1)?.outFeatures ?? null) : null,
    // "sentence_embedding" when the export pools inside its graph (known once loaded).
    pooling: task === "embed" ? poolingOf(layout, m?.session ?? null).method : task === "hybrid" ? layout.pooling : task === "sparse" ? `splade (${layout.sparse!.poolingStrategy}, ${layout.sparse!.activation})` : null,
    labels: layout.labels,
    batch_size: m ? m.engine.batchLimits.maxBatchSize : e.config.batchSize,
    max_batch_tokens: m ? m.engine.batchLimits.maxBatchTokens : e.config.maxBatchTokens || null,
    // --max-batch-tokens (flag), timed at warm-up (calibrated), the provider's constant (default), or lowered to
    // fit --memory-budget-mb (memory-budget).
    max_batch_tokens_source: m ? m.maxBatchTokensSource : null,
    // What one run costs beyond its tokens, as the batcher uses it: from --run-overhead-tokens, measured at
    // warm-up, or the built-in constant (no warm-up, or timings that could not be fitted).
    run_overhead_tokens: m ? (m.engine.batchLimits.runOverheadTokens ?? null) : e.config.runOverheadTokens || null,
    run_overhead_source: m ? m.runOverheadSource : null,
    // Cores other processes used while warm-up timed the budget and the overhead (null: not timed, or no /proc);
    // above max(0.25, cores / 8) those timings were not used and both sources read "default".
    calibration_other_load: m ? m.calibrationOtherLoad : null,
    // LLM rerankers whose export returns every position's full-vocabulary logits (no num_logits_to_keep input): what
    // one padded token adds to a batch's logits, which max_batch_tokens was cut for; null for every other model.
    full_logits_bytes_per_token: m?.fullLogitsBytesPerToken || null,
    // LLM rerankers: which positions the lm_head computes (the last only when the graph was rewritten at load, or
    // with num_logits_to_keep; every position, with the reason, when the graph could not be cut); null otherwise.
    llm_logits: m?.llmLogits ?? null,
    // Session instances (each an inference worker running its own batch) and each one's intra-op threads: from
    // --instances / --num-threads, or timed at warm-up (calibrated), or one instance (default).
    instances: m ? m.session.instances : e.config.instances || null,
    intra_op_threads: m ? m.session.settings.numThreads : e.config.numThreads,
    instances_source: m ? m.instancesSource : null,
    // Why: the calibration's timings and memory (tokens/s and resident bytes of both settings), or what ruled it out.
    instances_reason: m ? m.instancesReason : null,
    // Measured at the last load (kept while unloaded, so the memory budget can plan the next load).
    memory_bytes: e.memoryBytes,
    state: e.state,
    load: e.config.load,
    idle_unload_seconds: e.config.idleUnloadSeconds,
    last_used: e.lastUsed === null ? null : e.lastUsed / 1000,
    load_seconds: e.loadSeconds,
    error: e.error,
    // One inference worker per session instance (a multimodal model's media tower has its own).
    // memory_bytes: what each instance took (its session and worker, then its arena at warm-up); memory_bytes above
    // is the whole model's (all instances, tokenizer), which the memory budget counts. batches: runs it answered.
    inference_workers: m ? workersOf(m).map((w) => ({ state: w.state, restarts: w.restarts, last_fault: w.lastFault, intra_op_threads: w.threads, memory_bytes: w.memoryBytes, batches: w.runs })) : [],
  };
}

export function modelsRoutes(ctx: ServerContext) {
  const admin = { tags: ["models"] };
  return router()
    .get("/models", () => ({ object: "list" as const, data: ctx.registry.entries().map(describe) }), {
      detail: { summary: "List served models with their state (unloaded, loading, ready, broken), memory and last use", tags: ["models"] },
    })
    .post("/models/:name/load", async ({ params }) => describe(await ctx.registry.loadModel(decodeURIComponent(params.name))), {
      detail: { summary: "Load a model now (waits up to --model-load-timeout)", ...admin },
    })
    .post("/models/:name/:sub/load", async ({ params }) => describe(await ctx.registry.loadModel(`${decodeURIComponent(params.name)}/${decodeURIComponent(params.sub)}`)), {
      detail: { summary: "Load a model named org/name now", ...admin },
    })
    .post("/models/:name/unload", async ({ params }) => describe(await ctx.registry.unloadModel(decodeURIComponent(params.name))), {
      detail: { summary: "Unload a model after its queued work (the next request loads it again)", ...admin },
    })
    .post("/models/:name/:sub/unload", async ({ params }) => describe(await ctx.registry.unloadModel(`${decodeURIComponent(params.name)}/${decodeURIComponent(params.sub)}`)), {
      detail: { summary: "Unload a model named org/name", ...admin },
    });
}
