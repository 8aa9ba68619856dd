// POST /embeddings (OpenAI schema): text goes through the embed job (jobs.ts); image/audio inputs to the model's
// media tower; sparse models answer {indices, values}. Integer inputs are OpenAI token ids (cl100k_base): decoded,
// then tokenized by the model, as OpenAI clients mean them.

import { InvalidInput } from "../../errors";
import type { MediaTower, ServedModel } from "../../engine/served";
import { finishEmbedding, type PromptRequest } from "../../tasks/embed";
import { encodeVector, bytesBase64, type VectorType } from "../../tasks/quantize";
import { decodeOpenAiTokens } from "../../tokenize/openai-ids";
import { checkPruning, pruneSparse } from "../../tasks/sparse";
import { colbertKind, type MultiVector } from "../../tasks/multivector";
import { colpaliTextKind } from "../../tasks/colpali";
import { checkHybridOutputs, parseOutputs, type HybridOutput } from "../../tasks/hybrid";
import type { Encoded } from "../../tokenize/encode";
import { inputKey, VECTOR_CODEC } from "../../cache/cache";
import { cacheHeader, responseMeta, router, timingHeaders, usageOf, usageOfCounts, type ServerContext } from "../context";
import { checkDimensions, colpaliEmbed, quantizationRangesFor, reportHeaders, runEmbed, runHybrid, runMultiVector, runSparse, type TextEmbedModel } from "../jobs";
import { mediaFiles } from "../media-inputs";
import { EmbeddingsRequest, ENCODING_FORMATS } from "../schemas";
import { servedName } from "./served";
import { truncationOf } from "./tei-shapes";
import { checkCount } from "../validate";

type HybridModel = Extract<ServedModel, { task: "hybrid" }>;

const MODALITIES = ["text", "image", "audio"] as const;
type Modality = (typeof MODALITIES)[number];

/** The tower that embeds a modality, or a 400 that names what the model serves. */
function towerFor(model: TextEmbedModel, modality: string): MediaTower | null {
  if (!(MODALITIES as readonly string[]).includes(modality)) {
    throw new InvalidInput(`modality must be one of ${MODALITIES.join(", ")}, got "${modality}"`, "modality");
  }
  if (modality === "text") return null;
  if (model.task === "embed" && model.media?.modality === modality) return model.media;
  const served = model.layout.modalities.length === 1 ? "text only" : model.layout.modalities.join(" and ");
  throw new InvalidInput(`model "${model.name}" serves ${served}; modality "${modality}" is not supported by it`, "modality");
}

/** The one output kind of a model that is not hybrid, by its `output` name. */
const OUTPUT_OF_TASK: Record<string, HybridOutput> = { embed: "dense", sparse: "sparse", multivector: "multi_vector" };

/** Rows of a row-major matrix as nested lists (the float encoding of a multi-vector embedding). */
export function matrixRows(data: Float32Array, rows: number, dim: number): number[][] {
  const out: number[][] = new Array(rows);
  for (let r = 0; r < rows; r++) out[r] = Array.from(data.subarray(r * dim, (r + 1) * dim));
  return out;
}

/** encoding_format: float / base64 (float32), int8 / uint8 / binary / ubinary, and base64_<type> of those. */
export function parseEncodingFormat(format: string | undefined): { type: VectorType; base64: boolean } {
  const f = format ?? "float";
  if (!(ENCODING_FORMATS as readonly string[]).includes(f)) {
    throw new InvalidInput(`\`encoding_format\` must be one of ${ENCODING_FORMATS.join(", ")}, got "${f}"`, "encoding_format");
  }
  if (f === "base64") return { type: "float", base64: true };
  if (f.startsWith("base64_")) return { type: f.slice(7) as VectorType, base64: true };
  return { type: f as VectorType, base64: false };
}

export function embeddingsRoutes(ctx: ServerContext, fixedModel?: string) {
  return router().post(
    "/embeddings",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const name = servedName(fixedModel, body.model);
      const model = (await ctx.registry.lookup(name, "embed", undefined, request.signal)) as TextEmbedModel;
      const modality = body.modality ?? "text";
      const colpali = model.task === "multivector" ? model.colpali : null;
      // ColPali takes images through its own graph, not a media tower.
      const tower = colpali ? null : towerFor(model, modality);
      let input: unknown = body.input;
      /** Token-id input kept as ids of the model's own vocabulary (--openai-token-ids model). */
      let modelIds: number[][] | null = null;
      if (modality === "text" && Array.isArray(input) && input.length > 0 && typeof input[0] !== "string") {
        const seqs = typeof input[0] === "number" ? [input as number[]] : (input as number[][]);
        checkCount(seqs.length, "input", ctx.config);
        if (ctx.config.openaiTokenIds === "model") {
          if (colpali) throw new InvalidInput(`model "${model.name}" (ColPali or ColModernVBERT) takes text, not token ids`, "input");
          modelIds = seqs;
        } else {
          // OpenAI clients (LangChain's OpenAIEmbeddings by default) send cl100k_base token ids: decode them to text.
          const texts = decodeOpenAiTokens(seqs, "input");
          input = typeof input[0] === "number" ? texts[0]! : texts;
        }
      }
      const promptRequest: PromptRequest = { promptName: body.prompt_name, inputType: body.input_type, task: body.task };
      const outputs = parseOutputs(body.output);
      if (model.task !== "hybrid" && body.output !== undefined && body.output !== null) {
        const kind = OUTPUT_OF_TASK[model.task]!;
        if (outputs.length !== 1 || outputs[0] !== kind) {
          throw new InvalidInput(`model "${model.name}" gives ${kind} vectors only; \`output\` ${outputs.join(", ")} needs a hybrid (bge-m3) model`, "output");
        }
      }
      if (model.task === "hybrid" && !(outputs.length === 1 && outputs[0] === "dense")) {
        if (tower) throw new InvalidInput(`model "${model.name}" embeds text only`, "modality");
        const format = body.encoding_format ?? "float";
        if (format !== "float" && format !== "base64") throw new InvalidInput("sparse and multi-vector outputs are answered as float or base64 only", "encoding_format");
        if (body.dimensions && !outputs.includes("dense")) throw new InvalidInput("dimensions applies to the dense output only", "dimensions");
        const dimensions = checkDimensions(model, body.dimensions, "dimensions");
        const pruning = { topK: body.top_k, threshold: body.threshold };
        checkPruning(pruning);
        const out = await runHybrid(ctx, model, { input, field: "input", request: promptRequest, outputs }, request.signal);
        reportHeaders(ctx, set, t0, out);
        const results = out.results;
        const base64 = format === "base64";
        const sparseOf = (index: number) => {
          const v = pruneSparse(results[index]!.sparse!, pruning);
          return { indices: Array.from(v.indices), values: Array.from(v.values) };
        };
        const multiOf = (index: number) => {
          const m = results[index]!.multiVector!;
          return base64 ? bytesBase64(m.data) : matrixRows(m.data, m.rows, m.dim);
        };
        const shapeOf = (index: number) => (base64 && outputs.includes("multi_vector") ? { shape: [results[index]!.multiVector!.rows, results[index]!.multiVector!.dim] } : {});
        return {
          object: "list" as const,
          data: results.map((r, index) => {
            if (typeof body.output === "string") {
              return { object: "embedding" as const, embedding: outputs[0] === "sparse" ? sparseOf(index) : multiOf(index), ...shapeOf(index), index };
            }
            // A list of outputs: one object per input holding each asked output in its own shape.
            const embedding: Record<string, unknown> = {};
            for (const o of outputs) {
              if (o === "dense") embedding.dense = encodeVector(finishEmbedding(r.dense, dimensions, body.normalize !== false), "float", base64);
              else if (o === "sparse") embedding.sparse = sparseOf(index);
              else embedding.multi_vector = multiOf(index);
            }
            return { object: "embedding" as const, embedding, ...shapeOf(index), index };
          }),
          model: model.name,
          usage: out.usage,
          ...responseMeta("embd"),
        };
      }
      if (model.task === "multivector") {
        if (tower) throw new InvalidInput(`model "${model.name}" embeds text only`, "modality");
        if (body.dimensions) throw new InvalidInput("dimensions does not apply to a multi-vector model", "dimensions");
        if (body.encoding_format !== undefined && body.encoding_format !== "float" && body.encoding_format !== "base64") {
          throw new InvalidInput("a multi-vector model answers float or base64 only", "encoding_format");
        }
        let answer: { results: MultiVector[]; usage: { prompt_tokens: number; total_tokens: number }; tokenizeMs: number; queueMs: number; inferenceMs: number };
        if (model.colpali) {
          if (modality !== "text" && modality !== "image") throw new InvalidInput(`model "${model.name}" serves text and image; modality "${modality}" is not supported by it`, "modality");
          if (body.prompt_name !== undefined) throw new InvalidInput("prompt_name does not apply to a ColPali or ColModernVBERT model (its query prefix is in processor_config.json)", "prompt_name");
          if (modality === "image" && body.input_type !== undefined) throw new InvalidInput("input_type applies to text only, not to modality image", "input_type");
          if (modality === "text") colpaliTextKind(body.input_type);
          const field = { name: "input", single: typeof input === "string" };
          const out = await colpaliEmbed(ctx, { ...model, colpali: model.colpali }, modality, input, field, request.signal, ctx.config.maxVectorsPerRequest);
          answer = { ...out, usage: usageOfCounts(out.tokens), tokenizeMs: 0 };
        } else {
          const kind = colbertKind(body.input_type);
          const out = await runMultiVector(ctx, model, { input, field: "input", request: promptRequest, kind }, request.signal);
          cacheHeader(set, ctx, out.hits);
          answer = { ...out, results: out.matrices };
        }
        const { results, usage, tokenizeMs, queueMs, inferenceMs } = answer;
        timingHeaders(set, tokenizeMs, queueMs, inferenceMs, performance.now() - t0);
        return {
          object: "list" as const,
          data: results.map((m, index) =>
            body.encoding_format === "base64"
              ? { object: "embedding" as const, embedding: bytesBase64(m.data), shape: [m.rows, m.dim], index }
              : { object: "embedding" as const, embedding: matrixRows(m.data, m.rows, m.dim), index },
          ),
          model: model.name,
          usage,
          ...responseMeta("embd"),
        };
      }
      if (model.task === "sparse") {
        if (body.dimensions) throw new InvalidInput("dimensions does not apply to a sparse model", "dimensions");
        const pruning = { topK: body.top_k, threshold: body.threshold };
        checkPruning(pruning);
        const out = await runSparse(ctx, model, { input, field: "input", request: promptRequest }, request.signal);
        reportHeaders(ctx, set, t0, out);
        return {
          object: "list" as const,
          // Sparse vectors are always JSON (encoding_format does not apply): indices ascending.
          data: out.vectors.map((v) => pruneSparse(v, pruning)).map((v, index) => ({ object: "embedding" as const, embedding: { indices: Array.from(v.indices), values: Array.from(v.values) }, index })),
          model: model.name,
          usage: out.usage,
          ...responseMeta("embd"),
        };
      }
      const format = parseEncodingFormat(body.encoding_format);
      const ranges = quantizationRangesFor(model, [format.type], body.dimensions, "dimensions");
      const reply = (vectors: Float32Array[], usage: { prompt_tokens: number; total_tokens: number }) => ({
        object: "list" as const,
        data: vectors.map((v, index) => ({ object: "embedding" as const, embedding: encodeVector(v, format.type, format.base64, ranges), index })),
        model: model.name,
        usage,
        ...responseMeta("embd"),
      });
      if (tower) {
        if (body.prompt_name !== undefined) throw new InvalidInput(`prompt_name applies to text only, not to modality ${tower.modality}`, "prompt_name");
        if (body.input_type !== undefined) throw new InvalidInput(`input_type applies to text only, not to modality ${tower.modality}`, "input_type");
        if (body.task !== undefined) throw new InvalidInput(`task applies to text only, not to modality ${tower.modality}`, "task");
        const dimensions = checkDimensions(model, body.dimensions, "dimensions");
        const files = await mediaFiles(input, tower.modality, ctx, request.signal);
        // Media usage counts inputs: there are no tokens to bill. Each input goes through the result cache.
        const keys = files.map((f) => inputKey(model.cacheScope, tower.modality, f));
        const out = await ctx.cache.through(model.name, keys, VECTOR_CODEC, async (missing) => {
          const inputs = await tower.prepare(missing.map((i) => files[i]!));
          return { ...(await tower.engine.submit(inputs, request.signal)), tokens: missing.map(() => 1) };
        });
        cacheHeader(set, ctx, out.hits);
        // Media inputs are decoded and resized, not tokenized.
        timingHeaders(set, 0, out.queueMs, out.inferenceMs, performance.now() - t0);
        return reply(out.results.map((v) => finishEmbedding(v, dimensions, body.normalize !== false)), usageOfCounts(out.tokens));
      }
      const out = await runEmbed(
        ctx,
        {
          model: model.name,
          inputs: modelIds ? { ids: modelIds } : { texts: input as string | string[] },
          field: { name: "input", single: typeof input === "string" || typeof (input as unknown[])[0] === "number" },
          promptName: body.prompt_name,
          inputType: body.input_type,
          task: body.task,
          truncation: truncationOf(body.truncate, body.truncation_direction),
          dimensions: body.dimensions,
          normalize: body.normalize !== false,
        },
        request.signal,
      );
      reportHeaders(ctx, set, t0, out);
      return reply(out.vectors, out.usage);
    },
    {
      body: EmbeddingsRequest,
      detail: { summary: "Create embeddings (OpenAI-compatible)", tags: ["embeddings"] },
    },
  );
}
