// GET /health (503 while loading or broken, 200 when every model is ready) and GET /metrics (Prometheus).

import { modelError, modelState, workersOf } from "../../engine/registry";
import { router, type ServerContext } from "../context";

export function healthRoutes(ctx: ServerContext) {
  return router()
    .get(
      "/health",
      ({ set }) => {
        const models = ctx.registry.list().map((m) => ({
          model: m.name,
          state: modelState(m),
          error: modelError(m),
          workers: workersOf(m).map((w) => ({ state: w.state, restarts: w.restarts })),
        }));
        const status = ctx.shuttingDown ? "stopping" : ctx.registry.isLoading ? "loading" : ctx.registry.ready ? "ready" : "broken";
        set.status = status === "ready" ? 200 : 503;
        return { status, unix: Date.now() / 1000, models };
      },
      { detail: { summary: "Readiness: 200 when every model is ready, 503 otherwise", tags: ["health"] } },
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
