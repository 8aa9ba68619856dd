// POST /embeddings (OpenAI schema).

import { InvalidInput, InvalidMedia } from "../../errors";
import type { MediaTower, ServedModel } from "../../engine/registry";
import { mediaBytes, type SourceSettings } from "../../media/source";
import { finishEmbedding, toBase64 } from "../../tasks/embed";
import type { Encoded } from "../../tokenize/encode";
import { responseMeta, router, timingHeaders, usageOf, type ServerContext } from "../context";
import { EmbeddingsRequest } from "../schemas";
import { checkCount, checkTexts } from "../validate";

type EmbedModel = Extract<ServedModel, { task: "embed" }>;

/** Token-id inputs are the model's own vocabulary ids, fed as given (truncated to the model's limit). */
function tokenInputs(input: number[] | number[][], model: EmbedModel, ctx: ServerContext): Encoded[] {
  const seqs = typeof input[0] === "number" ? [input as number[]] : (input as number[][]);
  checkCount(seqs.length, "input", ctx.config);
  const vocab = model.encoder.vocabSize;
  return seqs.map((seq, i) => {
    if (seq.length === 0) throw new InvalidInput(`\`input[${i}]\` is an empty token list`, "input");
    for (const id of seq) {
      if (id < 0 || id >= vocab) throw new InvalidInput(`\`input[${i}]\` has token id ${id}, outside the model's vocabulary (0..${vocab - 1})`, "input");
    }
    return { ids: Int32Array.from(seq.slice(0, model.layout.maxLength)), typeIds: null };
  });
}

function promptFor(model: EmbedModel, promptName: string | undefined): string {
  const name = promptName ?? model.layout.defaultPromptName ?? undefined;
  if (name === undefined) return "";
  const prompt = model.layout.prompts[name];
  if (prompt === undefined) {
    const known = Object.keys(model.layout.prompts);
    throw new InvalidInput(
      `prompt_name "${name}" is not defined by this model` + (known.length ? `; it defines ${known.join(", ")}` : "; it defines no prompts"),
      "prompt_name",
    );
  }
  return prompt;
}

const MODALITIES = ["text", "image", "audio"] as const;
type Modality = (typeof MODALITIES)[number];

/** The tower that embeds a modality, or a 400 that names what the model serves. */
function towerFor(model: EmbedModel, modality: string): MediaTower | null {
  if (!(MODALITIES as readonly string[]).includes(modality)) {
    throw new InvalidInput(`modality must be one of ${MODALITIES.join(", ")}, got "${modality}"`, "modality");
  }
  if (modality === "text") return null;
  if (model.media?.modality === modality) return model.media;
  const served = model.layout.modalities.length === 1 ? "text only" : model.layout.modalities.join(" and ");
  throw new InvalidInput(`model "${model.name}" serves ${served}; modality "${modality}" is not supported by it`, "modality");
}

/** Image/audio inputs: data: URIs or URLs, fetched and decoded into file bytes (in input order). */
async function mediaFiles(input: unknown, modality: Exclude<Modality, "text">, ctx: ServerContext, signal: AbortSignal): Promise<Uint8Array[]> {
  const list = typeof input === "string" ? [input] : input;
  if (!Array.isArray(list) || list.some((x) => typeof x !== "string")) {
    throw new InvalidInput(`\`input\` must be a ${modality} (data: URI or http(s) URL) or a list of them`, "input");
  }
  if (list.length === 0) throw new InvalidInput("`input` must not be an empty list", "input");
  checkCount(list.length, "input", ctx.config);
  const m = ctx.config.media;
  const settings: SourceSettings = { maxBytes: m.maxBytes, allowUrls: m.allowUrls, timeoutMs: m.urlTimeoutSeconds * 1000, publicOnly: m.urlPublicOnly };
  return Promise.all(
    (list as string[]).map((s, i) => {
      const param = typeof input === "string" ? "input" : `input[${i}]`;
      if (s.length === 0) throw new InvalidInput(`\`${param}\` is an empty string`, param);
      return mediaBytes(s, modality, settings, `\`${param}\``, signal).catch((e) => {
        throw e instanceof InvalidMedia && e.param === null ? new InvalidMedia(e.message, param, e.code) : e;
      });
    }),
  );
}

export function embeddingsRoutes(ctx: ServerContext) {
  return router().post(
    "/embeddings",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const model = ctx.registry.lookup(body.model, "embed") as EmbedModel;
      const tower = towerFor(model, body.modality ?? "text");
      const hidden = model.layout.hiddenSize;
      if (body.dimensions !== undefined && (body.dimensions < 1 || (hidden !== null && body.dimensions > hidden))) {
        throw new InvalidInput(`dimensions must be between 1 and ${hidden ?? "the model's dimension"}, got ${body.dimensions}`, "dimensions");
      }
      const base64 = body.encoding_format === "base64";
      const reply = (results: Float32Array[], usage: { prompt_tokens: number; total_tokens: number }, queueMs: number, inferenceMs: number) => {
        const data = results.map((vec, index) => {
          const v = finishEmbedding(vec, body.dimensions);
          return { object: "embedding" as const, embedding: base64 ? toBase64(v) : Array.from(v), index };
        });
        timingHeaders(set, queueMs, inferenceMs, performance.now() - t0);
        return {
          object: "list" as const,
          data,
          model: model.name,
          usage,
          ...responseMeta("embd"),
        };
      };
      const input = body.input;
      if (tower) {
        if (body.prompt_name !== undefined) throw new InvalidInput(`prompt_name applies to text only, not to modality ${tower.modality}`, "prompt_name");
        const files = await mediaFiles(input, tower.modality, ctx, request.signal);
        const features = await tower.prepare(files);
        const { results, queueMs, inferenceMs } = await tower.engine.submit(features, request.signal);
        // Media usage counts inputs: there are no tokens to bill.
        return reply(results, { prompt_tokens: files.length, total_tokens: files.length }, queueMs, inferenceMs);
      }
      let encoded: Encoded[];
      if (Array.isArray(input) && input.length > 0 && typeof input[0] !== "string") {
        if (body.prompt_name !== undefined) throw new InvalidInput("prompt_name cannot be used with token-id input", "prompt_name");
        encoded = tokenInputs(input as number[] | number[][], model, ctx);
      } else {
        const texts = checkTexts(input as string | string[], "input", ctx.config);
        const prompt = promptFor(model, body.prompt_name);
        encoded = await model.encode(prompt ? texts.map((t) => prompt + t) : texts);
      }
      const { results, queueMs, inferenceMs } = await model.engine.submit(encoded, request.signal);
      return reply(results, usageOf(encoded), queueMs, inferenceMs);
    },
    {
      body: EmbeddingsRequest,
      detail: { summary: "Create embeddings (OpenAI-compatible)", tags: ["embeddings"] },
    },
  );
}
