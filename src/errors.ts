// Typed errors raised where the problem is found. server/errors.ts maps them to HTTP once.
// Lower layers (engine, model, tokenize, tasks) throw these and never know about HTTP.

export abstract class InfinityError extends Error {
  /** OpenAI-style error type, e.g. "invalid_request_error". */
  abstract readonly type: string;
  /** Machine-readable code, stable across releases. */
  abstract readonly code: string;
  constructor(
    message: string,
    /** The request field the error is about, when there is one. */
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The request is well-formed JSON but asks for something invalid. */
export class InvalidInput extends InfinityError {
  readonly type = "invalid_request_error";
  readonly code = "invalid_input";
}

/** An image or audio input that cannot be fetched, decoded or preprocessed (or exceeds a media limit). */
export class InvalidMedia extends InfinityError {
  readonly type = "invalid_request_error";
  readonly code: string;
  constructor(message: string, param: string | null = null, code = "invalid_media") {
    super(message, param);
    this.code = code;
  }
}

/** The request names a model that is not served. */
export class ModelNotFound extends InfinityError {
  readonly type = "invalid_request_error";
  readonly code = "model_not_found";
}

/** The model exists but cannot serve this route or modality. */
export class CapabilityMismatch extends InfinityError {
  readonly type = "invalid_request_error";
  readonly code = "unsupported_capability";
}

/** The queue is full; the client should retry later. */
export class Overloaded extends InfinityError {
  readonly type = "overloaded_error";
  readonly code = "queue_full";
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

/** The engine cannot serve (still loading, shutting down, or broken). */
export class Unavailable extends InfinityError {
  readonly type = "service_unavailable_error";
  readonly code = "unavailable";
}

/** A model that cannot serve yet (503 with Retry-After): still loading, or no memory to load it in. */
export abstract class ModelNotServing extends InfinityError {
  readonly type = "service_unavailable_error";
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message, "model");
  }
}

/** An on-demand model is still loading after the request's wait (--model-load-timeout); its load goes on. */
export class ModelLoading extends ModelNotServing {
  readonly code = "model_loading";
}

/**
 * An on-demand model's load failed: answered for that request and, until the backoff (--model-load-retry-seconds)
 * has passed, at once for every request for it, without trying the load again.
 */
export class ModelLoadFailed extends ModelNotServing {
  readonly code = "model_load_failed";
}

/** Loading a model would exceed --max-models-memory-mb and no idle model can be unloaded to make room. */
export class MemoryBudgetExceeded extends ModelNotServing {
  readonly code = "memory_budget_exceeded";
}

/** The client went away before its work was done; the work was dropped. */
export class Cancelled extends InfinityError {
  readonly type = "cancelled";
  readonly code = "client_disconnected";
}

/** Configuration cannot be used; raised at startup and reported without a stack trace. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/** A model cannot be found, downloaded or loaded. */
export class ModelLoadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ModelLoadError";
  }
}

/** Inference itself failed (onnxruntime error). */
export class InferenceFailed extends InfinityError {
  readonly type = "server_error";
  readonly code = "inference_failed";
}

/**
 * A model's inference worker died or hung and the batch failed on its replacement too, or the model is stopping
 * with the batch still running: retry later.
 */
export class WorkerFailed extends InfinityError {
  readonly type = "service_unavailable_error";
  readonly code = "inference_worker_failed";
}

/** Missing or wrong API key. */
export class Unauthorized extends InfinityError {
  readonly type = "authentication_error";
  readonly code = "invalid_api_key";
}

/** An input is longer than the model takes and the request asked not to truncate it. */
export class InputTooLong extends InfinityError {
  readonly type = "invalid_request_error";
  readonly code = "input_too_long";
}

/** The request body is larger than the configured limit. */
export class PayloadTooLarge extends InfinityError {
  readonly type = "invalid_request_error";
  readonly code: string = "payload_too_large";
}

/** A request whose answer would be too large (multi-vector output past --max-vectors-per-request). */
export class TooManyVectors extends PayloadTooLarge {
  override readonly code = "too_many_vectors";
}

/** The body is not JSON (content type or syntax). */
export class BadBody extends InfinityError {
  readonly type = "invalid_request_error";
  readonly code = "invalid_body";
  constructor(
    message: string,
    /** 415 for a wrong content type, 400 for broken JSON. */
    readonly unsupportedMediaType = false,
  ) {
    super(message);
  }
}

/** No such route. */
export class RouteNotFound extends InfinityError {
  readonly type = "invalid_request_error";
  readonly code = "not_found";
}
