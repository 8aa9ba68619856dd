// ColPali (late interaction over PaliGemma): text is encoded as a query, images as documents, both by one graph that
// takes input_ids, attention_mask and pixel_values and returns every position's projected, normalised vector.
// Preparing inputs: the query string and the image prompt of transformers' ColPaliProcessor (prefixes from the
// layout), tokenized without the tokenizer's own special tokens (the processor turns them off); pixel_values come
// from the media workers (media/image.ts, the SigLIP image processor). Reading outputs: every attended position.
import type { ColPaliLayout } from "../model/colpali-layout";
import type { Feed, ModelSession } from "../model/session";
import { textFeeds } from "../model/session";
import { featureBatches, type BatchInput, type FeatureBatch } from "./batch-input";
import type { Runner } from "./runner";
import { fullLengthText, type Encoded } from "../tokenize/encode";
import { InputTooLong, InvalidInput, ModelLoadError } from "../errors";
import { MULTIVECTOR_OUTPUTS, readMultiVector, type MultiVector, type MultiVectorBatch, type MultiVectorInput } from "./multivector";

/** Query augmentation tokens after a query (ColPaliProcessor's default suffix: the pad token 10 times). */
export const QUERY_AUGMENTATION_COUNT = 10;

/** The tokens a ColPali model's prompts are built from, resolved once at load. */
export interface ColPaliTokens {
  bos: string;
  /** The query augmentation token: the tokenizer's pad token. */
  augmentation: string;
  /**
   * input_ids of an image document: image_seq_length image tokens, then `<bos>{visual_prompt_prefix}\n` (ColPali);
   * ColModernVBERT: the prompt of an unsplit image (a split one's depends on its grid: tiledImageText).
   */
  imageIds: Int32Array;
  /** The image token as text. */
  imageToken: string;
  /** Special tokens the tokenizer's template adds around a text, stripped (the processor adds none). */
  before: number;
  after: number;
}

/**
 * The query string: ColPaliProcessor's `<bos>{query_prefix}{query}` + augmentation x 10 + "\n"; ColModernVBertProcessor's
 * `{query_prefix}{query}` + `<end_of_utterance>` x 10 (the tokenizer's template then adds its special tokens).
 */
export function colpaliQueryText(layout: ColPaliLayout, tokens: Pick<ColPaliTokens, "bos" | "augmentation">, query: string): string {
  const augmentation = tokens.augmentation.repeat(QUERY_AUGMENTATION_COUNT);
  if (layout.kind === "idefics3") return `${layout.queryPrefix}${query}${augmentation}`;
  return `${tokens.bos}${layout.queryPrefix}${query}${augmentation}\n`;
}

/** The Idefics3 prompt tokens ColModernVBertProcessor writes around each tile's image tokens. */
export const IDEFICS3_TOKENS = { fakeImage: "<fake_token_around_image>", globalImage: "<global-img>", endOfUtterance: "<end_of_utterance>" } as const;

/**
 * ColModernVBertProcessor's image prompt: visual_prompt_prefix with its image token replaced by the image's tokens:
 * unsplit, `<fake_token_around_image><global-img>` + image_seq_len image tokens + `<fake_token_around_image>`; split
 * into rows x cols, per row each tile's `<fake_token_around_image><row_r_col_c>` + image tokens, then "\n", and the
 * global image after one more "\n".
 */
export function tiledImageText(layout: ColPaliLayout, imageToken: string, rows: number, cols: number): string {
  const { fakeImage, globalImage } = IDEFICS3_TOKENS;
  const tile = imageToken.repeat(layout.imageSeqLength);
  const global = `${fakeImage}${globalImage}${tile}${fakeImage}`;
  let text = "";
  if (rows === 0 && cols === 0) text = global;
  else {
    for (let r = 1; r <= rows; r++) {
      for (let c = 1; c <= cols; c++) text += `${fakeImage}<row_${r}_col_${c}>${tile}`;
      text += "\n";
    }
    text += `\n${global}`;
  }
  // Only the first image token of the prefix: the processor reads one image per prompt.
  return layout.visualPromptPrefix.replace(imageToken, () => text);
}

/** ColPaliProcessor's image prompt: the image token image_seq_length times, then `<bos>{visual_prompt_prefix}\n`. */
export function colpaliImageText(layout: ColPaliLayout, bos: string, imageToken: string): string {
  return `${imageToken.repeat(layout.imageSeqLength)}${bos}${layout.visualPromptPrefix}\n`;
}

/**
 * Resolves the prompt tokens with the model's tokenizer: BOS and pad from tokenizer_config.json (pad is the
 * augmentation token), the image token (config.json's id, else `<image>`), and the image prompt's ids, checked to
 * hold exactly image_seq_length image tokens.
 */
export async function colpaliTokens(
  layout: ColPaliLayout,
  tokenizerConfig: Record<string, unknown>,
  tokenize: (text: string) => Promise<number[]>,
  tokenId: (t: string) => number | undefined,
  specials: { before: number; after: number },
  idToToken: (id: number) => string | undefined,
): Promise<ColPaliTokens> {
  if (layout.kind === "idefics3") return tiledTokens(layout, tokenize, tokenId, idToToken);
  const named = (k: string) => (typeof tokenizerConfig[k] === "string" ? (tokenizerConfig[k] as string) : undefined);
  const bos = named("bos_token");
  const pad = named("pad_token");
  if (!bos || tokenId(bos) === undefined) throw new ModelLoadError("a ColPali model needs a BOS token (tokenizer_config.json bos_token)");
  if (!pad || tokenId(pad) === undefined) throw new ModelLoadError("a ColPali model needs a pad token (tokenizer_config.json pad_token): it is the query augmentation token");
  const imageToken = layout.imageTokenId !== null ? idToToken(layout.imageTokenId) : "<image>";
  const imageId = imageToken !== undefined ? tokenId(imageToken) : undefined;
  if (imageToken === undefined || imageId === undefined) throw new ModelLoadError("a ColPali model's tokenizer needs its image token (<image>)");
  const ids = await tokenize(colpaliImageText(layout, bos, imageToken));
  const count = ids.filter((i) => i === imageId).length;
  if (count !== layout.imageSeqLength) {
    throw new ModelLoadError(`the image prompt tokenizes to ${count} image tokens; the image processor's image_seq_length is ${layout.imageSeqLength}`);
  }
  return { bos, augmentation: pad, imageIds: Int32Array.from(ids), imageToken, ...specials };
}

/**
 * ColModernVBERT's tokens: the query augmentation token `<end_of_utterance>`, the image token and the Idefics3 prompt
 * tokens, each one token of the vocabulary. Queries and image prompts keep the tokenizer's own special tokens (the
 * processor does), so none are stripped; imageIds is the unsplit image's prompt.
 */
async function tiledTokens(
  layout: ColPaliLayout,
  tokenize: (text: string) => Promise<number[]>,
  tokenId: (t: string) => number | undefined,
  idToToken: (id: number) => string | undefined,
): Promise<ColPaliTokens> {
  const imageToken = layout.imageTokenId !== null ? idToToken(layout.imageTokenId) : "<image>";
  const imageId = imageToken !== undefined ? tokenId(imageToken) : undefined;
  if (imageToken === undefined || imageId === undefined) throw new ModelLoadError("a ColModernVBERT model's tokenizer needs its image token (<image>)");
  const needed = [...Object.values(IDEFICS3_TOKENS), "<row_1_col_1>"];
  const missing = needed.filter((t) => tokenId(t) === undefined);
  if (missing.length) throw new ModelLoadError(`a ColModernVBERT model's tokenizer needs the Idefics3 prompt tokens; it lacks ${missing.join(", ")}`);
  if (!layout.visualPromptPrefix.includes(imageToken)) {
    throw new ModelLoadError(`the visual prompt ${JSON.stringify(layout.visualPromptPrefix)} has no ${imageToken} to put the image in`);
  }
  const ids = await tokenize(tiledImageText(layout, imageToken, 0, 0));
  const count = ids.filter((i) => i === imageId).length;
  if (count !== layout.imageSeqLength) {
    throw new ModelLoadError(`the image prompt tokenizes to ${count} image tokens; image_seq_len is ${layout.imageSeqLength}`);
  }
  return { bos: "", augmentation: IDEFICS3_TOKENS.endOfUtterance, imageIds: Int32Array.from(ids), imageToken, before: 0, after: 0 };
}

/** Text input_type for a ColPali model: text is always a query (documents are images). */
export function colpaliTextKind(inputType: string | undefined): "query" {
  if (inputType === undefined || inputType === "query" || inputType === "search_query") return "query";
  throw new InvalidInput(
    `a ColPali or ColModernVBERT model encodes text as queries only (input_type query); documents are images: send them with modality "image", got input_type "${inputType}"`,
    "input_type",
  );
}

/**
 * A tokenized query string (colpaliQueryText, encoded with the tokenizer's template) as model input: the template's
 * special tokens stripped, every token attended and kept. A query cut to the model's length would lose its
 * augmentation tokens, so it is refused instead.
 */
export function colpaliQueryInput(enc: Encoded, tokens: ColPaliTokens, maxLength: number, param: string): MultiVectorInput {
  if (enc.fullLength !== undefined) {
    throw new InputTooLong(`\`${param}\` has ${fullLengthText(enc, tokens.before + tokens.after)} tokens as a ColPali or ColModernVBERT query; the model takes at most ${maxLength - tokens.before - tokens.after}`, param);
  }
  const ids = enc.ids.subarray(tokens.before, enc.ids.length - tokens.after);
  const n = ids.length;
  return { ids: Int32Array.from(ids), attention: new Uint8Array(n).fill(1), keep: new Uint8Array(n).fill(1), tokens: n };
}

/** The graph's output of per-position vectors: `embeddings` (transformers' ColPali output), a ColBERT name, or the only one. */
export function colpaliOutput(names: readonly string[]): string {
  const found = ["embeddings", ...MULTIVECTOR_OUTPUTS].find((n) => names.includes(n)) ?? (names.length === 1 ? names[0] : undefined);
  if (!found) throw new ModelLoadError(`a ColPali model needs one per-position vector output (embeddings); the ONNX model has ${names.join(", ")}`);
  return found;
}

function checkDims(dims: readonly number[]): void {
  if (dims.length !== 3) throw new Error(`ColPali expects vectors [batch, tokens, dim], got [${dims.join(", ")}]`);
}

/**
 * Text queries: token tensors plus zero pixel_values the graph does not read (no image token in the ids). One zero
 * image serves a whole batch when the graph accepts it, else one per row: `probe` (a small query batch) is run once
 * with one image, and on failure the runner feeds one per row from then on (a graph that ties pixel_values' batch
 * to the text's, as fastembed feeds Qdrant's export).
 */
export async function colpaliQueryRunner(
  session: Pick<ModelSession, "runFeeds" | "inputNames" | "inputSpecs">,
  output: string,
  pixelShape: readonly number[],
  probe: MultiVectorBatch,
): Promise<{ runner: Runner<MultiVector, MultiVectorBatch>; oneImage: boolean }> {
  const size = pixelShape.reduce((a, b) => a * b, 1);
  let oneImage = true;
  const runner: Runner<MultiVector, MultiVectorBatch> = {
    async run(t) {
      const rows = oneImage ? 1 : t.tensors.batch;
      const pixels: Feed = { data: new Float32Array(rows * size), dims: [rows, ...pixelShape] };
      const out = await session.runFeeds({ ...textFeeds(t.tensors, session.inputNames, session.inputSpecs), pixel_values: pixels }, output);
      checkDims(out.dims);
      return t.keeps.map((keep, b) => readMultiVector(out.data, out.dims, b, keep));
    },
  };
  try {
    await runner.run(probe);
  } catch {
    oneImage = false;
    await runner.run(probe);
  }
  return { runner, oneImage };
}

/** Image documents: each image's pixel_values with the image prompt's ids; every position's vector is kept. */
export function colpaliImageRunner(session: Pick<ModelSession, "runFeeds">, output: string, imageIds: Int32Array): Runner<MultiVector, FeatureBatch> {
  const n = imageIds.length;
  const keep = new Uint8Array(n).fill(1);
  return {
    async run(t) {
      const batch = t.dims[0]!;
      const ids = new Int32Array(batch * n);
      for (let b = 0; b < batch; b++) ids.set(imageIds, b * n);
      const mask = new Int32Array(batch * n).fill(1);
      const out = await session.runFeeds(
        { input_ids: { data: ids, dims: [batch, n] }, attention_mask: { data: mask, dims: [batch, n] }, pixel_values: t },
        output,
      );
      checkDims(out.dims);
      return Array.from({ length: batch }, (_, b) => readMultiVector(out.data, out.dims, b, keep));
    },
  };
}

/**
 * Image batches costed by the tokens the graph reads per image (image_seq_length + prompt; 1030 for the 448 px
 * export), so the model's token budget bounds an image batch as it does a text batch: on CPU (512 tokens) one image
 * per run, on GPU (16384) fifteen; a CLIP tower's inputs cost 1 each instead.
 */
export function colpaliImageBatches(pixelShape: readonly number[], tokensPerImage: number): BatchInput<Float32Array, FeatureBatch> {
  const stack = featureBatches(pixelShape);
  return {
    lengthOf: () => tokensPerImage,
    assemble(inputs) {
      return { tensors: stack.assemble(inputs).tensors, padded: inputs.length * tokensPerImage };
    },
  };
}

/** A ColModernVBERT image document: its tiles ([tiles, 3, tile, tile]) and its prompt's ids. */
export interface TiledImageInput {
  pixels: Float32Array;
  tiles: number;
  ids: Int32Array;
}

/** Rows x tiles x tile pixels, and the padded prompt ids with their attention mask. */
export interface TiledImageBatch {
  ids: Int32Array;
  mask: Int32Array;
  seqLen: number;
  pixels: FeatureBatch;
  lengths: number[];
}

/**
 * ColModernVBERT image batches: prompts right-padded with the pad id, tiles padded with all-zero tiles to the batch's
 * most (the model drops all-zero tiles as padding); an image costs its prompt's tokens in the token budget.
 */
export function tiledImageBatches(padId: number, tileShape: readonly number[]): BatchInput<TiledImageInput, TiledImageBatch> {
  const plane = tileShape.reduce((a, b) => a * b, 1);
  return {
    lengthOf: (x) => x.ids.length,
    assemble(inputs) {
      const batch = inputs.length;
      let seqLen = 1;
      let tiles = 1;
      for (const x of inputs) {
        if (x.ids.length > seqLen) seqLen = x.ids.length;
        if (x.tiles > tiles) tiles = x.tiles;
      }
      const ids = new Int32Array(batch * seqLen).fill(padId);
      const mask = new Int32Array(batch * seqLen);
      const data = new Float32Array(batch * tiles * plane);
      inputs.forEach((x, b) => {
        ids.set(x.ids, b * seqLen);
        mask.fill(1, b * seqLen, b * seqLen + x.ids.length);
        data.set(x.pixels, b * tiles * plane);
      });
      const pixels = { data, dims: [batch, tiles, ...tileShape] };
      return { tensors: { ids, mask, seqLen, pixels, lengths: inputs.map((x) => x.ids.length) }, padded: batch * seqLen };
    },
  };
}

/** ColModernVBERT image documents: every prompt position's vector (the model zeroes the padding's). */
export function tiledImageRunner(session: Pick<ModelSession, "runFeeds">, output: string): Runner<MultiVector, TiledImageBatch> {
  return {
    async run(t) {
      const batch = t.lengths.length;
      const out = await session.runFeeds(
        { input_ids: { data: t.ids, dims: [batch, t.seqLen] }, attention_mask: { data: t.mask, dims: [batch, t.seqLen] }, pixel_values: t.pixels },
        output,
      );
      checkDims(out.dims);
      return t.lengths.map((n, b) => readMultiVector(out.data, out.dims, b, new Uint8Array(n).fill(1)));
    },
  };
}
