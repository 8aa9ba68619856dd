// GET /health (readiness: 503 while starting, broken or stopping; 200 when every loaded model is ready, on-demand
// models that are not loaded included), GET /live (liveness: the process serves HTTP) and GET /metrics.

import { workersOf } from "../../engine/served";
import { router, type ServerContext } from "../context";

/** The server's readiness: stopping, loading, ready (every loaded model is), or broken; only ready serves. */
export function readinessStatus(ctx: ServerContext): "stopping" | "loading" | "ready" | "broken" {
  return ctx.shuttingDown ? "stopping" : ctx.registry.isLoading ? "loading" : ctx.registry.ready ? "ready" : "broken";
}

/** Readiness: 200 when every loaded model is ready, else 503; with each model's state. */
export function readiness(ctx: ServerContext, set: { status?: number | string }) {
  const models = ctx.registry.entries().map((e) => ({
    model: e.name,
    state: e.state,
    load: e.config.load,
    error: e.error,
    workers: e.model ? workersOf(e.model).map((w) => ({ state: w.state, restarts: w.restarts })) : [],
  }));
  const status = readinessStatus(ctx);
  set.status = status === "ready" ? 200 : 503;
  return { status, unix: Date.now() / 1000, models };
}

export function healthRoutes(ctx: ServerContext) {
  return router()
    .get(
      "/health",
      ({ set }) => readiness(ctx, set),
      { detail: { summary: "Readiness: 200 when every loaded model is ready (unloaded on-demand models included), 503 otherwise", tags: ["health"] } },
    )
    .get(
      "/live",
      () => ({ status: "alive", unix: Date.now() / 1000 }),
      { detail: { summary: "Liveness: 200 while the process answers HTTP, whatever its models' state", tags: ["health"] } },
    )
    .get(
      "/metrics",
      ({ set }) => {
        set.headers["content-type"] = "text/plain; version=0.0.4; charset=utf-8";
        return ctx.metrics.render();
      },
      { detail: { summary: "Prometheus metrics", tags: ["health"] } },
    );
}
