// POST /embed_sparse (TEI shape): one list of {index, value} per input, indices ascending.

import type { ServedModel } from "../../engine/registry";
import { router, timingHeaders, type ServerContext } from "../context";
import { EmbedSparseRequest } from "../schemas";
import { encodeInputs, sparseVectors } from "../jobs";
import { hybridEmbeddings } from "./embeddings";
import { checkPruning, pruneSparse } from "../../tasks/sparse";

type SparseModel = Extract<ServedModel, { task: "sparse" | "hybrid" }>;

export function embedSparseRoutes(ctx: ServerContext, fixedModel?: string) {
  return router().post(
    "/embed_sparse",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const model = (await ctx.registry.lookup(fixedModel ?? body.model ?? undefined, "embed_sparse")) as SparseModel;
      const pruning = { topK: body.top_k, threshold: body.threshold };
      checkPruning(pruning);
      const promptRequest = { promptName: body.prompt_name, inputType: body.input_type };
      let out;
      if (model.task === "hybrid") {
        // bge-m3: its lexical weights.
        const encoded = await encodeInputs(model, body.inputs, promptRequest, "inputs", ctx);
        const run = await hybridEmbeddings(model, encoded, ["sparse"], request.signal, ctx.config.maxVectorsPerRequest);
        out = { ...run, results: run.results.map((r) => r.sparse!) };
      } else {
        out = await sparseVectors(ctx, model, body.inputs, promptRequest, "inputs", request.signal);
      }
      timingHeaders(set, out.queueMs, out.inferenceMs, performance.now() - t0);
      return out.results.map((r) => {
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
