// Loads one model from its layout: what every model needs (tokenizer, the per-input quantization rewrite, session,
// input checks, token budget, the common ServedModel fields), with the family that serves the layout (families/)
// adding its own before the session (worker head, prompt, graphs) and building its engines after.
import { dirname, resolve } from "node:path";
import type { ModelConfig } from "../config";
import { ModelLoadError } from "../errors";
import { log } from "../log";
import type { Metrics } from "../metrics";
import type { MediaPool } from "../media/pool";
import type { ModelLayout } from "../model/layout";
import { readQuantizationRanges } from "../model/quantization-ranges";
import { rowwiseQuantGraph } from "../model/rowwise-quant";
import type { Removable } from "../model/scratch";
import { isTextInput, ModelSession, TASK_ID_INPUT, type WorkerOptions } from "../model/session";
import { DEFAULT_ADAPTER_TASK } from "../tasks/embed";
import type { TaskReader } from "../tasks/task";
import { Encoder, padTokenId, type EncodeOptions, type Encoded } from "../tokenize/encode";
import type { TokenizerPool } from "../tokenize/pool";
import { DEFAULT_RUN_OVERHEAD_TOKENS } from "./batcher";
import { tokenBatches } from "../tasks/batch-input";
import { sessionRunner } from "../tasks/runner";
import { Engine } from "./engine";
import { familyOf } from "./families";
import type { FamilyLoad, FamilyPlan } from "./families/family";
import { CPU_BATCH_TOKENS, estimateActivationBytesPerToken, GPU_BATCH_TOKENS } from "./memory-budget";
import type { ServedBase, ServedModel } from "./served";

/**
 * Requests with at most this many characters are tokenized in-process rather than in a tokenizer worker, which
 * covers one full-length input of a 512-token model. The Rust tokenizers binding encodes on its own thread pool, so
 * the event loop only waits for the answer either way; the worker adds a message round trip and a copy. Measured
 * one ~560-character text at a time (bert-base-uncased, 2 loaded cores, scratch A/B): 0.77-0.88 ms in-process,
 * 1.03-1.64 ms through a worker. Larger requests go to the worker pool, spread over its threads.
 */
export const INLINE_TOKENIZE_CHARS = 4096;

/** What a load uses of the server: the tokenizer and media worker pools, metrics. */
export interface LoadDeps {
  pool: TokenizerPool;
  metrics: Metrics | null;
  mediaPool: MediaPool | null;
  mediaLimits: { maxImagePixels: number };
}

/**
 * Sessions, tokenizer and engines of one model. A model that fails after its sessions were created (tokenizer,
 * media preprocessor) must not leave their inference workers running: with on-demand loading a failed load can be
 * tried again and again, so what was created is released before the error goes on.
 */
export async function loadModel(c: ModelConfig, layout: ModelLayout, cacheScope: string, deps: LoadDeps): Promise<ServedModel> {
  const sessions: ModelSession[] = [];
  const graphs: Removable[] = [];
  try {
    return await assemble(c, layout, cacheScope, deps, sessions, graphs);
  } catch (e) {
    for (const s of sessions) await s.release().catch(() => {});
    for (const g of graphs) g.remove();
    throw e;
  }
}

/** Every session created is pushed to `sessions`, every graph written to `graphs`. */
async function assemble(c: ModelConfig, layout: ModelLayout, cacheScope: string, deps: LoadDeps, sessions: ModelSession[], graphs: Removable[]): Promise<ServedModel> {
  for (const w of layout.warnings) log.warn(w, { model: c.servedModelName });
  if (c.idfMissingWeight !== 0 && !layout.sparse?.query?.idf) {
    throw new ModelLoadError(`--idf-missing-weight ${c.idfMissingWeight} applies to inference-free sparse models with an idf.json (the older OpenSearch layout); this model has none`);
  }
  // Read before any session exists: a bad file fails the load at once.
  if (c.quantizationRanges && layout.task !== "embed" && layout.task !== "hybrid") {
    throw new ModelLoadError(`--quantization-ranges applies to dense embedding models; this is a ${layout.task} model`);
  }
  const quantizationRanges = c.quantizationRanges ? readQuantizationRanges(c.quantizationRanges) : null;
  const rssBefore = process.memoryUsage().rss;
  const worker = (label: string): WorkerOptions => ({
    label,
    timeoutMs: c.inferenceTimeoutSeconds * 1000,
    onFault: () => deps.metrics?.workerRestarts.inc({ model: label }),
  });
  const family = familyOf(layout);
  const tokenizeLength = family.tokenizeLength?.(layout) ?? layout.maxLength;
  let encoder = await Encoder.create(layout.tokenizerJson, layout.tokenizerConfig, tokenizeLength);
  const padId = padTokenId(layout.tokenizerJson, layout.tokenizerConfig, layout.configJson, encoder);
  const key = c.servedModelName;
  const plan: FamilyPlan = (await family.prepare?.({ config: c, layout, key, encoder })) ?? {};
  const textLength = plan.textLength ?? tokenizeLength;
  if (plan.textLength !== undefined) encoder = await Encoder.create(layout.tokenizerJson, layout.tokenizerConfig, textLength);
  const sourceGraph = resolve(layout.dir, layout.onnxFile);
  const split = plan.split ?? null;
  if (split) graphs.push(split);
  // Dynamically quantized exports quantize each activation over the whole batch: rewritten so each input gets the
  // numbers it gets alone (model/rowwise-quant.ts), or kept with the reason logged.
  const rowwise = rowwiseQuantGraph(split?.text ?? sourceGraph, split?.externalDataDir, layout.modelType);
  const rowwiseGraph = rowwise && "path" in rowwise ? rowwise : null;
  if (rowwiseGraph) {
    graphs.push(rowwiseGraph);
    log.info(`${layout.onnxFile}: dynamic int8 quantization made per input (graph rewritten at load): each input's numbers do not depend on its batch`, { model: key, quantizers: rowwiseGraph.quantizers });
  } else if (rowwise && "reason" in rowwise) {
    log.warn(`${layout.onnxFile} quantizes activations over the whole batch and could not be rewritten per input: an input's numbers move slightly with the other inputs of its batch`, { model: key, reason: rowwise.reason });
  }
  const rewritten = plan.rewrite?.(rowwiseGraph?.path ?? split?.text ?? sourceGraph) ?? null;
  if (rewritten) graphs.push(rewritten);
  const graphPath = rewritten?.path ?? rowwiseGraph?.path ?? split?.text ?? sourceGraph;
  // Rewritten graphs read their external data from the export's folder.
  const externalDataDir = rewritten || rowwiseGraph || split ? dirname(resolve(sourceGraph)) : undefined;
  const newSession = (numThreads: number, instances: number) =>
    ModelSession.create(graphPath, { device: c.device, numThreads, externalDataDir }, worker(c.servedModelName), plan.head, instances);
  const session = await newSession(c.numThreads, c.instances || 1);
  sessions.push(session);
  // Every engine over this session dispatches to one runner per instance (the session picks a free instance).
  const each = <X>(runner: X): X[] => Array.from({ length: session.instances }, () => runner);
  const mediaInput = plan.mediaInput ?? null;
  const adapters = layout.taskAdapters;
  const unfed = session.inputNames.filter((n) => !isTextInput(n) && n !== mediaInput && !(n === TASK_ID_INPUT && adapters));
  if (unfed.length) {
    throw new ModelLoadError(
      `${layout.onnxFile} takes input${unfed.length > 1 ? "s" : ""} this server cannot feed: ${unfed.join(", ")} ` +
        `(it feeds input_ids, attention_mask, token_type_ids, position_ids, empty past_key_values, num_logits_to_keep${mediaInput ? `, ${mediaInput}` : ""}). ` +
        `A plain export of the model (optimum-cli export onnx --model <id> <dir>) may take only those`,
    );
  }
  if (adapters && (!session.hasInput(TASK_ID_INPUT) || layout.task !== "embed" || layout.media)) {
    throw new ModelLoadError(
      `config.json declares task adapters (lora_adaptations: ${adapters.names.join(", ")}) but ${layout.onnxFile} ` +
        (session.hasInput(TASK_ID_INPUT) ? `is not a text embedder` : `has no ${TASK_ID_INPUT} input: which adapter it runs is unknown`),
    );
  }
  // Inputs with no task asked for (warm-up) run the default adapter.
  const defaultTaskId = adapters ? Math.max(0, adapters.names.indexOf(DEFAULT_ADAPTER_TASK)) : undefined;
  await deps.pool.load(key, layout.tokenizerJson, layout.tokenizerConfig, textLength);
  // On CPU a batch runs fastest per token at a few hundred tokens (cache); past ~1000 it slows down, while GPUs
  // want large batches. An input longer than the budget runs alone (selectBatch), so the budget is not raised to
  // the model's max length: a long-context model keeps small batches for its short inputs.
  const maxBatchTokens = c.maxBatchTokens || (session.provider === "cpu" ? CPU_BATCH_TOKENS : GPU_BATCH_TOKENS);
  // The RSS growth can hide behind memory the process already had; the weights are resident at least.
  const sessionBytes = () => Math.max(process.memoryUsage().rss - rssBefore, layout.weightBytes);
  const activationBytesPerToken = estimateActivationBytesPerToken(layout.configJson);
  const limits = { maxBatchSize: c.batchSize, maxBatchTokens, maxQueueSize: c.maxQueueSize, runOverheadTokens: c.runOverheadTokens || DEFAULT_RUN_OVERHEAD_TOKENS };
  const tokenize = (texts: string[], firsts?: string[], options?: EncodeOptions): Promise<Encoded[]> => {
    // A worker round trip costs more than tokenizing a few short texts, so small requests stay here.
    let chars = 0;
    for (let i = 0; i < texts.length; i++) chars += texts[i]!.length + (firsts ? firsts[i]!.length : 0);
    const opts = options?.direction ? { direction: options.direction } : undefined;
    if (chars > INLINE_TOKENIZE_CHARS) return deps.pool.encode(key, texts, firsts, opts);
    return encoder.encodeBatch(texts, firsts, opts);
  };
  const base: ServedBase = {
    name: key,
    config: c,
    layout,
    provider: session.provider,
    padId,
    memoryBytes: 0,
    sessionBytes: 0,
    activationBytesPerToken,
    fullLogitsBytesPerToken: 0,
    llmLogits: null,
    logitsGraph: null,
    warmupTokensPerSecond: 0,
    runOverheadSource: c.runOverheadTokens > 0 ? "flag" : "default",
    calibrationOtherLoad: null,
    maxBatchTokensSource: c.maxBatchTokens > 0 ? "flag" : "default",
    instancesSource: c.instances > 0 ? "flag" : "default",
    instancesReason: c.instances > 0 ? `--instances ${c.instances}` : c.modelWarmup ? "one session" : "one session: --no-model-warmup (nothing timed)",
    newSession,
    encode: async (texts, firsts, options) => {
      const encoded = await tokenize(texts, firsts, options);
      if (defaultTaskId !== undefined) for (const e of encoded) e.taskId = options?.taskId ?? defaultTaskId;
      return encoded;
    },
    encoder,
    session,
    cacheScope,
    quantizationRanges,
  };
  const batches = tokenBatches(padId, layout.paddingSide);
  const load: FamilyLoad = {
    config: c, layout, key, encoder, plan, session, padId, base, limits,
    metrics: deps.metrics, mediaPool: deps.mediaPool, mediaLimits: deps.mediaLimits,
    each,
    engine: <R>(reader: TaskReader<R>) => new Engine<R>(key, each(sessionRunner(session, reader)), batches, limits, deps.metrics),
    sessionBytes,
    openSession: async (path, settings, label) => {
      const s = await ModelSession.create(path, { device: c.device, numThreads: c.numThreads, externalDataDir: settings.externalDataDir }, worker(label));
      sessions.push(s);
      return s;
    },
    worker,
  };
  return family.build(load);
}
