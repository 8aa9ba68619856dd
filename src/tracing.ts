// OpenTelemetry traces (--otlp-endpoint): a server span per request, joined to its caller's trace by W3C
// traceparent / tracestate, with spans under it for tokenization, the result cache, the queue wait, the batch the
// inputs ran in and the inference call, exported over OTLP/HTTP (protobuf) by a batch span processor. Off by
// default; off, every function here returns at its first line and nothing is allocated per request.
//
// Contexts are passed explicitly, not through a global context manager: a request's context is found from its
// AbortSignal, which every job already carries down to the engine.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type TextMapGetter, type Tracer } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { VERSION } from "./version";

export type TraceContext = Context;

let tracer: Tracer | null = null;
const propagator = new W3CTraceContextPropagator();
const requests = new WeakMap<Request, Span>();
const contexts = new WeakMap<AbortSignal, Context>();

const headerGetter: TextMapGetter<Headers> = {
  keys: (h) => [...(h as unknown as Iterable<[string, string]>)].map(([k]) => k),
  get: (h, key) => h.get(key) ?? undefined,
};

/** OTLP/HTTP's traces URL: OTEL_EXPORTER_OTLP_ENDPOINT is a base the signal's path is added to. */
export function tracesUrl(endpoint: string): string {
  const base = endpoint.replace(/\/+$/, "");
  return base.endsWith("/v1/traces") ? base : `${base}/v1/traces`;
}

/** Starts exporting spans; the returned shutdown flushes what is queued (bounded by the exporter's timeout). */
export function startTracing(endpoint: string, serviceName: string): { shutdown(): Promise<void> } {
  const exporter = new OTLPTraceExporter({ url: tracesUrl(endpoint), timeoutMillis: 5000 });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": serviceName, "service.version": VERSION }),
    // A full queue drops spans instead of waiting: a slow or absent collector never slows a request.
    spanProcessors: [new BatchSpanProcessor({ exporter, maxQueueSize: 4096, maxExportBatchSize: 512, scheduledDelayMillis: 1000, exportTimeoutMillis: 5000 })],
  });
  const own = provider.getTracer("infinity", VERSION);
  tracer = own;
  return {
    async shutdown() {
      if (tracer === own) tracer = null;
      await provider.shutdown().catch(() => {});
    },
  };
}

/** Milliseconds of performance.now() as the epoch milliseconds spans take. */
function epoch(ms: number): number {
  return performance.timeOrigin + ms;
}

/** The server span of a request, its parent the caller's traceparent (if any). */
export function startRequestSpan(request: Request): void {
  if (!tracer) return;
  const parent = propagator.extract(ROOT_CONTEXT, request.headers, headerGetter);
  const url = new URL(request.url);
  const attributes: Attributes = {
    "http.request.method": request.method,
    "url.path": url.pathname,
    "url.scheme": url.protocol.replace(/:$/, ""),
    "server.address": url.hostname,
  };
  if (url.port) attributes["server.port"] = Number(url.port);
  const agent = request.headers.get("user-agent");
  if (agent) attributes["user_agent.original"] = agent;
  const span = tracer.startSpan(request.method, { kind: SpanKind.SERVER, attributes }, parent);
  requests.set(request, span);
  contexts.set(request.signal, trace.setSpan(parent, span));
}

/** Records an error on the request's span (its status is set when it ends). */
export function requestError(request: Request, error: unknown): void {
  if (!tracer) return;
  const span = requests.get(request);
  if (span && error instanceof Error) span.recordException(error);
}

/** Ends the request's span: `METHOD route`, the response status; 5xx marks it an error (HTTP semantic conventions). */
export function endRequestSpan(request: Request, route: string | undefined, status: number): void {
  if (!tracer) return;
  const span = requests.get(request);
  if (!span) return;
  requests.delete(request);
  if (route) {
    span.updateName(`${request.method} ${route}`);
    span.setAttribute("http.route", route);
  }
  span.setAttribute("http.response.status_code", status);
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}

/** The trace context of the request a signal belongs to, or null (tracing off, or not a traced request). */
export function traceOf(signal: AbortSignal | undefined): TraceContext | null {
  if (!tracer || !signal) return null;
  return contexts.get(signal) ?? null;
}

/** Adds attributes to the request's server span (the model, the inputs). */
export function annotateRequest(signal: AbortSignal, attributes: Attributes): void {
  if (!tracer) return;
  const ctx = contexts.get(signal);
  if (ctx) trace.getSpan(ctx)?.setAttributes(attributes);
}

/** Runs fn in a child span of `parent`; without a parent (tracing off) it only runs fn. */
export async function traced<T>(parent: TraceContext | null, name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
  if (!parent || !tracer) return fn();
  const span = tracer.startSpan(name, { attributes }, parent);
  try {
    return await fn();
  } catch (e) {
    span.recordException(e as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (e as Error).message });
    throw e;
  } finally {
    span.end();
  }
}

/**
 * A span over a past interval (performance.now() milliseconds) under `parent`, e.g. a queue wait or a batch measured
 * by the engine; returns its context for children. `error`: the failure to record on it.
 */
export function recordSpan(parent: TraceContext, name: string, start: number, end: number, attributes: Attributes, error?: Error): TraceContext | null {
  if (!tracer) return null;
  const span = tracer.startSpan(name, { attributes, startTime: epoch(start) }, parent);
  if (error) {
    span.recordException(error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
  }
  span.end(epoch(end));
  return trace.setSpan(parent, span);
}
