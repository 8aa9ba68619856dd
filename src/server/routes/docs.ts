// GET /openapi.json, generated from the same TypeBox schemas the routes validate with, and GET /docs.

import type { TSchema } from "@sinclair/typebox";
import { router, type ServerContext } from "../context";
import {
  ClassifyRequest, ClassifyResponse, EmbeddingsRequest, EmbeddingsResponse, EmbedSparseRequest, EmbedSparseResponse, ErrorResponse, ModelsResponse, RerankRequest, RerankResponse,
} from "../schemas";

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
    paths[`${base}/rerank`] = post("Rerank documents against a query (Cohere-compatible)", RerankRequest, RerankResponse);
    paths[`${base}/classify`] = post("Classify texts", ClassifyRequest, ClassifyResponse);
    paths[`${base}/models`] = {
      get: { summary: "List served models", responses: { "200": { description: "models", content: { "application/json": { schema: jsonSchema(ModelsResponse) } } } } },
    };
  }
  paths["/health"] = { get: { summary: "Readiness: 200 when every model is ready, 503 otherwise", responses: { "200": { description: "ready" }, "503": { description: "loading, broken or stopping" } } } };
  paths["/metrics"] = { get: { summary: "Prometheus metrics", responses: { "200": { description: "text exposition format" } } } };
  return {
    openapi: "3.0.3",
    info: { title: "infinity", version: "0.1.0", description: "Embedding, reranking and classification server for HuggingFace models" },
    paths,
    components: {
      schemas: { Error: jsonSchema(ErrorResponse) },
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
    },
  };
}

const DOCS_HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>infinity API</title>
<link rel="stylesheet" href="https://unpkg.com/swagger-ui-dist@5/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="https://unpkg.com/swagger-ui-dist@5/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({ url: "openapi.json", dom_id: "#ui" });</script>
<noscript>The interactive docs need JavaScript; the raw document is at <a href="openapi.json">openapi.json</a>.</noscript>
</body></html>`;

export function docsRoutes(ctx: ServerContext) {
  const doc = JSON.stringify(openApiDocument(ctx));
  return router()
    .get("/openapi.json", () => new Response(doc, { headers: { "content-type": "application/json" } }))
    .get("/docs", () => new Response(DOCS_HTML, { headers: { "content-type": "text/html; charset=utf-8" } }));
}
