// POST /classify (Infinity shape): every label with its score, per input.

import type { ServedModel } from "../../engine/registry";
import { labelScores } from "../../tasks/classify";
import { inputKey, VECTOR_CODEC } from "../../cache/cache";
import { cacheHeader, responseMeta, router, timingHeaders, usageOfCounts, type ServerContext } from "../context";
import { ClassifyRequest } from "../schemas";
import { checkTexts } from "../validate";

type ClassifyModel = Extract<ServedModel, { task: "classify" }>;

export function classifyRoutes(ctx: ServerContext) {
  return router().post(
    "/classify",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const model = (await ctx.registry.lookup(body.model, "classify")) as ClassifyModel;
      const texts = checkTexts(body.input, "input", ctx.config);
      const keys = texts.map((t) => inputKey(model.cacheScope, "text", "", t));
      const { results, tokens, queueMs, inferenceMs, hits } = await ctx.cache.through(model.name, keys, VECTOR_CODEC, async (missing) => {
        const encoded = await model.encode(missing.map((i) => texts[i]!));
        return { ...(await model.engine.submit(encoded, request.signal)), tokens: encoded.map((e) => e.ids.length) };
      });
      cacheHeader(set, ctx, hits);
      timingHeaders(set, queueMs, inferenceMs, performance.now() - t0);
      return {
        object: "classify" as const,
        data: results.map((logits) => labelScores(logits, model.layout.labels, body.raw_scores === true)),
        model: model.name,
        usage: usageOfCounts(tokens),
        ...responseMeta("classify"),
      };
    },
    {
      body: ClassifyRequest,
      detail: { summary: "Classify texts with a sequence classifier", tags: ["classify"] },
    },
  );
}
