// POST /classify (Infinity shape): every label with its score, per input.

import type { ServedModel } from "../../engine/registry";
import { labelScores } from "../../tasks/classify";
import { responseMeta, router, timingHeaders, usageOf, type ServerContext } from "../context";
import { ClassifyRequest } from "../schemas";
import { checkTexts } from "../validate";

type ClassifyModel = Extract<ServedModel, { task: "classify" }>;

export function classifyRoutes(ctx: ServerContext) {
  return router().post(
    "/classify",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const model = ctx.registry.lookup(body.model, "classify") as ClassifyModel;
      const texts = checkTexts(body.input, "input", ctx.config);
      const encoded = await model.encode(texts);
      const { results, queueMs, inferenceMs } = await model.engine.submit(encoded, request.signal);
      timingHeaders(set, queueMs, inferenceMs, performance.now() - t0);
      return {
        object: "classify" as const,
        data: results.map((logits) => labelScores(logits, model.layout.labels, body.raw_scores === true)),
        model: model.name,
        usage: usageOf(encoded),
        ...responseMeta("classify"),
      };
    },
    {
      body: ClassifyRequest,
      detail: { summary: "Classify texts with a sequence classifier", tags: ["classify"] },
    },
  );
}
