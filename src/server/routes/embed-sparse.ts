// POST /embed_sparse (TEI shape): one list of {index, value} per input, indices ascending.

import type { ServedModel } from "../../engine/served";
import { router, type ServerContext } from "../context";
import { EmbedSparseRequest } from "../schemas";
import { reportHeaders, runSparse } from "../jobs";
import { checkPruning, pruneSparse } from "../../tasks/sparse";

type SparseModel = Extract<ServedModel, { task: "sparse" | "hybrid" }>;

export function embedSparseRoutes(ctx: ServerContext, fixedModel?: string) {
  return router().post(
    "/embed_sparse",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const model = (await ctx.registry.lookup(fixedModel ?? body.model ?? undefined, "embed_sparse", undefined, request.signal)) as SparseModel;
      const pruning = { topK: body.top_k, threshold: body.threshold };
      checkPruning(pruning);
      // bge-m3: its lexical weights; a SPLADE model: its vector; an inference-free model: its query or document
      // encoding by input_type. Per input through the result cache (inference-free queries run no model: not cached).
      const promptRequest = { promptName: body.prompt_name, inputType: body.input_type };
      const out = await runSparse(ctx, model, { input: body.inputs, field: "inputs", request: promptRequest }, request.signal);
      reportHeaders(ctx, set, t0, out);
      return out.vectors.map((r) => {
        const v = pruneSparse(r, pruning);
        return Array.from(v.indices, (index, i) => ({ index, value: v.values[i]! }));
      });
    },
    {
      body: EmbedSparseRequest,
      detail: { summary: "Sparse embeddings (TEI-compatible): non-zero vocabulary weights per input", tags: ["embeddings"] },
    },
  );
}
