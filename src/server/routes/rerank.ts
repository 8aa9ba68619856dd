// POST /rerank: one path, three shapes, told apart by the body. `documents`: Cohere / Infinity (answer `results`),
// or Voyage when it sends `top_k` (answer `data`); `texts`: TEI (answer [{index, score, text?}]). Each is an adapter
// over the rerank job (jobs.ts).

import type { Static } from "@sinclair/typebox";
import { InvalidInput } from "../../errors";
import { responseMeta, router, type ServerContext } from "../context";
import { reportHeaders, runRerank, TRUNCATE_RIGHT, type Truncation } from "../jobs";
import { RerankRequest, TeiRerankRequest } from "../schemas";
import { checkShape } from "../validate-shape";
import { servedName } from "./served";
import { truncationOf } from "./tei-shapes";

/** TEI's rerank: [{index, score, text?}] best first. Also POST / for a reranker (tei.ts). */
export async function teiRerank(
  ctx: ServerContext,
  tei: Static<typeof TeiRerankRequest>,
  name: string | undefined,
  signal: AbortSignal,
  set: { headers: Record<string, string | number> },
) {
  const t0 = performance.now();
  const out = await runRerank(
    ctx,
    {
      model: name,
      query: tei.query,
      documents: tei.texts,
      field: "texts",
      truncation: truncationOf(tei.truncate, tei.truncation_direction),
      rawScores: tei.raw_scores === true,
    },
    signal,
  );
  reportHeaders(ctx, set, t0, out);
  return out.ranked.map((r) => ({ index: r.index, score: r.score, ...(tei.return_text ? { text: tei.texts[r.index]! } : {}) }));
}

const SHAPES = "a rerank body is Cohere/Infinity-shaped {query, documents, top_n} or TEI-shaped {query, texts}";

export function rerankRoutes(ctx: ServerContext, fixedModel?: string) {
  return router().post(
    "/rerank",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const b = body as Record<string, unknown> | null;
      if (typeof b !== "object" || b === null || Array.isArray(b)) throw new InvalidInput(`the body must be a JSON object; ${SHAPES}`);
      if (b.documents === undefined && b.texts !== undefined) {
        return teiRerank(ctx, checkShape(TeiRerankRequest, b, "TEI shape {query, texts}"), servedName(fixedModel, b.model as string | undefined), request.signal, set);
      }
      if (b.documents === undefined) throw new InvalidInput(`\`documents\` or \`texts\` is required: ${SHAPES}`, "documents");
      const req = checkShape(RerankRequest, b, "Cohere/Infinity shape {query, documents}");
      const docs = req.documents.map((d) => (typeof d === "string" ? d : d.text));
      const voyage = req.top_k !== undefined && req.top_k !== null;
      const truncation: Truncation = { ...TRUNCATE_RIGHT, truncate: (req.truncate ?? req.truncation) !== false };
      const out = await runRerank(
        ctx,
        {
          model: servedName(fixedModel, req.model),
          query: req.query,
          documents: docs,
          field: "documents",
          truncation,
          topN: voyage ? req.top_k! : (req.top_n ?? undefined),
          topNParam: voyage ? "top_k" : "top_n",
          rawScores: req.raw_scores === true,
          instruction: req.instruction,
        },
        request.signal,
      );
      reportHeaders(ctx, set, t0, out);
      if (voyage) {
        // Voyage returns documents as plain strings, and only when asked (return_documents defaults to false).
        return {
          object: "list" as const,
          data: out.ranked.map((r) => ({ relevance_score: r.score, index: r.index, ...(req.return_documents ? { document: docs[r.index]! } : {}) })),
          model: out.model.name,
          usage: { total_tokens: out.usage.total_tokens },
        };
      }
      return {
        object: "rerank" as const,
        results: out.ranked.map((r) => ({
          relevance_score: r.score,
          index: r.index,
          ...(req.return_documents ? { document: { text: docs[r.index]! } } : {}),
        })),
        model: out.model.name,
        // Together's shape (@ai-sdk/togetherai) requires completion_tokens; Cohere and infinity_client ignore it.
        usage: { prompt_tokens: out.usage.prompt_tokens, completion_tokens: 0, total_tokens: out.usage.total_tokens },
        ...responseMeta("rerank"),
        meta: { billed_units: { search_units: 1 } },
      };
    },
    { detail: { summary: "Rerank texts against a query (Cohere, Voyage and TEI shapes)", tags: ["rerank"] } },
  );
}
