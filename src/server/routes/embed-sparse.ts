// POST /embed_sparse (TEI shape): one list of {index, value} per input, indices ascending.

import type { ServedModel } from "../../engine/registry";
import { router, timingHeaders, type ServerContext } from "../context";
import { EmbedSparseRequest } from "../schemas";
import { encodeInputs } from "../jobs";
import { hybridEmbeddings, sparseEmbeddings } from "./embeddings";
import { checkPruning, pruneSparse } from "../../tasks/sparse";

type SparseModel = Extract<ServedModel, { task: "sparse" | "hybrid" }>;

export function embedSparseRoutes(ctx: ServerContext, fixedModel?: string) {
  return router().post(
    "/embed_sparse",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const model = (await ctx.registry.lookup(fixedModel ?? body.model ?? undefined, "embed_sparse")) as SparseModel;
      const encoded = await encodeInputs(model, body.inputs, { promptName: body.prompt_name }, "inputs", ctx);
      const pruning = { topK: body.top_k, threshold: body.threshold };
      const { results, queueMs, inferenceMs } =
        model.task === "hybrid"
          ? await (async () => {
              // bge-m3: its lexical weights.
              checkPruning(pruning);
              const out = await hybridEmbeddings(model, encoded, ["sparse"], request.signal, ctx.config.maxVectorsPerRequest);
              return { ...out, results: out.results.map((r) => pruneSparse(r.sparse!, pruning)) };
            })()
          : await sparseEmbeddings(model, encoded, pruning, request.signal);
      timingHeaders(set, queueMs, inferenceMs, performance.now() - t0);
      return results.map((v) => Array.from(v.indices, (index, i) => ({ index, value: v.values[i]! })));
    },
    {
      body: EmbedSparseRequest,
      detail: { summary: "Sparse embeddings (TEI-compatible): non-zero vocabulary weights per input", tags: ["embeddings"] },
    },
  );
}
