// TEI's gRPC API (tei.v1, tei.proto) and gRPC's health service on --grpc-port, with @grpc/grpc-js. Every call runs
// through the same jobs as HTTP (validation, limits, the result cache, the batcher), behind the same API key (the
// `authorization` metadata), its errors mapped to gRPC status codes. A call may name its model in the `model`
// metadata; without it, the one model that serves the method's task. Streams run each message as it arrives (they
// batch with each other and with HTTP traffic) and answer in their order.
import * as grpc from "@grpc/grpc-js";
import { fromJSON } from "@grpc/proto-loader";
import type { Capability } from "../../engine/registry";
import type { ServedModel } from "../../engine/served";
import { InvalidInput, ModelNotFound, Unavailable } from "../../errors";
import { log } from "../../log";
import { promptFor } from "../../tasks/embed";
import { checkApiKey } from "../auth";
import type { ServerContext } from "../context";
import { toErrorReply } from "../errors";
import { runClassify, runEmbed, runEmbedAll, runRerank, runSparse, type JobReport } from "../jobs";
import { readinessStatus } from "../routes/health";
import { anyModel, teiInfo } from "../routes/tei";
import { truncationOf } from "../routes/tei-shapes";
import { checkCount, checkTexts } from "../validate";
import descriptor from "./protos.json";

type Message = Record<string, any>;
type Call = grpc.ServerUnaryCall<Message, Message> | grpc.ServerDuplexStream<Message, Message> | grpc.ServerReadableStream<Message, Message>;

const OPTIONS = { keepCase: true, defaults: true, enums: String, longs: Number, oneofs: true } as const;

/** The gRPC status for an error the server raised (the HTTP status it maps to, and ModelNotFound). */
export function grpcStatusOf(e: unknown): { code: grpc.status; message: string; retryAfter: string | null } {
  const reply = toErrorReply(e);
  const message = reply.body.error.message;
  const retryAfter = reply.headers["retry-after"] ?? null;
  if (e instanceof ModelNotFound) return { code: grpc.status.NOT_FOUND, message, retryAfter };
  const byStatus: Record<number, grpc.status> = {
    400: grpc.status.INVALID_ARGUMENT, 413: grpc.status.INVALID_ARGUMENT, 415: grpc.status.INVALID_ARGUMENT,
    401: grpc.status.UNAUTHENTICATED, 404: grpc.status.NOT_FOUND, 429: grpc.status.RESOURCE_EXHAUSTED,
    499: grpc.status.CANCELLED, 503: grpc.status.UNAVAILABLE,
  };
  return { code: byStatus[reply.status] ?? grpc.status.INTERNAL, message, retryAfter };
}

function serviceError(e: unknown): Partial<grpc.StatusObject> {
  const { code, message, retryAfter } = grpcStatusOf(e);
  const metadata = new grpc.Metadata();
  // Overloaded (429) and not-yet-loaded models (503) say when to try again, as HTTP's Retry-After.
  if (retryAfter) metadata.set("retry-after", retryAfter);
  return { code, details: message, metadata };
}

const direction = (d: string | undefined) => (d === "TRUNCATION_DIRECTION_LEFT" ? "left" : "right");

function metadataOf(report: JobReport, chars: number, t0: number) {
  const ns = (ms: number) => Math.round(ms * 1e6);
  return {
    compute_chars: chars,
    compute_tokens: report.usage.prompt_tokens,
    total_time_ns: ns(performance.now() - t0),
    tokenization_time_ns: ns(report.tokenizeMs),
    queue_time_ns: ns(report.queueMs),
    inference_time_ns: ns(report.inferenceMs),
  };
}

export interface GrpcServer {
  port: number;
  /** Takes no new calls; the calls taken go on. */
  shutdown(): Promise<void>;
  /** Closes every connection now: once the engines ran dry (their answers written), or at the shutdown timeout. */
  close(): void;
}

export async function startGrpc(ctx: ServerContext, host: string, port: number): Promise<GrpcServer> {
  const pkg = grpc.loadPackageDefinition(fromJSON(descriptor as Parameters<typeof fromJSON>[0], OPTIONS)) as any;
  const tei = pkg.tei.v1;
  const server = new grpc.Server({
    "grpc.max_receive_message_length": ctx.config.maxRequestBytes,
    "grpc.max_send_message_length": -1,
  });

  /** The call's own abort signal (cancelled when the client goes) and its model name from metadata. */
  const begin = (call: Call, counted: boolean) => {
    if (ctx.config.apiKeys.length) checkApiKey(String(call.metadata.get("authorization")[0] ?? "") || null, ctx.config.apiKeys);
    if (ctx.shuttingDown) throw new Unavailable("the server is shutting down");
    const abort = new AbortController();
    (call as grpc.ServerUnaryCall<Message, Message>).on("cancelled", () => abort.abort());
    const named = call.metadata.get("model")[0];
    const model = named === undefined ? undefined : String(named);
    let ended = false;
    // Counted like an HTTP request (shutdown waits for it): a unary call until answered; a stream per message.
    if (counted) ctx.inflight++;
    // Answered: the models this call held may be unloaded again (as HTTP's onAfterResponse).
    const end = () => {
      if (ended) return;
      ended = true;
      if (counted) ctx.inflight--;
      ctx.registry.endRequest(abort.signal);
    };
    return { signal: abort.signal, model, end };
  };

  /** A unary method from a handler of one request message. */
  const unary = (handle: (req: Message, signal: AbortSignal, model: string | undefined) => Promise<Message>) =>
    (call: grpc.ServerUnaryCall<Message, Message>, callback: grpc.sendUnaryData<Message>) => {
      let end = () => {};
      (async () => {
        const b = begin(call, true);
        end = b.end;
        return handle(call.request, b.signal, b.model);
      })().then(
        (res) => { end(); callback(null, res); },
        (e) => { end(); callback(serviceError(e)); },
      );
    };

  /** A stream method: each message handled as it arrives, the answers written in order; the first error ends it. */
  const stream = (handle: (req: Message, signal: AbortSignal, model: string | undefined) => Promise<Message>) => (call: grpc.ServerDuplexStream<Message, Message>) => {
    let b: ReturnType<typeof begin>;
    try {
      b = begin(call, false);
    } catch (e) {
      call.emit("error", serviceError(e));
      return;
    }
    let chain = Promise.resolve();
    // Failed: the first error ended the call with its status; closed: the client cancelled (its queued work is dropped).
    let failed = false;
    let closed = false;
    const gone = () => {
      closed = true;
      b.end();
    };
    // A client that cancels is seen as "cancelled", or (cancelling before its first message was read) only "close".
    call.on("cancelled", gone);
    call.on("close", gone);
    call.on("data", (req: Message) => {
      if (failed || closed) return;
      ctx.inflight++;
      const answer = handle(req, b.signal, b.model);
      answer.catch(() => {}).finally(() => ctx.inflight--); // reported in order below
      chain = chain.then(async () => {
        if (failed || closed) return;
        try {
          call.write(await answer);
        } catch (e) {
          if (failed || closed) return;
          failed = true;
          b.end();
          call.emit("error", serviceError(e));
        }
      });
    });
    call.on("end", () => {
      void chain.then(() => {
        if (failed || closed) return;
        b.end();
        call.end();
      });
    });
  };

  const embed = async (req: Message, signal: AbortSignal, model: string | undefined) => {
    const t0 = performance.now();
    const out = await runEmbed(ctx, {
      model, inputs: { texts: req.inputs }, field: { name: "inputs", single: true }, promptName: req.prompt_name ?? undefined,
      truncation: truncationOf(req.truncate, direction(req.truncation_direction)), normalize: req.normalize === true,
    }, signal);
    return { embeddings: Array.from(out.vectors[0]!), metadata: metadataOf(out, req.inputs.length, t0) };
  };
  const embedSparse = async (req: Message, signal: AbortSignal, model: string | undefined) => {
    const t0 = performance.now();
    const served = await ctx.registry.lookup(model, "embed_sparse", undefined, signal);
    const out = await runSparse(ctx, served as Parameters<typeof runSparse>[1], { input: req.inputs, field: "inputs", request: { promptName: req.prompt_name ?? undefined } }, signal);
    const v = out.vectors[0]!;
    return { sparse_embeddings: Array.from(v.indices, (index, i) => ({ index, value: v.values[i]! })), metadata: metadataOf(out, req.inputs.length, t0) };
  };
  const embedAll = async (req: Message, signal: AbortSignal, model: string | undefined) => {
    const t0 = performance.now();
    const out = await runEmbedAll(ctx, {
      model, inputs: { texts: req.inputs }, field: { name: "inputs", single: true }, promptName: req.prompt_name ?? undefined,
      truncation: truncationOf(req.truncate, direction(req.truncation_direction)),
    }, signal);
    const m = out.tokens[0]!;
    const rows = Array.from({ length: m.rows }, (_, r) => ({ embeddings: Array.from(m.data.subarray(r * m.dim, (r + 1) * m.dim)) }));
    return { token_embeddings: rows, metadata: metadataOf(out, req.inputs.length, t0) };
  };
  const classify = async (input: string | [string, string], req: Message, signal: AbortSignal, model: string | undefined) => {
    const t0 = performance.now();
    const out = await runClassify(ctx, {
      model, inputs: [input], field: { name: "inputs", single: true },
      truncation: truncationOf(req.truncate, direction(req.truncation_direction)), rawScores: req.raw_scores === true,
    }, signal);
    const chars = typeof input === "string" ? input.length : input[0].length + input[1].length;
    return { predictions: out.scores[0]!.map((p) => ({ score: p.score, label: p.label })), metadata: metadataOf(out, chars, t0) };
  };
  const predictPair = (req: Message, signal: AbortSignal, model: string | undefined) => {
    const inputs = req.inputs as string[];
    if (inputs.length !== 2) throw new InvalidInput(`\`inputs\` of PredictPair is a pair of two texts, got ${inputs.length}`, "inputs");
    return classify([inputs[0]!, inputs[1]!], req, signal, model);
  };
  const rerank = async (req: Message, texts: string[], signal: AbortSignal, model: string | undefined) => {
    const t0 = performance.now();
    const out = await runRerank(ctx, {
      model, query: req.query, documents: texts, field: "texts",
      truncation: truncationOf(req.truncate, direction(req.truncation_direction)), rawScores: req.raw_scores === true,
    }, signal);
    const chars = req.query.length * texts.length + texts.reduce((a, t) => a + t.length, 0);
    return {
      ranks: out.ranked.map((r) => ({ index: r.index, score: r.score, ...(req.return_text ? { text: texts[r.index]! } : {}) })),
      metadata: metadataOf(out, chars, t0),
    };
  };
  const anyOf = (signal: AbortSignal, model: string | undefined, hint?: Capability): Promise<ServedModel> => anyModel(ctx, signal, model, hint);
  const tokenize = async (req: Message, signal: AbortSignal, model: string | undefined) => {
    const served = await anyOf(signal, model);
    const [text] = checkTexts(req.inputs, "inputs", ctx.config);
    const prompt = promptFor(served.layout.prompts, served.layout.defaultPromptName, { promptName: req.prompt_name ?? undefined });
    const tokens = await served.encoder.tokens(prompt + text!, req.add_special_tokens === true);
    return { tokens: tokens.map((t) => ({ id: t.id, text: t.text, special: t.special, ...(t.start !== null ? { start: t.start } : {}), ...(t.stop !== null ? { stop: t.stop } : {}) })) };
  };
  const decode = async (req: Message, signal: AbortSignal, model: string | undefined) => {
    const served = await anyOf(signal, model);
    const ids = req.ids as number[];
    checkCount(1, "ids", ctx.config);
    const vocab = served.encoder.vocabSize;
    for (const id of ids) if (id >= vocab) throw new InvalidInput(`\`ids\` has token id ${id}, outside the model's vocabulary (0..${vocab - 1})`, "ids");
    return { text: await served.encoder.decode(ids, req.skip_special_tokens === true) };
  };
  const info = async (_req: Message, signal: AbortSignal, model: string | undefined) => {
    const i = teiInfo(ctx, await anyOf(signal, model));
    const type = "embedding" in i.model_type ? "MODEL_TYPE_EMBEDDING" : "reranker" in i.model_type ? "MODEL_TYPE_RERANKER" : "MODEL_TYPE_CLASSIFIER";
    return {
      version: i.version, model_id: i.model_id, ...(i.model_sha ? { model_sha: i.model_sha } : {}), model_dtype: i.model_dtype, model_type: type,
      max_concurrent_requests: i.max_concurrent_requests, max_input_length: i.max_input_length, max_batch_tokens: i.max_batch_tokens,
      max_batch_requests: i.max_batch_requests, max_client_batch_size: i.max_client_batch_size, tokenization_workers: i.tokenization_workers,
    };
  };

  server.addService(tei.Info.service, { Info: unary(info) });
  server.addService(tei.Embed.service, {
    Embed: unary(embed), EmbedStream: stream(embed),
    EmbedSparse: unary(embedSparse), EmbedSparseStream: stream(embedSparse),
    EmbedAll: unary(embedAll), EmbedAllStream: stream(embedAll),
  });
  const predict = (req: Message, signal: AbortSignal, model: string | undefined) => classify(req.inputs, req, signal, model);
  server.addService(tei.Predict.service, {
    Predict: unary(predict), PredictStream: stream(predict), PredictPair: unary(predictPair), PredictPairStream: stream(predictPair),
  });
  server.addService(tei.Rerank.service, {
    Rerank: unary((req, signal, model) => rerank(req, req.texts, signal, model)),
    // A client stream of (query, text): ranked together once it ends; the first message's query and options count.
    RerankStream: (call: grpc.ServerReadableStream<Message, Message>, callback: grpc.sendUnaryData<Message>) => {
      const messages: Message[] = [];
      let b: ReturnType<typeof begin>;
      try {
        b = begin(call, true);
      } catch (e) {
        callback(serviceError(e));
        return;
      }
      call.on("data", (m: Message) => messages.push(m));
      call.on("cancelled", () => b.end());
      call.on("end", () => {
        const first = messages[0];
        const done = first ? rerank(first, messages.map((m) => m.text), b.signal, b.model) : Promise.reject(new InvalidInput("RerankStream received no message", "text"));
        done.then((res) => { b.end(); callback(null, res); }, (e) => { b.end(); callback(serviceError(e)); });
      });
    },
  });
  server.addService(tei.Tokenize.service, { Tokenize: unary(tokenize), TokenizeStream: stream(tokenize), Decode: unary(decode), DecodeStream: stream(decode) });

  // grpc.health.v1: SERVING when /health would answer 200; the services by name as well as "" (the server).
  const services = new Set(["", ...["Info", "Embed", "Predict", "Rerank", "Tokenize"].map((s) => `tei.v1.${s}`)]);
  const statusOf = (service: string) => (!services.has(service) ? "SERVICE_UNKNOWN" : readinessStatus(ctx) === "ready" ? "SERVING" : "NOT_SERVING");
  server.addService(pkg.grpc.health.v1.Health.service, {
    Check: (call: grpc.ServerUnaryCall<Message, Message>, callback: grpc.sendUnaryData<Message>) => {
      const status = statusOf(call.request.service);
      if (status === "SERVICE_UNKNOWN") callback({ code: grpc.status.NOT_FOUND, details: `unknown service "${call.request.service}"` });
      else callback(null, { status });
    },
    Watch: (call: grpc.ServerWritableStream<Message, Message>) => {
      let last = "";
      const send = () => {
        const status = statusOf(call.request.service);
        if (status !== last) call.write({ status: (last = status) });
      };
      send();
      const timer = setInterval(send, 1000);
      call.on("cancelled", () => {
        clearInterval(timer);
        call.end();
      });
    },
  });

  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host.includes(":") ? `[${host}]` : host}:${port}`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  log.info("gRPC listening", { address: `${host}:${bound}`, services: "tei.v1 (Info, Embed, Predict, Rerank, Tokenize), grpc.health.v1" });
  return {
    port: bound,
    // No new calls; those taken run on (their work is in the engines, which the server's shutdown waits for).
    async shutdown() {
      server.tryShutdown(() => {});
    },
    close: () => server.forceShutdown(),
  };
}
