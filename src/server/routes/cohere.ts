// POST /v2/embed (Cohere v2, as cohere-ai's ClientV2.embed sends and reads it): an adapter over the embed job.
// embedding_types: float, int8, uint8, binary, ubinary (tasks/quantize.ts says how) and base64 (float32 bytes).

import { InvalidInput } from "../../errors";
import { bytesBase64, quantize, VECTOR_TYPES, type VectorType } from "../../tasks/quantize";
import { responseMeta, router, type ServerContext } from "../context";
import { reportHeaders, runEmbed } from "../jobs";
import { CohereEmbedRequest } from "../schemas";
import { servedName } from "./served";

const EMBEDDING_TYPES = [...VECTOR_TYPES, "base64"] as const;
type EmbeddingType = (typeof EMBEDDING_TYPES)[number];

export function cohereRoutes(ctx: ServerContext, fixedModel?: string) {
  return router().post(
    "/embed",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      if ((body as { images?: unknown }).images !== undefined || (body as { inputs?: unknown }).inputs !== undefined) {
        throw new InvalidInput("only `texts` is supported on /v2/embed; send images to /embeddings with modality image", "texts");
      }
      const types = (body.embedding_types ?? ["float"]) as string[];
      if (types.length === 0) throw new InvalidInput("`embedding_types` must not be an empty list", "embedding_types");
      for (const type of types) {
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
        request.signal,
      );
      reportHeaders(ctx, set, t0, out);
      const embeddings: Partial<Record<EmbeddingType, Array<number[] | string>>> = {};
      for (const type of new Set(types as EmbeddingType[])) {
        embeddings[type] = out.vectors.map((v) => (type === "base64" ? bytesBase64(v) : Array.from(quantize(v, type as VectorType))));
      }
      return {
        id: responseMeta("embed").id,
        embeddings,
        texts: body.texts,
        meta: { api_version: { version: "2" }, billed_units: { input_tokens: out.usage.prompt_tokens } },
        response_type: "embeddings_by_type" as const,
      };
    },
    { body: CohereEmbedRequest, detail: { summary: "Embed texts (Cohere v2): float, int8, uint8, binary, ubinary, base64", tags: ["embeddings"] } },
  );
}
