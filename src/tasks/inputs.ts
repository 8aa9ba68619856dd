// The inputs of a text job prepared for the engine, below the API shapes: texts with the model's prompt, or token
// ids of its vocabulary fed as given; their result-cache keys; cut to the model's length, or refused as too long.
import { inputKey } from "../cache/cache";
import { InputTooLong, InvalidInput, TooManyVectors } from "../errors";
import { fullLengthText, wasTruncated, type EncodeOptions, type Encoded } from "../tokenize/encode";
import { inputPrompt, type PromptRequest } from "./embed";

/** What input preparation reads of a served model. */
export interface InputModel {
  name: string;
  layout: Parameters<typeof inputPrompt>[0] & { maxLength: number };
  encoder: { vocabSize: number };
  /** The model's share of result-cache keys. */
  cacheScope: string;
  encode(texts: string[], firsts?: string[], options?: EncodeOptions & { taskId?: number }): Promise<Encoded[]>;
}

/** The request checks (counts, lengths) of the server's limits, applied where the inputs are read. */
export interface InputChecks {
  texts(value: string | string[], field: string): string[];
  count(n: number, field: string): void;
}

/** Texts, or token-id sequences of the model's own vocabulary. */
export type JobInputs = { texts: string | string[] } | { ids: number[][] };

/** Where the inputs came from in the request, for error messages: `input`, `input[3]`. */
export interface InputField {
  name: string;
  /** A single value rather than a list: errors name the field itself. */
  single: boolean;
}

export const paramOf = (f: InputField, i: number) => (f.single ? f.name : `${f.name}[${i}]`);

/**
 * With truncate false, the first input that does not fit is a 413 naming it and its token count: exact, or "at
 * least" that many when the input was cut before it was tokenized to its end (Encoded.fullLengthAtLeast).
 */
export function refuseTooLong(model: InputModel, encoded: readonly Encoded[], field: InputField): void {
  const i = encoded.findIndex(wasTruncated);
  if (i < 0) return;
  const param = paramOf(field, i);
  throw new InputTooLong(
    `\`${param}\` has ${fullLengthText(encoded[i]!)} tokens; model "${model.name}" takes at most ${model.layout.maxLength} (allow truncation to have it cut)`,
    param,
  );
}

/** Token-id inputs of the model's own vocabulary: checked, fed as given, cut to the model's length. */
function idInputs(ids: number[][], model: InputModel, field: InputField, checks: InputChecks): (options: EncodeOptions) => Encoded[] {
  if (ids.length === 0) throw new InvalidInput(`\`${field.name}\` must not be an empty list`, field.name);
  checks.count(ids.length, field.name);
  const vocab = model.encoder.vocabSize;
  ids.forEach((seq, i) => {
    const param = paramOf(field, i);
    if (!Array.isArray(seq) || seq.length === 0) throw new InvalidInput(`\`${param}\` is an empty token list`, field.name);
    for (const id of seq) {
      if (!Number.isInteger(id) || id < 0 || id >= vocab) {
        throw new InvalidInput(`\`${param}\` has token id ${id}, outside the model's vocabulary (0..${vocab - 1})`, field.name);
      }
    }
  });
  const max = model.layout.maxLength;
  return (options) =>
    ids.map((seq) => {
      if (seq.length <= max) return { ids: Int32Array.from(seq), typeIds: null };
      const kept = options.direction === "left" ? seq.slice(seq.length - max) : seq.slice(0, max);
      return { ids: Int32Array.from(kept), typeIds: null, fullLength: seq.length };
    });
}

/**
 * Texts or token ids of an embedding request, checked: their result-cache keys and how to tokenize any of them,
 * texts with the model's prompt. `keySuffix` marks what else changes the output: left truncation, an output kind
 * other than the model's dense vector (`:sparse`, `:multivector-query`, ...).
 */
export function embedInputs(checks: InputChecks, model: InputModel, inputs: JobInputs, field: InputField, request: PromptRequest, keySuffix = "") {
  let keys: string[];
  let encode: (indices: number[], options: EncodeOptions) => Promise<Encoded[]>;
  if ("ids" in inputs) {
    // Ids are fed as given: nothing can be put in front of them. A prompt_name / input_type / task that selects a
    // prompt is refused; one that selects none (ColBERT query/document encoding, a sparse model's document route, a
    // task adapter without an instruction) applies. Without any, no default prompt is added (as TEI).
    const given = request.promptName !== undefined ? "prompt_name" : request.inputType !== undefined ? "input_type" : request.task !== undefined ? "task" : null;
    const { prompt, task, taskId } = inputPrompt(model.layout, request);
    if (given && prompt !== "") {
      throw new InvalidInput(`${given} selects the prompt ${JSON.stringify(prompt)}, which cannot be put in front of token-id input: send text`, given);
    }
    const cut = idInputs(inputs.ids, model, field, checks);
    // A task adapter (Jina v3) is part of the key, as for text.
    const kind = task === undefined ? "ids" : `ids@${task}`;
    keys = inputs.ids.map((seq) => inputKey(model.cacheScope, kind + keySuffix, new Uint8Array(Int32Array.from(seq).buffer)));
    encode = async (indices, options) => {
      const all = cut(options);
      return indices.map((i) => (taskId === undefined ? all[i]! : { ...all[i]!, taskId }));
    };
  } else {
    const texts = checks.texts(inputs.texts, field.name);
    const { prompt, task, taskId } = inputPrompt(model.layout, request);
    // A task adapter changes the vector even where its instruction is empty: it is part of the key.
    const kind = task === undefined ? "text" : `text@${task}`;
    keys = texts.map((t) => inputKey(model.cacheScope, kind + keySuffix, prompt, t));
    encode = (indices, options) => model.encode(indices.map((i) => prompt + texts[i]!), undefined, taskId === undefined ? options : { ...options, taskId });
  }
  return { keys, encode };
}

/** A 413 before anything runs when an answer would hold more token vectors than --max-vectors-per-request. */
export function checkVectorCount(vectors: number, maxVectors: number, param: string): void {
  if (vectors > maxVectors) {
    throw new TooManyVectors(`this request would return ${vectors} token vectors; at most ${maxVectors} are returned per request (--max-vectors-per-request): send fewer or shorter inputs`, param);
  }
}
