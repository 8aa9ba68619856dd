// Elysia wiring: body parsing and limits, CORS, auth, the one error shape, request metrics and logs, and the
// routes. API routes live under --url-prefix (each also under /v1); /health and /metrics stay public at the root.

import { BadBody, InfinityError, PayloadTooLarge, RouteNotFound, Unavailable } from "../errors";
import { isDebug, log } from "../log";
import { endRequestSpan, requestError, startRequestSpan } from "../tracing";
import { checkApiKey } from "./auth";
import { router, type ServerContext } from "./context";
import { errorResponse, toErrorReply } from "./errors";
import { classifyRoutes } from "./routes/classify";
import { embeddingsRoutes } from "./routes/embeddings";
import { embedSparseRoutes } from "./routes/embed-sparse";
import { healthRoutes } from "./routes/health";
import { modelsRoutes } from "./routes/models";
import { rerankRoutes } from "./routes/rerank";
import { docsRoutes } from "./routes/docs";
import { playgroundRoutes } from "./routes/playground";
import { cohereRoutes } from "./routes/cohere";
import { teiRoutes } from "./routes/tei";
import { platformHealthRoutes, vertexPredictRoutes } from "./routes/platforms";

const started = new WeakMap<Request, number>();
/** Requests counted into ctx.inflight, so each is counted out exactly once. */
const counted = new WeakSet<Request>();

function isJsonType(contentType: string): boolean {
  const type = contentType.split(";")[0]!.trim().toLowerCase();
  return type === "" || type === "application/json" || type.endsWith("+json") || type === "text/plain";
}

/** Reads a JSON body with the size limit enforced on the bytes actually received. */
async function parseJsonBody(request: Request, limit: number): Promise<unknown> {
  const contentType = request.headers.get("content-type") ?? "";
  if (!isJsonType(contentType)) {
    throw new BadBody(`Content-Type must be application/json, got "${contentType}"`, true);
  }
  const declared = Number(request.headers.get("content-length") ?? 0);
  if (declared > limit) throw new PayloadTooLarge(`request body of ${declared} bytes is over the ${limit}-byte limit (--max-request-bytes)`);
  const bytes = new Uint8Array(await request.arrayBuffer());
  if (bytes.byteLength > limit) throw new PayloadTooLarge(`request body of ${bytes.byteLength} bytes is over the ${limit}-byte limit (--max-request-bytes)`);
  if (bytes.byteLength === 0) throw new BadBody("request body is empty; send a JSON object");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new BadBody("request body is not valid UTF-8");
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new BadBody(`request body is not valid JSON: ${(e as Error).message}`);
  }
}

function corsHeaders(ctx: ServerContext, origin: string | null): Record<string, string> | null {
  const { permissiveCors, corsOrigins } = ctx.config;
  if (!origin || (!permissiveCors && !corsOrigins.includes(origin))) return null;
  return {
    "access-control-allow-origin": permissiveCors && !corsOrigins.length ? "*" : origin,
    "access-control-allow-methods": "GET, POST, OPTIONS",
    "access-control-allow-headers": "authorization, content-type",
    "access-control-expose-headers": "x-queue-time-ms, x-inference-time-ms, x-total-time-ms, x-cache-hits, x-truncated-inputs, retry-after",
    "access-control-max-age": "600",
    vary: "Origin",
  };
}

export function createApp(ctx: ServerContext) {
  const { config, metrics } = ctx;
  const prefix = config.urlPrefix;
  const apiKeys = config.apiKeys;
  metrics.requestsInFlight.set({}, () => ctx.inflight);

  /** A router whose routes need the API key (when keys are configured). */
  const authed = (base: string) =>
    router(base).onBeforeHandle(({ request }) => {
      if (apiKeys.length) checkApiKey(request.headers.get("authorization"), apiKeys);
    });
  /** Every inference route of every API shape; `fixed`: the model the /models/{served-name} prefix names. */
  const inference = (base: string, fixed?: string) =>
    authed(base)
      .use(embeddingsRoutes(ctx, fixed))
      .use(embedSparseRoutes(ctx, fixed))
      .use(rerankRoutes(ctx, fixed))
      .use(classifyRoutes(ctx, fixed))
      .use(teiRoutes(ctx, fixed));
  const api = (base: string) => inference(base).use(modelsRoutes(ctx));

  const app = router()
    .onRequest(({ request, set }) => {
      started.set(request, performance.now());
      if (ctx.shuttingDown && !/^\/(health|live|metrics)$/.test(new URL(request.url).pathname)) {
        return errorResponse(toErrorReply(new Unavailable("the server is shutting down")));
      }
      const cors = corsHeaders(ctx, request.headers.get("origin"));
      // A response returned from this hook skips onAfterResponse: such requests are answered before being counted.
      if (request.method === "OPTIONS") {
        return new Response(null, { status: cors ? 204 : 403, headers: cors ?? {} });
      }
      if (cors) Object.assign(set.headers, cors);
      ctx.inflight++;
      counted.add(request);
      startRequestSpan(request);
    })
    // A POST without a body or a content type (the admin routes /models/{name}/load and /unload) has nothing to
    // parse; routes that need a body say so through their schema (400), after the API key is checked.
    .onParse(async ({ request }) => {
      const noBody = !request.headers.get("content-type") && !request.headers.get("transfer-encoding") && Number(request.headers.get("content-length") ?? 0) === 0;
      return noBody ? undefined : parseJsonBody(request, config.maxRequestBytes);
    })
    .onError(({ error, code, set, request }) => {
      requestError(request, error);
      // Elysia wraps what the body parser throws in a ParseError; the typed cause says what was wrong.
      const cause = code === "PARSE" ? (error as Error).cause : undefined;
      const reply = cause instanceof InfinityError
        ? toErrorReply(cause)
        : toErrorReply(code === "NOT_FOUND" ? new RouteNotFound("no such route") : error, code);
      set.status = reply.status;
      const response = errorResponse(reply);
      for (const [k, v] of Object.entries(set.headers)) if (typeof v === "string" && !response.headers.has(k)) response.headers.set(k, v);
      return response;
    })
    .onAfterResponse(({ request, route, set, path }) => {
      // Answered (or failed): the models this request was given may be unloaded again.
      ctx.registry.endRequest(request.signal);
      const t0 = started.get(request);
      if (counted.delete(request)) ctx.inflight--;
      const seconds = t0 === undefined ? 0 : (performance.now() - t0) / 1000;
      const status = typeof set.status === "number" ? set.status : 200;
      const routeLabel = route || "unmatched";
      endRequestSpan(request, route || undefined, status);
      metrics.requests.inc({ route: routeLabel, method: request.method, status: String(status) });
      metrics.requestSeconds.observe({ route: routeLabel }, seconds);
      if (isDebug()) log.debug("request", { method: request.method, path, status, ms: +(seconds * 1000).toFixed(2) });
    })
    .use(healthRoutes(ctx))
    .use(platformHealthRoutes(ctx))
    .use(docsRoutes(ctx))
    .use(playgroundRoutes(ctx))
    .use(api(prefix));
  // OpenAI clients use a base URL ending in /v1: serve the API there too. Cohere's v2 client posts /v2/rerank.
  if (!prefix.endsWith("/v1")) app.use(api(`${prefix}/v1`));
  app.use(authed(`${prefix}/v2`).use(rerankRoutes(ctx)).use(cohereRoutes(ctx)));
  // Clients that take only a URL (HF Inference, TEI) reach each model under /models/{served-name}/...: the names
  // are known at start, so each model gets its own static routes (names with a slash work too).
  for (const m of ctx.config.models) {
    const base = `${prefix}/models/${m.servedModelName}`;
    app.use(inference(base, m.servedModelName)).use(authed(`${base}/v2`).use(rerankRoutes(ctx, m.servedModelName)).use(cohereRoutes(ctx, m.servedModelName)));
  }
  // Vertex AI's prediction route (AIP_PREDICT_ROUTE) at the root, refused when it would shadow one of the above.
  const taken = (path: string) => app.routes.some((r) => r.path === path);
  app.use(authed("").use(vertexPredictRoutes(ctx, taken)));
  return app;
}
