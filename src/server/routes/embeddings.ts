// POST /embeddings (OpenAI schema).

import { InvalidInput } from "../../errors";
import type { ServedModel } from "../../engine/registry";
import { finishEmbedding, toBase64 } from "../../tasks/embed";
import type { Encoded } from "../../tokenize/encode";
import { responseMeta, timingHeaders, type ServerContext, router } from "../context";
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

export function embeddingsRoutes(ctx: ServerContext) {
  return router().post(
    "/embeddings",
    async ({ body, request, set }) => {
      const t0 = performance.now();
      const model = ctx.registry.lookup(body.model, "embed") as EmbedModel;
      if (body.modality !== undefined && body.modality !== "text") {
        throw new InvalidInput(`model "${model.name}" serves text only; modality "${body.modality}" is not supported by it`, "modality");
      }
      const hidden = model.layout.hiddenSize;
      if (body.dimensions !== undefined && (body.dimensions < 1 || (hidden !== null && body.dimensions > hidden))) {
        throw new InvalidInput(`dimensions must be between 1 and ${hidden ?? "the model's dimension"}, got ${body.dimensions}`, "dimensions");
      }
      const input = body.input;
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
      const base64 = body.encoding_format === "base64";
      let tokens = 0;
      for (const e of encoded) tokens += e.ids.length;
      const data = results.map((vec, index) => {
        const v = finishEmbedding(vec, body.dimensions);
        return { object: "embedding" as const, embedding: base64 ? toBase64(v) : Array.from(v), index };
      });
      timingHeaders(set, queueMs, inferenceMs, performance.now() - t0);
      return {
        object: "list" as const,
        data,
        model: model.name,
        usage: { prompt_tokens: tokens, total_tokens: tokens },
        ...responseMeta("embd"),
      };
    },
    {
      body: EmbeddingsRequest,
      detail: { summary: "Create embeddings (OpenAI-compatible)", tags: ["embeddings"] },
    },
  );
}
