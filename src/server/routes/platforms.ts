// Managed platforms' routes. SageMaker: GET /ping (readiness, public) beside POST /invocations (tei.ts). Vertex AI:
// its health route (readiness) and prediction route, {"instances": [...], "parameters"?: {...}} answered
// {"predictions": [...]}, one prediction per instance in the shape POST / answers that instance (TEI's Vertex entry):
// {inputs} embeds or classifies as the model's task says, {query, texts} reranks. `parameters` apply to every instance.
import { ConfigError, InvalidInput } from "../../errors";
import { router, type ServerContext } from "../context";
import { teiHandlers } from "./tei";
import { readiness } from "./health";

/** The most instances one Vertex request may carry: each is a request of its own, so the input limit counts them. */
function instancesOf(body: unknown, max: number): Record<string, unknown>[] {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new InvalidInput('the body must be a JSON object {"instances": [...]} (Vertex AI prediction)');
  const b = body as Record<string, unknown>;
  if (!Array.isArray(b.instances)) {
    throw new InvalidInput(b.inputs !== undefined ? '`instances` is required: Vertex AI sends {"instances": [...]}; {inputs} bodies go to POST / or /invocations' : "`instances` must be a list", "instances");
  }
  if (b.instances.length === 0) throw new InvalidInput("`instances` must not be empty", "instances");
  if (b.instances.length > max) throw new InvalidInput(`\`instances\` has ${b.instances.length} entries; at most ${max} (--max-inputs-per-request)`, "instances");
  if (b.parameters !== undefined && (typeof b.parameters !== "object" || b.parameters === null || Array.isArray(b.parameters))) {
    throw new InvalidInput("`parameters` must be an object", "parameters");
  }
  return b.instances.map((inst, i) => {
    if (typeof inst !== "object" || inst === null || Array.isArray(inst)) {
      throw new InvalidInput(`\`instances[${i}]\` must be an object such as {"inputs": "text"} or {"query": "...", "texts": [...]}`, `instances[${i}]`);
    }
    return { ...(b.parameters as object | undefined), ...(inst as Record<string, unknown>) };
  });
}

/** Public: SageMaker's /ping, and Vertex AI's health route when it is not one the server already has. */
export function platformHealthRoutes(ctx: ServerContext) {
  const app = router().get("/ping", ({ set }) => readiness(ctx, set), { detail: { summary: "SageMaker readiness: as /health", tags: ["platforms"] } });
  const health = ctx.config.vertex.health;
  if (health && !["/health", "/ping", "/live", "/metrics"].includes(health)) {
    app.get(health, ({ set }) => readiness(ctx, set), { detail: { summary: "Vertex AI readiness (AIP_HEALTH_ROUTE): as /health", tags: ["platforms"] } });
  }
  return app;
}

/** Vertex AI's prediction route (AIP_PREDICT_ROUTE), behind the API key like every inference route. */
export function vertexPredictRoutes(ctx: ServerContext, taken: (path: string) => boolean) {
  const route = ctx.config.vertex.predict;
  const app = router();
  if (!route) return app;
  if (taken(route)) throw new ConfigError(`AIP_PREDICT_ROUTE ${route} is a route this server already serves; give Vertex AI another predict route, e.g. /vertex/predict`);
  const { hfInference } = teiHandlers(ctx);
  return app.post(
    route,
    async ({ body, request, set }) => {
      const instances = instancesOf(body, ctx.config.maxInputsPerRequest);
      // Each instance is one job: they run concurrently and are batched with everything else queued.
      const predictions = await Promise.all(instances.map((inst) => hfInference(inst, request.signal, set)));
      return { predictions };
    },
    { detail: { summary: 'Vertex AI prediction (AIP_PREDICT_ROUTE): {"instances": [...]} -> {"predictions": [...]}', tags: ["platforms"] } },
  );
}
