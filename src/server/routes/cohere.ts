// POST /v2/embed (Cohere v2, as cohere-ai's ClientV2.embed sends and reads it) and Cohere v1's embed shape (cohere-ai's
// v1 Client.embed, LangChain.js / LlamaIndex.TS Cohere embeddings: POST /v1/embed, served on /embed's path when the
// body has `texts` instead of TEI's `inputs`): adapters over the embed job.
// embedding_types: float, int8, uint8, binary, ubinary (tasks/quantize.ts says how) and base64 (float32 bytes).

import type { Static } from "@sinclair/typebox";
import { InvalidInput } from "../../errors";
import { bytesBase64, quantize, VECTOR_TYPES, type VectorType } from "../../tasks/quantize";
import { responseMeta, router, type ServerContext } from "../context";
import { quantizationRangesFor, reportHeaders, runEmbed } from "../jobs";
import { CohereEmbedRequest } from "../schemas";
import { servedName } from "./served";

const EMBEDDING_TYPES = [...VECTOR_TYPES, "base64"] as const;
type EmbeddingType = (typeof EMBEDDING_TYPES)[number];

/**
 * The embed job of a Cohere body (v1 and v2 share the request fields) and its vectors in each asked type; `types`
 * null when the body names none (v1 then answers plain floats).
 */
async function cohereEmbed(ctx: ServerContext, body: Static<typeof CohereEmbedRequest>, fixedModel: string | undefined, signal: AbortSignal, set: { headers: Record<string, string | number> }) {
  const t0 = performance.now();
  if ((body as { images?: unknown }).images !== undefined || (body as { inputs?: unknown }).inputs !== undefined) {
    throw new InvalidInput("only `texts` is supported on Cohere's embed; send images to /embeddings with modality image", "texts");
  }
  const asked = body.embedding_types === undefined || body.embedding_types === null ? null : (body.embedding_types as string[]);
  if (asked !== null && asked.length === 0) throw new InvalidInput("`embedding_types` must not be an empty list", "embedding_types");
  for (const type of asked ?? []) {
    if (!(EMBEDDING_TYPES as readonly string[]).includes(type)) {
      throw new InvalidInput(`\`embedding_types\` values must be ${EMBEDDING_TYPES.join(", ")}, got "${type}"`, "embedding_types");
    }
  }
  const out = await runEmbed(
    ctx,
    {
      model: servedName(fixedModel, body.model),
      inputs: { texts: body.texts },
      field: { name: "texts", single: false },
      inputType: body.input_type,
      truncation: { truncate: body.truncate !== "NONE", direction: body.truncate === "START" ? "left" : "right" },
      dimensions: body.output_dimension,
      dimensionsParam: "output_dimension",
    },
    signal,
  );
  reportHeaders(ctx, set, t0, out);
  const ranges = quantizationRangesFor(out.model, asked ?? [], body.output_dimension, "output_dimension");
  const embeddings: Partial<Record<EmbeddingType, Array<number[] | string>>> = {};
  for (const type of new Set((asked ?? ["float"]) as EmbeddingType[])) {
    embeddings[type] = out.vectors.map((v) => (type === "base64" ? bytesBase64(v) : Array.from(quantize(v, type as VectorType, ranges))));
  }
  return { asked, embeddings, id: responseMeta("embed").id, inputTokens: out.usage.prompt_tokens };
}

/**
 * Cohere v1 embed: `embeddings_floats` (a list of float vectors) without `embedding_types`, else
 * `embeddings_by_type` as v2.
 */
export async function cohereV1Embed(ctx: ServerContext, body: Static<typeof CohereEmbedRequest>, fixedModel: string | undefined, signal: AbortSignal, set: { headers: Record<string, string | number> }) {
  const r = await cohereEmbed(ctx, body, fixedModel, signal, set);
  const meta = { api_version: { version: "1" }, billed_units: { input_tokens: r.inputTokens } };
  if (r.asked === null) return { id: r.id, embeddings: r.embeddings.float!, texts: body.texts, meta, response_type: "embeddings_floats" as const };
  return { id: r.id, embeddings: r.embeddings, texts: body.texts, meta, response_type: "embeddings_by_type" as const };
}

export function cohereRoutes(ctx: ServerContext, fixedModel?: string) {
  return router().post(
    "/embed",
    async ({ body, request, set }) => {
      const r = await cohereEmbed(ctx, body, fixedModel, request.signal, set);
      return {
        id: r.id,
        embeddings: r.embeddings,
        texts: body.texts,
        meta: { api_version: { version: "2" }, billed_units: { input_tokens: r.inputTokens } },
        response_type: "embeddings_by_type" as const,
      };
    },
    { body: CohereEmbedRequest, detail: { summary: "Embed texts (Cohere v2): float, int8, uint8, binary, ubinary, base64", tags: ["embeddings"] } },
  );
}
