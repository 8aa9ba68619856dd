// GET /models (OpenAI list, with each model's capabilities and limits).

import { capabilitiesOf, modalitiesOf, modelState, workersOf } from "../../engine/registry";
import { router, type ServerContext } from "../context";

const started = Math.floor(Date.now() / 1000);

export function modelsRoutes(ctx: ServerContext) {
  return router().get(
    "/models",
    () => ({
      object: "list" as const,
      data: ctx.registry.list().map((m) => ({
        id: m.name,
        object: "model" as const,
        created: started,
        owned_by: "infinity",
        capabilities: capabilitiesOf(m.task),
        modalities: modalitiesOf(m),
        task: m.task,
        backend: `onnxruntime/${m.provider}`,
        model_id: m.config.modelId,
        dtype: m.layout.dtype,
        max_length: m.layout.maxLength,
        dimensions: m.task === "embed" ? m.layout.hiddenSize : null,
        pooling: m.task === "embed" ? m.layout.pooling : m.task === "sparse" ? `splade (${m.layout.sparse!.poolingStrategy}, ${m.layout.sparse!.activation})` : null,
        labels: m.layout.labels,
        batch_size: m.engine.batchLimits.maxBatchSize,
        max_batch_tokens: m.engine.batchLimits.maxBatchTokens,
        memory_bytes: m.memoryBytes,
        state: modelState(m),
        // One inference worker per session (a multimodal model's media tower has its own).
        inference_workers: workersOf(m).map((w) => ({ state: w.state, restarts: w.restarts, last_fault: w.lastFault, intra_op_threads: w.threads })),
      })),
    }),
    { detail: { summary: "List served models", tags: ["models"] } },
  );
}
