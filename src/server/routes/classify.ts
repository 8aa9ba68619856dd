// POST /classify (Infinity shape): every label with its score, per input. An adapter over the classify job.

import { responseMeta, router, type ServerContext } from "../context";
import { reportHeaders, runClassify } from "../jobs";
import { ClassifyRequest } from "../schemas";
import { servedName } from "./served";
import { truncationOf } from "./tei-shapes";

export function classifyRoutes(ctx: ServerContext, fixedModel?: string) {
  return router().post(
    "/classify",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const single = typeof body.input === "string";
      const out = await runClassify(
        ctx,
        {
          model: servedName(fixedModel, body.model),
          inputs: single ? [body.input as string] : (body.input as string[]),
          field: { name: "input", single },
          truncation: truncationOf(body.truncate, body.truncation_direction),
          rawScores: body.raw_scores === true,
        },
        request.signal,
      );
      reportHeaders(ctx, set, t0, out);
      return {
        object: "classify" as const,
        data: out.scores,
        model: out.model.name,
        usage: out.usage,
        ...responseMeta("classify"),
      };
    },
    {
      body: ClassifyRequest,
      detail: { summary: "Classify texts with a sequence classifier", tags: ["classify"] },
    },
  );
}
