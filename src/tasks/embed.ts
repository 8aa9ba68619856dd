// Embeddings: pooling of token states (one function), L2 normalisation, Matryoshka truncation, base64 encoding.
import type { Pooling } from "../model/st-modules";
import type { TaskAdapters } from "../model/layout";
import type { DenseLayer } from "../model/dense";
import type { OutputTensor } from "../model/session";
import { InvalidInput } from "../errors";
import { pickOutput, type TaskReader } from "./task";

/**
 * Pools row b of a [batch, seq, hidden] tensor over its `length` real tokens starting at `start` (0 with right
 * padding, the pad count with left padding), with sentence-transformers semantics: "last" is the last real token
 * (found from the mask, never from a token id). `skip` leading tokens are left out (prompts when include_prompt
 * is false).
 */
export function pool(hidden: Float32Array, dims: readonly number[], b: number, length: number, method: Pooling, skip = 0, start = 0): Float32Array {
  const seq = dims[1]!;
  const h = dims[2]!;
  const base = (b * seq + start) * h;
  const out = new Float32Array(h);
  const from = Math.min(skip, Math.max(0, length - 1));
  switch (method) {
    case "cls":
      out.set(hidden.subarray(base, base + h));
      return out;
    case "last":
      out.set(hidden.subarray(base + (length - 1) * h, base + length * h));
      return out;
    case "max": {
      out.fill(-Infinity);
      for (let s = from; s < length; s++) {
        const o = base + s * h;
        for (let j = 0; j < h; j++) if (hidden[o + j]! > out[j]!) out[j] = hidden[o + j]!;
      }
      return out;
    }
    case "mean":
    case "mean_sqrt_len":
    case "weighted_mean": {
      let weightSum = 0;
      for (let s = from; s < length; s++) {
        const w = method === "weighted_mean" ? s + 1 : 1;
        weightSum += w;
        const o = base + s * h;
        for (let j = 0; j < h; j++) out[j]! += w * hidden[o + j]!;
      }
      const div = method === "mean_sqrt_len" ? Math.sqrt(length - from) : weightSum;
      for (let j = 0; j < h; j++) out[j]! /= div;
      return out;
    }
  }
}

export function l2normalize(v: Float32Array): Float32Array {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i]! * v[i]!;
  const norm = Math.sqrt(sum);
  // sentence-transformers / torch clamp the norm at 1e-12.
  const inv = 1 / Math.max(norm, 1e-12);
  for (let i = 0; i < v.length; i++) v[i]! *= inv;
  return v;
}

function matVec(w: Float32Array, x: Float32Array, rows: number, cols: number, out: Float32Array): void {
  for (let r = 0; r < rows; r++) {
    let sum = 0;
    const o = r * cols;
    for (let c = 0; c < cols; c++) sum += w[o + c]! * x[c]!;
    out[r]! += sum;
  }
}

/** sentence-transformers Dense modules on a pooled vector, in order: activation(W x + b) (+ residual). */
export function applyDense(v: Float32Array, layers: readonly DenseLayer[]): Float32Array {
  for (const l of layers) {
    if (v.length !== l.inFeatures) throw new Error(`Dense layer takes ${l.inFeatures} values, the pooled vector has ${v.length}`);
    const out = l.bias ? Float32Array.from(l.bias) : new Float32Array(l.outFeatures);
    matVec(l.weight, v, l.outFeatures, l.inFeatures, out);
    for (let i = 0; i < out.length; i++) {
      const x = out[i]!;
      out[i] = l.activation === "tanh" ? Math.tanh(x) : l.activation === "relu" ? Math.max(0, x) : l.activation === "sigmoid" ? 1 / (1 + Math.exp(-x)) : x;
    }
    if (l.residual === "identity") for (let i = 0; i < out.length; i++) out[i]! += v[i]!;
    else if (l.residual) matVec(l.residual, v, l.outFeatures, l.inFeatures, out);
    v = out;
  }
  return v;
}

/**
 * Reads an embedder's output: a `sentence_embedding` output when the export has one (pooling, Dense and
 * normalisation inside the graph, as EmbeddingGemma's export), else token states pooled here and passed through
 * the Dense modules the graph lacks.
 */
export function embedReader(pooling: Pooling, skipTokens: () => number = () => 0, dense: readonly DenseLayer[] = []): TaskReader<Float32Array> {
  return {
    outputName: (names) => pickOutput(names, ["sentence_embedding", "last_hidden_state", "token_embeddings", "text_embeds"]),
    read(out: OutputTensor, lengths, starts) {
      const rows: Float32Array[] = new Array(lengths.length);
      if (out.dims.length === 2) {
        // Already pooled by the export (sentence_embedding).
        const h = out.dims[1]!;
        for (let b = 0; b < lengths.length; b++) rows[b] = out.data.slice(b * h, (b + 1) * h);
        return rows;
      }
      const skip = skipTokens();
      for (let b = 0; b < lengths.length; b++) {
        const pooled = pool(out.data, out.dims, b, lengths[b]!, pooling, skip, starts?.[b] ?? 0);
        rows[b] = dense.length ? applyDense(pooled, dense) : pooled;
      }
      return rows;
    },
  };
}

/**
 * What the API returns for one pooled vector: Matryoshka truncation, then L2 normalisation (unless the request
 * asks for raw vectors with `normalize: false`). With `layerNormFirst` (NomicBERT) a truncated vector is first
 * layer-normed over all its values, as that model's card does.
 */
export function finishEmbedding(v: Float32Array, dimensions: number | undefined, normalize = true, layerNormFirst = false): Float32Array {
  if (dimensions !== undefined) {
    if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > v.length) {
      throw new InvalidInput(`dimensions must be an integer between 1 and ${v.length} for this model, got ${dimensions}`, "dimensions");
    }
    v = (layerNormFirst ? layerNorm(v) : v).slice(0, dimensions);
  }
  return normalize ? l2normalize(v) : v;
}

/** torch.nn.functional.layer_norm without weight and bias (eps 1e-5): (v - mean) / sqrt(var + eps), var biased. */
export function layerNorm(v: Float32Array, eps = 1e-5): Float32Array {
  let mean = 0;
  for (let i = 0; i < v.length; i++) mean += v[i]!;
  mean /= v.length;
  let variance = 0;
  for (let i = 0; i < v.length; i++) variance += (v[i]! - mean) ** 2;
  variance /= v.length;
  const inv = 1 / Math.sqrt(variance + eps);
  const out = new Float32Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = (v[i]! - mean) * inv;
  return out;
}

/** OpenAI's base64 format: the little-endian float32 bytes of the vector. */
export function toBase64(v: Float32Array): string {
  // Float32Array is little-endian on every platform Bun runs on.
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64");
}

/**
 * Embeddings a tower already pools: [batch, dim] rows of the first of `outputs` the model has (CLIP/CLAP
 * text_embeds, image_embeds, audio_embeds; jina-clip's text_embeddings, image_embeddings; SigLIP's pooler_output).
 */
export function projectionReader(outputs: string | readonly string[]): TaskReader<Float32Array> {
  const wanted = typeof outputs === "string" ? [outputs] : outputs;
  return {
    outputName(names) {
      const found = wanted.find((o) => names.includes(o));
      if (!found) throw new Error(`the ONNX model has no output ${wanted.map((o) => `"${o}"`).join(" or ")} (it has ${names.join(", ")})`);
      return found;
    },
    read(out: OutputTensor) {
      const h = out.dims[out.dims.length - 1]!;
      const rows: Float32Array[] = new Array(out.dims[0]!);
      for (let b = 0; b < rows.length; b++) rows[b] = out.data.slice(b * h, (b + 1) * h);
      return rows;
    },
  };
}

/** The text tower of a multimodal model: CLIP/CLAP text_embeds, jina-clip's text_embeddings, SigLIP's pooler_output. */
export const textTowerReader = projectionReader(["text_embeds", "text_embeddings", "pooler_output"]);

/** What a request may say about its inputs; every API shape (OpenAI, Cohere, TEI) maps its fields onto this. */
export interface PromptRequest {
  /** A prompt of the model's config_sentence_transformers.json, by name. */
  promptName?: string;
  /** query | document (Cohere: search_query | search_document | classification | clustering). */
  inputType?: string;
  /** A task adapter of the model by name (Jina v3: retrieval.query, text-matching, ...). */
  task?: string;
}

/** The adapter each request input type selects; without one, DEFAULT_ADAPTER_TASK (symmetric similarity). */
const INPUT_TYPE_ADAPTERS: Record<string, string> = {
  query: "retrieval.query", document: "retrieval.passage", classification: "classification", clustering: "separation",
};
export const DEFAULT_ADAPTER_TASK = "text-matching";

/** What a request's texts are prefixed with and, for a model with task adapters, the adapter that runs them. */
export interface InputPrompt {
  prompt: string;
  /** The adapter's name and index (task_id); undefined for models without task adapters. */
  task?: string;
  taskId?: number;
}

/** Request input types and the prompt names models use for them, in preference order. */
const INPUT_TYPE_PROMPTS: Record<string, readonly string[]> = {
  query: ["query", "search_query", "Retrieval-query", "retrieval.query", "Query"],
  document: ["document", "passage", "search_document", "Retrieval-document", "retrieval.passage", "corpus", "doc", "Document"],
  classification: ["classification", "Classification"],
  clustering: ["clustering", "Clustering"],
};
const INPUT_TYPE_ALIASES: Record<string, string> = {
  query: "query", search_query: "query", document: "document", search_document: "document", passage: "document",
  classification: "classification", clustering: "clustering",
};
export const INPUT_TYPES: readonly string[] = Object.keys(INPUT_TYPE_ALIASES);

/**
 * The prompt (and task adapter) of a request's texts, for every API shape. Models with task adapters (Jina v3) take
 * `task` (or a task name as prompt_name), or `input_type` mapped onto a task (query -> retrieval.query, document ->
 * retrieval.passage, classification, clustering -> separation), else text-matching; the task's instruction is the
 * prompt. Other models: promptFor.
 */
export function inputPrompt(
  layout: { prompts: Readonly<Record<string, string>>; defaultPromptName: string | null; taskAdapters: TaskAdapters | null },
  req: PromptRequest,
): InputPrompt {
  const adapters = layout.taskAdapters;
  if (!adapters) {
    if (req.task !== undefined) {
      throw new InvalidInput("`task` applies to models with task adapters (Jina v3: config.json lora_adaptations); this model has none: use input_type or prompt_name", "task");
    }
    return { prompt: promptFor(layout.prompts, layout.defaultPromptName, req) };
  }
  const task = adapterTask(adapters, req);
  return { prompt: adapters.instructions[task] ?? "", task, taskId: adapters.names.indexOf(task) };
}

function adapterTask(adapters: TaskAdapters, req: PromptRequest): string {
  const given = [req.task !== undefined && "task", req.inputType !== undefined && "input_type", req.promptName !== undefined && "prompt_name"].filter(Boolean);
  if (given.length > 1) throw new InvalidInput(`give one of task, input_type and prompt_name, not ${given.join(" and ")}`, String(given[1]));
  const valid = `one of ${adapters.names.join(", ")}`;
  // sentence-transformers names Jina v3's prompts after its tasks: prompt_name is a task name there.
  const named = req.task ?? req.promptName;
  if (named !== undefined) {
    if (!adapters.names.includes(named)) throw new InvalidInput(`${req.task !== undefined ? "task" : "prompt_name"} must be ${valid} for this model, got "${named}"`, req.task !== undefined ? "task" : "prompt_name");
    return named;
  }
  if (req.inputType !== undefined) {
    const kind = INPUT_TYPE_ALIASES[req.inputType];
    if (!kind) throw new InvalidInput(`input_type must be one of ${INPUT_TYPES.join(", ")}, got "${req.inputType}"`, "input_type");
    const task = INPUT_TYPE_ADAPTERS[kind]!;
    if (!adapters.names.includes(task)) throw new InvalidInput(`input_type ${req.inputType} selects task ${task}, which this model lacks; give task: ${valid}`, "input_type");
    return task;
  }
  return adapters.names.includes(DEFAULT_ADAPTER_TASK) ? DEFAULT_ADAPTER_TASK : adapters.names[0]!;
}

/**
 * The prompt text prepended to a request's texts, in one place for every API shape: `promptName` names one of the
 * model's prompts; `inputType` picks the model's prompt for that kind of input (Qwen3-Embedding's instruction for
 * queries, EmbeddingGemma's "title: none | text: " for documents); a model that defines none for it gets the text
 * as it is (symmetric models). Without either, the model's default prompt, if it names one.
 */
export function promptFor(prompts: Readonly<Record<string, string>>, defaultPromptName: string | null, req: PromptRequest): string {
  if (req.promptName !== undefined && req.inputType !== undefined) {
    throw new InvalidInput("give either prompt_name or input_type, not both", "input_type");
  }
  if (req.inputType !== undefined) {
    const kind = INPUT_TYPE_ALIASES[req.inputType];
    if (!kind) throw new InvalidInput(`input_type must be one of ${INPUT_TYPES.join(", ")}, got "${req.inputType}"`, "input_type");
    for (const name of INPUT_TYPE_PROMPTS[kind]!) if (prompts[name] !== undefined) return prompts[name]!;
    return "";
  }
  const name = req.promptName ?? defaultPromptName ?? undefined;
  if (name === undefined) return "";
  const prompt = prompts[name];
  if (prompt === undefined) {
    const known = Object.keys(prompts);
    throw new InvalidInput(
      `prompt_name "${name}" is not defined by this model` + (known.length ? `; it defines ${known.join(", ")}` : "; it defines no prompts"),
      "prompt_name",
    );
  }
  return prompt;
}
