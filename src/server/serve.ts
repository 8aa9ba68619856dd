// Starts the whole server from a validated Config: listen first (so /health answers 503 while models load),
// then load models; graceful shutdown drains every engine before the process exits.
import { ResultCache } from "../cache/cache";
import { startTracing, tracesUrl } from "../tracing";
import { startGrpc, type GrpcServer } from "./grpc/server";
import type { ServerConfig } from "../config";
import { Registry } from "../engine/registry";
import { log } from "../log";
import { Metrics, monitorEventLoopLag } from "../metrics";
import type { HubSettings } from "../model/resolve";
import { MediaPool } from "../media/pool";
import { TokenizerPool } from "../tokenize/pool";
import { createApp } from "./app";
import type { ServerContext } from "./context";

export interface RunningServer {
  url: string;
  port: number;
  ctx: ServerContext;
  /** Resolves once every model is loaded (and the gRPC port is bound); rejects with the first failure. */
  loaded: Promise<void>;
  /** The gRPC server (--grpc-port), or null when off. */
  grpc: Promise<GrpcServer | null>;
  /** Stops accepting, lets queued work finish (bounded by the shutdown timeout), then closes. */
  shutdown(): Promise<void>;
}

export function startServer(config: ServerConfig, hub: HubSettings): RunningServer {
  const metrics = new Metrics();
  const pool = new TokenizerPool(config.tokenizerWorkers);
  // Media workers start with the first multimodal model, so text-only servers run none.
  const mediaPool = new MediaPool(config.media.workers);
  const registry = new Registry(pool, metrics, mediaPool, { maxImagePixels: config.media.maxImagePixels }, {
    maxModelsMemoryBytes: config.maxModelsMemoryMb * 1048576,
    loadTimeoutMs: config.modelLoadTimeoutSeconds * 1000,
    loadRetryMs: config.modelLoadRetrySeconds * 1000,
  });
  const cache = ResultCache.open(config.resultCache, metrics);
  const ctx: ServerContext = { config, registry, metrics, cache, shuttingDown: false, inflight: 0 };
  const stopLagMonitor = monitorEventLoopLag(metrics.eventLoopLag);
  const tracing = config.otlpEndpoint ? startTracing(config.otlpEndpoint, config.otlpServiceName) : null;
  if (config.otlpEndpoint) log.info("exporting traces", { endpoint: tracesUrl(config.otlpEndpoint), service: config.otlpServiceName });
  const app = createApp(ctx);
  app.listen({
    hostname: config.host,
    port: config.port,
    // A backstop for bodies without Content-Length; the JSON parser enforces the limit with a clear error first.
    maxRequestBodySize: config.maxRequestBytes + 1024 * 1024,
  });
  const server = app.server!;
  const host = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${server.port}`;
  log.info("listening", { url: `http://${config.host}:${server.port}`, prefix: config.urlPrefix || "/" });

  const grpc = config.grpcPort === null ? Promise.resolve(null) : startGrpc(ctx, config.host, config.grpcPort);
  const loaded = Promise.all([registry.loadAll(config.models, hub), grpc]).then(() => {});
  let closing: Promise<void> | null = null;

  const shutdown = (): Promise<void> => {
    if (closing) return closing;
    ctx.shuttingDown = true;
    closing = (async () => {
      // Requests already accepted finish (app.ts refuses new ones, gRPC takes no new calls); then the engines run dry.
      await grpc.then((g) => g?.shutdown(), () => {});
      const answered = (async () => {
        while (ctx.inflight > 0) await Bun.sleep(10);
        await registry.idle();
      })();
      const timeout = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), config.shutdownTimeoutSeconds * 1000).unref?.());
      const result = await Promise.race([answered.then(() => "idle" as const), timeout]);
      if (result === "timeout") log.warn("shutdown timeout reached with work still queued");
      // gRPC calls answered by now have written their answers; watches and idle connections are closed.
      await Bun.sleep(result === "idle" ? 100 : 0);
      (await grpc.catch(() => null))?.close();
      // Work still queued or running is answered (503) while its connections are open; the workers end.
      await registry.close();
      // Let responses of the last batch be written, then close idle keep-alive connections too.
      await Promise.race([server.stop(false), Bun.sleep(2000)]);
      await server.stop(true);
      await cache.close();
      pool.close();
      mediaPool.close();
      stopLagMonitor();
      // The last spans are flushed (bounded by the exporter's timeout).
      await tracing?.shutdown();
      log.info("stopped");
    })();
    return closing;
  };
  return { url, port: server.port!, ctx, loaded, grpc, shutdown };
}
