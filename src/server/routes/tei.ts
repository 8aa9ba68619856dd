// TEI's API (huggingface/text-embeddings-inference), same paths and JSON: /embed, /predict, /similarity, /tokenize,
// /decode, GET /info, and POST / in the HF Inference shape ({"inputs": ...}) dispatched on the model's task. Each
// is an adapter over the jobs (jobs.ts). /rerank's TEI shape lives in rerank.ts (one path, both shapes).

import { InvalidInput, ModelNotFound } from "../../errors";
import { capabilitiesOf, UNNAMED_MODELS, type Capability } from "../../engine/registry";
import type { ServedModel } from "../../engine/served";
import { promptFor } from "../../tasks/embed";
import { router, type ServerContext } from "../context";
import { reportHeaders, runClassify, runEmbed, runEmbedAll, type EmbedAllJob, type EmbedJob } from "../jobs";
import { teiRerank } from "./rerank";
import { cohereV1Embed } from "./cohere";
import {
  CohereEmbedRequest, HfInferenceRequest, TeiDecodeRequest, TeiEmbedAllRequest, TeiEmbedRequest, TeiPredictRequest, TeiRerankRequest, TeiSimilarityRequest, TeiTokenizeRequest,
} from "../schemas";
import { checkCount, checkTexts } from "../validate";
import { checkShape } from "../validate-shape";
import { API_VERSION } from "./docs";
import { servedName } from "./served";
import { truncationOf } from "./tei-shapes";
import { matrixRows } from "./embeddings";
import type { Static } from "@sinclair/typebox";


type Set = { headers: Record<string, string | number> };

const EMBED_SHAPES = "an embed body is TEI-shaped {inputs} or Cohere v1-shaped {texts}";

/**
 * A model for routes that serve every task (/tokenize, /decode, /info, POST /): by name; the only model; with
 * several and no name, the one model with the capability the body's shape needs (`hint`); otherwise a 400 naming
 * them, or for /info (`first`) the first model. A model loaded on demand is loaded.
 */
export async function anyModel(ctx: ServerContext, signal: AbortSignal, name: string | undefined, hint?: Capability, first = false): Promise<ServedModel> {
  const entries = ctx.registry.entries();
  if (name !== undefined && UNNAMED_MODELS.includes(name)) name = undefined;
  let entry = entries.length === 1 ? entries[0] : name !== undefined ? entries.find((e) => e.name === name) : undefined;
  if (!entry && name === undefined) {
    if (hint) return ctx.registry.lookup(undefined, hint, undefined, signal);
    if (first) entry = entries[0];
  }
  if (!entry) {
    const names = entries.map((e) => e.name).join(", ");
    throw new ModelNotFound(
      name === undefined
        ? `several models are served; name one in \`model\` or use /models/{served-name}/...: ${names}`
        : `model "${name}" is not served; served models: ${names}`,
      "model",
    );
  }
  return ctx.registry.lookup(entry.name, capabilitiesOf(entry.layout.task)[0]!, undefined, signal);
}

/** TEI's inputs, prompt and truncation fields (shared by /embed and /embed_all) as a job's. */
function teiInputsOf(body: Static<typeof TeiEmbedAllRequest>, name: string | undefined): EmbedAllJob {
  const inputs = body.inputs;
  const ids = Array.isArray(inputs) && inputs.length > 0 && typeof inputs[0] !== "string";
  return {
    model: name,
    // TEI's integer inputs are ids of the model's own vocabulary.
    inputs: ids ? { ids: typeof inputs[0] === "number" ? [inputs as number[]] : (inputs as number[][]) } : { texts: inputs as string | string[] },
    field: { name: "inputs", single: typeof inputs === "string" || (ids && typeof inputs[0] === "number") },
    promptName: body.prompt_name ?? undefined,
    inputType: body.input_type,
    truncation: truncationOf(body.truncate, body.truncation_direction),
  };
}

function embedJobOf(body: Static<typeof TeiEmbedRequest>, name: string | undefined): EmbedJob {
  return {
    ...teiInputsOf(body, name),
    dimensions: body.dimensions,
    normalize: body.normalize !== false,
  };
}

/** TEI's predict inputs: a text, one pair [a, b], or a batch of [text] / [a, b]. */
function predictInputs(inputs: Static<typeof TeiPredictRequest>["inputs"]): { list: Array<string | [string, string]>; single: boolean } {
  if (typeof inputs === "string") return { list: [inputs], single: true };
  if (inputs.length === 0) throw new InvalidInput("`inputs` must not be an empty list", "inputs");
  if (inputs.every((x) => typeof x === "string")) {
    // A flat list of one or two strings is one input (TEI): a text or a pair.
    if (inputs.length > 2) throw new InvalidInput("`inputs` as a flat list is one text or one pair [text, text]; send a batch as [[text], [text, text], ...]", "inputs");
    const s = inputs as string[];
    return { list: [s.length === 2 ? [s[0]!, s[1]!] : s[0]!], single: true };
  }
  return {
    list: inputs.map((x, i) => {
      if (typeof x === "string") throw new InvalidInput(`\`inputs[${i}]\` must be [text] or [text, text] in a batch`, "inputs");
      return x.length === 2 ? ([x[0]!, x[1]!] as [string, string]) : x[0]!;
    }),
    single: false,
  };
}

function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.max(Math.sqrt(na) * Math.sqrt(nb), 1e-12);
}

export function teiInfo(ctx: ServerContext, m: ServedModel) {
  const labels = Object.fromEntries(m.layout.labels.map((l, i) => [String(i), l]));
  const label2id = Object.fromEntries(m.layout.labels.map((l, i) => [l, i]));
  const modelType =
    m.task === "embed" || m.task === "hybrid"
      ? { embedding: { pooling: m.layout.pooling } }
      : m.task === "rerank"
        ? { reranker: { id2label: labels, label2id } }
        : { classifier: { id2label: labels, label2id } };
  return {
    model_id: m.config.modelId,
    model_sha: m.config.revision === "main" ? null : m.config.revision,
    model_dtype: m.layout.dtype,
    served_model_name: m.name,
    model_type: modelType,
    max_concurrent_requests: m.engine.batchLimits.maxQueueSize,
    max_input_length: m.layout.maxLength,
    max_batch_tokens: m.engine.batchLimits.maxBatchTokens,
    max_batch_requests: m.engine.batchLimits.maxBatchSize,
    max_client_batch_size: ctx.config.maxInputsPerRequest,
    auto_truncate: true,
    tokenization_workers: ctx.config.tokenizerWorkers,
    version: API_VERSION,
    sha: null,
    docker_label: null,
    // Beyond TEI: every served model, for clients that pick one.
    models: ctx.registry.entries().map((x) => ({ name: x.name, task: x.layout.task, capabilities: capabilitiesOf(x.layout.task), state: x.state })),
  };
}

/** TEI's handlers over the jobs, for its routes and the platforms' (SageMaker, Vertex AI: platforms.ts). */
export function teiHandlers(ctx: ServerContext, fixedModel?: string) {
  const embed = async (body: Static<typeof TeiEmbedRequest>, signal: AbortSignal, set: Set) => {
    const t0 = performance.now();
    const out = await runEmbed(ctx, embedJobOf(body, servedName(fixedModel, body.model)), signal);
    reportHeaders(ctx, set, t0, out);
    return out.vectors.map((v) => Array.from(v));
  };
  const predict = async (body: Static<typeof TeiPredictRequest>, signal: AbortSignal, set: Set, alwaysBatch: boolean) => {
    const t0 = performance.now();
    const { list, single } = predictInputs(body.inputs);
    const out = await runClassify(
      ctx,
      {
        model: servedName(fixedModel, body.model),
        inputs: list,
        field: { name: "inputs", single },
        truncation: truncationOf(body.truncate, body.truncation_direction),
        rawScores: body.raw_scores === true,
      },
      signal,
    );
    reportHeaders(ctx, set, t0, out);
    const rows = out.scores.map((row) => row.map((p) => ({ score: p.score, label: p.label })));
    return single && !alwaysBatch ? rows[0]! : rows;
  };
  const similarity = async (body: Static<typeof TeiSimilarityRequest>, signal: AbortSignal, set: Set) => {
    const t0 = performance.now();
    const { source_sentence, sentences } = body.inputs;
    if (sentences.length === 0) throw new InvalidInput("`inputs.sentences` must not be an empty list", "inputs.sentences");
    const p = body.parameters ?? {};
    const out = await runEmbed(
      ctx,
      {
        model: servedName(fixedModel, body.model),
        inputs: { texts: [source_sentence, ...sentences] },
        field: { name: "inputs", single: false },
        promptName: p.prompt_name ?? undefined,
        truncation: truncationOf(p.truncate, p.truncation_direction),
      },
      signal,
    );
    reportHeaders(ctx, set, t0, out);
    return out.vectors.slice(1).map((v) => cosine(out.vectors[0]!, v));
  };

  /** HF Inference's {inputs, parameters} (and TEI's rerank {query, texts}), dispatched on the model's task. */
  const hfInference = async (b: Record<string, unknown>, signal: AbortSignal, set: Set) => {
    const name = servedName(fixedModel, typeof b.model === "string" ? b.model : undefined);
    const merged = { ...(typeof b.parameters === "object" && b.parameters !== null ? (b.parameters as object) : {}), ...b };
    const hint: Capability | undefined =
      b.texts !== undefined || b.query !== undefined ? "rerank" : typeof b.inputs === "object" && b.inputs !== null && !Array.isArray(b.inputs) ? "embed" : undefined;
    const model = await anyModel(ctx, signal, name, hint);
    const named = { ...merged, model: model.name };
    // {query, texts} reranks with any model that ranks (embedders by similarity), as TEI's Vertex entry matches it first.
    if ((b.query !== undefined || b.texts !== undefined) && capabilitiesOf(model.task).includes("rerank")) {
      return teiRerank(ctx, checkShape(TeiRerankRequest, named, "TEI rerank shape {query, texts}"), model.name, signal, set);
    }
    switch (model.task) {
      case "embed":
      case "hybrid":
        if (typeof b.inputs === "object" && b.inputs !== null && !Array.isArray(b.inputs)) {
          return similarity(checkShape(TeiSimilarityRequest, { ...b, model: model.name }, "HF sentence-similarity shape"), signal, set);
        }
        return embed(checkShape(TeiEmbedRequest, named, "HF feature-extraction shape {inputs}"), signal, set);
      case "classify":
        // HF Inference text-classification answers one list per input, even for one input.
        return predict(checkShape(TeiPredictRequest, named, "HF text-classification shape {inputs}"), signal, set, true);
      case "sparse":
        throw new InvalidInput(`model "${model.name}" is a sparse model: POST its inputs to /embed_sparse (or /models/${model.name}/embed_sparse)`, "inputs");
      case "rerank":
        return teiRerank(ctx, checkShape(TeiRerankRequest, named, "TEI rerank shape {query, texts}"), model.name, signal, set);
    }
  };
  return { embed, predict, similarity, hfInference };
}

export function teiRoutes(ctx: ServerContext, fixedModel?: string) {
  const { embed, predict, similarity, hfInference } = teiHandlers(ctx, fixedModel);
  return router()
    .post(
      "/embed",
      ({ body, request, set }) => {
        // One path, two shapes: Cohere's v1 clients post {texts} to /v1/embed, TEI's post {inputs}.
        const b = body as Record<string, unknown> | null;
        if (typeof b !== "object" || b === null || Array.isArray(b)) throw new InvalidInput(`the body must be a JSON object; ${EMBED_SHAPES}`);
        if (b.inputs === undefined && (b.texts !== undefined || b.images !== undefined)) {
          return cohereV1Embed(ctx, checkShape(CohereEmbedRequest, b, "Cohere v1 shape {texts}"), fixedModel, request.signal, set);
        }
        if (b.inputs === undefined) throw new InvalidInput(`\`inputs\` is required: ${EMBED_SHAPES}`, "inputs");
        return embed(checkShape(TeiEmbedRequest, b, "TEI shape {inputs}"), request.signal, set);
      },
      { detail: { summary: "Embed texts: TEI shape {inputs} (one vector per input) or Cohere v1 {texts} (embeddings_floats / embeddings_by_type)", tags: ["tei"] } },
    )
    .post(
      "/embed_all",
      async ({ body, request, set }) => {
        const t0 = performance.now();
        const out = await runEmbedAll(ctx, teiInputsOf(body, servedName(fixedModel, body.model)), request.signal);
        reportHeaders(ctx, set, t0, out);
        return out.tokens.map((m) => matrixRows(m.data, m.rows, m.dim));
      },
      {
        body: TeiEmbedAllRequest,
        detail: { summary: "Per-token vectors (TEI): the model's last hidden state for every token of each input, special tokens included", tags: ["tei"] },
      },
    )
    .post("/predict", ({ body, request, set }) => predict(body, request.signal, set, false), {
      body: TeiPredictRequest,
      detail: { summary: "Classify texts or text pairs (TEI): labels with scores, best first", tags: ["tei"] },
    })
    .post("/similarity", ({ body, request, set }) => similarity(body, request.signal, set), {
      body: TeiSimilarityRequest,
      detail: { summary: "Cosine similarity of a source sentence to each sentence (TEI / HF sentence-similarity)", tags: ["tei"] },
    })
    .post(
      "/tokenize",
      async ({ body, request }) => {
        const model = await anyModel(ctx, request.signal, servedName(fixedModel, body.model));
        const texts = checkTexts(body.inputs, "inputs", ctx.config);
        const prompt = promptFor(model.layout.prompts, model.layout.defaultPromptName, { promptName: body.prompt_name ?? undefined });
        return Promise.all(texts.map((text) => model.encoder.tokens(prompt + text, body.add_special_tokens !== false)));
      },
      { body: TeiTokenizeRequest, detail: { summary: "Tokenize texts (TEI): ids, token texts, byte offsets, special flags", tags: ["tei"] } },
    )
    .post(
      "/decode",
      async ({ body, request }) => {
        const model = await anyModel(ctx, request.signal, servedName(fixedModel, body.model));
        const ids = body.ids;
        const seqs = ids.length > 0 && typeof ids[0] === "number" ? [ids as number[]] : (ids as number[][]);
        if (seqs.length === 0) throw new InvalidInput("`ids` must not be an empty list", "ids");
        checkCount(seqs.length, "ids", ctx.config);
        const vocab = model.encoder.vocabSize;
        seqs.forEach((seq, i) => {
          for (const id of seq) {
            if (id < 0 || id >= vocab) throw new InvalidInput(`\`ids${seqs.length > 1 ? `[${i}]` : ""}\` has token id ${id}, outside the model's vocabulary (0..${vocab - 1})`, "ids");
          }
          return seq;
        });
        return Promise.all(seqs.map((seq) => model.encoder.decode(seq, body.skip_special_tokens !== false)));
      },
      { body: TeiDecodeRequest, detail: { summary: "Decode token ids to text (TEI)", tags: ["tei"] } },
    )
    .get(
      "/info",
      async ({ query, request }) => teiInfo(ctx, await anyModel(ctx, request.signal, servedName(fixedModel, (query as { model?: string }).model), undefined, true)),
      { detail: { summary: "Model and server info (TEI); ?model= picks a model", tags: ["tei"] } },
    )
    .post("/", ({ body, request, set }) => hfInference(body as Record<string, unknown>, request.signal, set), {
      body: HfInferenceRequest,
      detail: { summary: "HF Inference shape {inputs, parameters}: the model's task decides (TEI)", tags: ["tei"] },
    })
    // SageMaker's route (TEI's SageMaker entry): the same dispatch as POST /.
    .post("/invocations", ({ body, request, set }) => hfInference(body as Record<string, unknown>, request.signal, set), {
      body: HfInferenceRequest,
      detail: { summary: "SageMaker: POST / under SageMaker's path; {inputs} embeds or classifies as the model's task says, {query, texts} reranks", tags: ["platforms"] },
    });
}
