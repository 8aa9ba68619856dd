// POST /rerank (Cohere / Infinity shape).

import { InvalidInput } from "../../errors";
import type { ServedModel } from "../../engine/registry";
import { rankResults } from "../../tasks/rerank";
import { inputKey, SCORE_CODEC } from "../../cache/cache";
import { cacheHeader, responseMeta, router, timingHeaders, usageOfCounts, type ServerContext } from "../context";
import { RerankRequest } from "../schemas";
import { similarityScores } from "./embeddings";
import { checkCount, checkText } from "../validate";

type RerankModel = Extract<ServedModel, { task: "rerank" }>;

export function rerankRoutes(ctx: ServerContext) {
  return router().post(
    "/rerank",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const served = await ctx.registry.lookup(body.model, "rerank");
      checkText(body.query, "query", ctx.config);
      if (body.documents.length === 0) throw new InvalidInput("`documents` must not be an empty list", "documents");
      checkCount(body.documents.length, "documents", ctx.config);
      const docs = body.documents.map((d, i) => {
        const text = typeof d === "string" ? d : d.text;
        checkText(text, `documents[${i}]`, ctx.config);
        return text;
      });
      if (body.top_n !== undefined && body.top_n < 1) throw new InvalidInput(`\`top_n\` must be at least 1, got ${body.top_n}`, "top_n");
      const reply = (scores: number[], raw: boolean, tokens: number[], queueMs: number, inferenceMs: number) => {
        const ranked = rankResults(scores, body.top_n, raw);
        timingHeaders(set, queueMs, inferenceMs, performance.now() - t0);
        return {
          object: "rerank" as const,
          results: ranked.map((r) => ({
            relevance_score: r.score,
            index: r.index,
            ...(body.return_documents ? { document: { text: docs[r.index]! } } : {}),
          })),
          model: served.name,
          usage: usageOfCounts(tokens),
          ...responseMeta("rerank"),
          meta: { billed_units: { search_units: 1 } },
        };
      };
      if (served.task !== "rerank") {
        // An embedding model ranks by similarity (cosine, sparse dot product, MaxSim): raw scores, no sigmoid.
        if (served.task === "classify") throw new InvalidInput(`model "${served.name}" is a classifier`, "model");
        if (body.instruction !== undefined) throw new InvalidInput("`instruction` applies to LLM rerankers (Qwen3-Reranker) only", "instruction");
        const { scores, tokens, queueMs, inferenceMs } = await similarityScores(served, body.query, docs, ctx, request.signal);
        return reply(scores, true, tokens, queueMs, inferenceMs);
      }
      const model: RerankModel = served;
      // Cached per (query, document) pair: a repeated query over unchanged documents runs only the new ones.
      if (body.instruction !== undefined && !model.layout.rerankTemplate) {
        throw new InvalidInput("`instruction` applies to LLM rerankers (Qwen3-Reranker) only; this model is a cross-encoder", "instruction");
      }
      const options = body.instruction !== undefined ? { instruction: body.instruction } : undefined;
      const keys = docs.map((d) => (options ? inputKey(model.cacheScope, "pair+instruction", options.instruction, body.query, d) : inputKey(model.cacheScope, "pair", body.query, d)));
      const { results, tokens, queueMs, inferenceMs, hits } = await ctx.cache.through(model.name, keys, SCORE_CODEC, async (missing) => {
        const encoded = await model.encode(missing.map((i) => docs[i]!), missing.map(() => body.query), options);
        return { ...(await model.engine.submit(encoded, request.signal)), tokens: encoded.map((e) => e.ids.length) };
      });
      cacheHeader(set, ctx, hits);
      return reply(results, body.raw_scores === true, tokens, queueMs, inferenceMs);
    },
    {
      body: RerankRequest,
      detail: { summary: "Rerank documents against a query (Cohere-compatible)", tags: ["rerank"] },
    },
  );
}
