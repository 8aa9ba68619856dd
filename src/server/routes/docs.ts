// GET /openapi.json, generated from the same TypeBox schemas the routes validate with, and GET /docs.

import type { TSchema } from "@sinclair/typebox";
import { router, type ServerContext } from "../context";
import { t } from "elysia";
import {
  ClassifyRequest, ClassifyResponse, CohereEmbedRequest, CohereEmbedResponse, CohereV1EmbedResponse, EmbeddingsRequest, EmbeddingsResponse, EmbedSparseRequest, EmbedSparseResponse,
  ErrorResponse, HfInferenceRequest, ModelsResponse, RerankRequest, RerankResponse, TeiDecodeRequest, TeiDecodeResponse, TeiEmbedAllRequest, TeiEmbedAllResponse, TeiEmbedRequest, TeiEmbedResponse,
  TeiInfoResponse, TeiPredictRequest, TeiPredictResponse, TeiRerankRequest, TeiRerankResponse, TeiSimilarityRequest, TeiSimilarityResponse, TeiTokenizeRequest,
  TeiTokenizeResponse, VoyageRerankResponse,
} from "../schemas";

import { VERSION as API_VERSION } from "../../version";
export { API_VERSION };

/** TypeBox schemas are JSON Schema; strip TypeBox's symbol keys and the custom error texts. */
function jsonSchema(schema: TSchema): unknown {
  return JSON.parse(JSON.stringify(schema, (key, value) => (key === "error" && typeof value === "string" ? undefined : value)));
}

const errorResponses = (codes: number[]) =>
  Object.fromEntries(codes.map((c) => [String(c), { description: "error", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } }]));

export function openApiDocument(ctx: ServerContext): Record<string, unknown> {
  const p = ctx.config.urlPrefix;
  const post = (summary: string, req: TSchema, res: TSchema) => ({
    post: {
      summary,
      requestBody: { required: true, content: { "application/json": { schema: jsonSchema(req) } } },
      responses: {
        "200": { description: "success", content: { "application/json": { schema: jsonSchema(res) } } },
        ...errorResponses([400, 401, 413, 415, 429, 503]),
      },
      ...(ctx.config.apiKeys.length ? { security: [{ bearer: [] }] } : {}),
    },
  });
  const paths: Record<string, unknown> = {};
  for (const base of [p, `${p}/v1`].filter((b, i, all) => all.indexOf(b) === i && !(i === 1 && p.endsWith("/v1")))) {
    paths[`${base}/embeddings`] = post("Create embeddings (OpenAI-compatible)", EmbeddingsRequest, EmbeddingsResponse);
    paths[`${base}/embed_sparse`] = post("Sparse embeddings (TEI-compatible)", EmbedSparseRequest, EmbedSparseResponse);
    paths[`${base}/rerank`] = post(
      "Rerank: Cohere/Infinity shape (documents), Voyage (top_k: answer in data), TEI (texts: answer [{index, score, text?}])",
      t.Union([RerankRequest, TeiRerankRequest]),
      t.Union([RerankResponse, VoyageRerankResponse, TeiRerankResponse]),
    );
    paths[`${base}/embed`] = post(
      "Embed texts: TEI shape (inputs: answer [[...]]) or Cohere v1 (texts: embeddings_floats / embeddings_by_type)",
      t.Union([TeiEmbedRequest, CohereEmbedRequest]),
      t.Union([TeiEmbedResponse, CohereV1EmbedResponse]),
    );
    paths[`${base}/embed_all`] = post("Per-token vectors (TEI): the last hidden state of every token of each input", TeiEmbedAllRequest, TeiEmbedAllResponse);
    paths[`${base}/predict`] = post("Classify texts or pairs (TEI)", TeiPredictRequest, TeiPredictResponse);
    paths[`${base}/similarity`] = post("Cosine similarity of a source sentence to sentences (TEI)", TeiSimilarityRequest, TeiSimilarityResponse);
    paths[`${base}/tokenize`] = post("Tokenize (TEI)", TeiTokenizeRequest, TeiTokenizeResponse);
    paths[`${base}/decode`] = post("Decode token ids (TEI)", TeiDecodeRequest, TeiDecodeResponse);
    paths[`${base}/info`] = {
      get: { summary: "Model info (TEI); ?model= picks a model", responses: { "200": { description: "info", content: { "application/json": { schema: jsonSchema(TeiInfoResponse) } } } } },
    };
    paths[`${base}/`] = post("HF Inference shape {inputs, parameters}, dispatched on the model's task (also /models/{served-name})", HfInferenceRequest, t.Unknown());
    paths[`${base}/invocations`] = post("SageMaker: as POST / ({inputs} by the model's task, {query, texts} reranks)", HfInferenceRequest, t.Unknown());
    paths[`${base}/classify`] = post("Classify texts", ClassifyRequest, ClassifyResponse);
    paths[`${base}/models`] = {
      get: { summary: "List served models", responses: { "200": { description: "models", content: { "application/json": { schema: jsonSchema(ModelsResponse) } } } } },
    };
  }
  paths[`${p}/v2/embed`] = post("Embed texts (Cohere v2): float, int8, uint8, binary, ubinary, base64", CohereEmbedRequest, CohereEmbedResponse);
  paths["/health"] = { get: { summary: "Readiness: 200 when every model is ready, 503 otherwise", responses: { "200": { description: "ready" }, "503": { description: "loading, broken or stopping" } } } };
  paths["/ping"] = { get: { summary: "SageMaker readiness: as /health", responses: { "200": { description: "ready" }, "503": { description: "loading, broken or stopping" } } } };
  paths["/metrics"] = { get: { summary: "Prometheus metrics", responses: { "200": { description: "text exposition format" } } } };
  return {
    openapi: "3.0.3",
    info: { title: "infinity", version: API_VERSION, description: "Embedding, reranking and classification server for HuggingFace models" },
    paths,
    components: {
      schemas: { Error: jsonSchema(ErrorResponse) },
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
    },
  };
}

// The viewer ships inside the server (and the compiled binary): swagger-ui-dist's files are imported as text, so
// /docs works on hosts without internet access. No request leaves the host.
import swaggerBundle from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "text" };
import swaggerCss from "swagger-ui-dist/swagger-ui.css" with { type: "text" };

const DOCS_HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>infinity API</title>
<link rel="icon" href="favicon.ico" type="image/svg+xml">
<link rel="stylesheet" href="docs/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({ url: "openapi.json", dom_id: "#ui" });</script>
<noscript>The interactive docs need JavaScript; the raw document is at <a href="openapi.json">openapi.json</a>.</noscript>
</body></html>`;

export function docsRoutes(ctx: ServerContext) {
  const doc = JSON.stringify(openApiDocument(ctx));
  const asset = (body: string, type: string) => () => new Response(body, { headers: { "content-type": type, "cache-control": "public, max-age=86400" } });
  return router()
    .get("/openapi.json", () => new Response(doc, { headers: { "content-type": "application/json" } }))
    // The router also matches /docs/, where the page's relative links would point into /docs/docs/...: a blank
    // viewer. Send it to /docs (relative, so a reverse proxy's sub-path stays).
    .get("/docs", ({ request }) =>
      new URL(request.url).pathname.endsWith("/")
        ? new Response(null, { status: 301, headers: { location: "../docs" } })
        : new Response(DOCS_HTML, { headers: { "content-type": "text/html; charset=utf-8" } }))
    .get("/docs/swagger-ui.css", asset(swaggerCss, "text/css; charset=utf-8"))
    .get("/docs/swagger-ui-bundle.js", asset(swaggerBundle, "text/javascript; charset=utf-8"));
}
