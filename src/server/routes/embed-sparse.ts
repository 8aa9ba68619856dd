// POST /embed_sparse (TEI shape): one list of {index, value} per input, indices ascending.

import type { ServedModel } from "../../engine/registry";
import { router, timingHeaders, type ServerContext } from "../context";
import { EmbedSparseRequest } from "../schemas";
import { encodeInputs } from "../jobs";
import { sparseEmbeddings } from "./embeddings";

type SparseModel = Extract<ServedModel, { task: "sparse" }>;

export function embedSparseRoutes(ctx: ServerContext, fixedModel?: string) {
  return router().post(
    "/embed_sparse",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const model = (await ctx.registry.lookup(fixedModel ?? body.model ?? undefined, "embed_sparse")) as SparseModel;
      const encoded = await encodeInputs(model, body.inputs, { promptName: body.prompt_name }, "inputs", ctx);
      const { results, queueMs, inferenceMs } = await sparseEmbeddings(model, encoded, { topK: body.top_k, threshold: body.threshold }, request.signal);
      timingHeaders(set, queueMs, inferenceMs, performance.now() - t0);
      return results.map((v) => Array.from(v.indices, (index, i) => ({ index, value: v.values[i]! })));
    },
    {
      body: EmbedSparseRequest,
      detail: { summary: "Sparse embeddings (TEI-compatible): non-zero vocabulary weights per input", tags: ["embeddings"] },
    },
  );
}
