// The one error shape (OpenAI style) and the one mapping from typed errors to HTTP statuses.
import {
  BadBody, CapabilityMismatch, ModelNotServing, Cancelled, InferenceFailed, InfinityError, InputTooLong, InvalidInput, InvalidMedia, ModelNotFound, Overloaded,
  PayloadTooLarge, RouteNotFound, Unauthorized, Unavailable, WorkerFailed,
} from "../errors";
import { log } from "../log";

export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export interface ErrorReply {
  status: number;
  body: ErrorBody;
  headers: Record<string, string>;
}

function statusOf(e: InfinityError): number {
  if (e instanceof InvalidMedia) return e.code === "media_too_large" ? 413 : e.code === "unsupported_media_type" ? 415 : 400;
  if (e instanceof InvalidInput || e instanceof ModelNotFound || e instanceof CapabilityMismatch) return 400;
  if (e instanceof BadBody) return e.unsupportedMediaType ? 415 : 400;
  if (e instanceof Unauthorized) return 401;
  if (e instanceof RouteNotFound) return 404;
  if (e instanceof PayloadTooLarge || e instanceof InputTooLong) return 413;
  if (e instanceof Overloaded) return 429;
  // Nobody reads it: the client has gone. 499 is the de-facto status for that.
  if (e instanceof Cancelled) return 499;
  if (e instanceof Unavailable || e instanceof WorkerFailed || e instanceof ModelNotServing) return 503;
  if (e instanceof InferenceFailed) return 500;
  return 500;
}

export function errorBody(message: string, type: string, param: string | null = null, code: string | null = null): ErrorBody {
  return { error: { message, type, param, code } };
}

/**
 * Elysia's schema validation error: the first failing field, said plainly. A field whose schema defines its own
 * `error` (what it accepts, e.g. for a union of shapes) is described by that, not by TypeBox's "expected union value".
 */
function validationMessage(err: { valueError?: { path: string; message: string; value?: unknown }; customError?: unknown }): { message: string; param: string | null } {
  const v = err.valueError;
  if (!v) return { message: "request body does not match the schema", param: null };
  const param = v.path.replace(/^\//, "").replace(/\//g, ".") || null;
  const where = param ? `\`${param}\`` : "body";
  const what = typeof err.customError === "string" ? err.customError : `${where}: ${v.message.toLowerCase()}`;
  let got: string;
  try {
    const json = JSON.stringify(v.value);
    got = json === undefined ? "nothing" : json.length > 80 ? json.slice(0, 77) + "..." : json;
  } catch {
    got = typeof v.value;
  }
  return { message: `${what} (got ${got})`, param };
}

/** Maps anything thrown while serving a request to the one error shape. */
export function toErrorReply(err: unknown, elysiaCode?: string | number): ErrorReply {
  if (err instanceof InfinityError) {
    const headers: Record<string, string> = {};
    if (err instanceof Overloaded || err instanceof ModelNotServing) headers["retry-after"] = String(err.retryAfterSeconds);
    // A replacement inference worker is up within about a second.
    if (err instanceof WorkerFailed) headers["retry-after"] = "1";
    return { status: statusOf(err), body: errorBody(err.message, err.type, err.param, err.code), headers };
  }
  switch (elysiaCode) {
    case "VALIDATION": {
      const { message, param } = validationMessage(err as never);
      return { status: 400, body: errorBody(message, "invalid_request_error", param, "invalid_input"), headers: {} };
    }
    case "PARSE":
      return { status: 400, body: errorBody("request body is not valid JSON", "invalid_request_error", null, "invalid_body"), headers: {} };
    case "NOT_FOUND":
      return { status: 404, body: errorBody("no such route", "invalid_request_error", null, "not_found"), headers: {} };
  }
  log.error("unhandled error", { error: (err as Error)?.stack ?? String(err) });
  return { status: 500, body: errorBody("internal server error", "server_error", null, "internal_error"), headers: {} };
}

export function errorResponse(reply: ErrorReply): Response {
  return new Response(JSON.stringify(reply.body), {
    status: reply.status,
    headers: { "content-type": "application/json", ...reply.headers },
  });
}
