// Late-interaction vision retrievers (ColPali, ColModernVBERT): text queries on the model's engine, image documents
// on an image engine over the same session, preprocessed in the media workers (ColModernVBERT's split into tiles).
import { ModelLoadError } from "../../errors";
import { log } from "../../log";
import type { ColPaliLayout } from "../../model/colpali-layout";
import type { ModelSession } from "../../model/session";
import type { MediaPool } from "../../media/pool";
import { idefics3ConfigFrom } from "../../media/idefics3";
import { imageConfigFrom, pixelShape } from "../../media/image";
import {
  colpaliImageBatches, colpaliImageRunner, colpaliOutput, colpaliQueryInput, colpaliQueryRunner, colpaliQueryText, colpaliTokens,
  tiledImageBatches, tiledImageRunner, tiledImageText, type ColPaliTokens, type TiledImageBatch, type TiledImageInput,
} from "../../tasks/colpali";
import { IMAGE_INPUT } from "../../tasks/image";
import { multiVectorBatches, type MultiVector, type MultiVectorBatch, type MultiVectorInput } from "../../tasks/multivector";
import { Engine } from "../engine";
import type { FeatureBatch } from "../../tasks/batch-input";
import type { ColPaliModel, ServedModel } from "../served";
import type { Family, FamilyPlan } from "./family";

/** What a vision retriever's image engine is built from (the model's session, its media preprocessor). */
interface ImageModelDeps {
  key: string;
  layout: ColPaliLayout;
  tokens: ColPaliTokens;
  session: ModelSession;
  output: string;
  /** One image's (ColPali) or one tile's (ColModernVBERT) pixel_values shape: [3, H, W]. */
  shape: number[];
  limits: ConstructorParameters<typeof Engine>[3];
  metrics: ConstructorParameters<typeof Engine>[4];
  pool: MediaPool;
  mediaKey: string;
  instances: number;
}

const sizeOf = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/** ColPali: one fixed-size image and the one image prompt per document; every image costs its prompt's tokens. */
function fixedImageModel(d: ImageModelDeps): ColPaliModel {
  const perImage = d.tokens.imageIds.length;
  const runners = Array.from({ length: d.instances }, () => colpaliImageRunner(d.session, d.output, d.tokens.imageIds));
  const images = new Engine<MultiVector, Float32Array, FeatureBatch>(`${d.key}/image`, runners, colpaliImageBatches(d.shape, perImage), d.limits, d.metrics);
  return {
    layout: d.layout,
    tokens: d.tokens,
    images,
    maxImageVectors: perImage,
    async prepare(files, param, firstIndex = 0) {
      const pixels = await d.pool.process(d.mediaKey, files, param, firstIndex);
      return { vectors: files.map(() => perImage), run: (signal) => images.submit(pixels, signal) };
    },
    warmUpImages: async () => void (await images.submit([new Float32Array(sizeOf(d.shape))])),
  };
}

/**
 * ColModernVBERT: each image split into tiles in the media workers (Idefics3), its prompt built for its grid and
 * tokenized (once per grid); an image costs its prompt's tokens. The largest grid (size.longest_edge / tile per
 * side) bounds an image's vectors; a prompt past the text model's positions is refused at load.
 */
async function tiledImageModel(d: ImageModelDeps, padId: number, maxLength: number, tokenize: (text: string) => Promise<number[]>): Promise<ColPaliModel> {
  const cfg = idefics3ConfigFrom(d.layout.preprocessor, d.layout.imageSize);
  const prompts = new Map<string, Promise<Int32Array>>();
  const promptIds = (rows: number, cols: number) => {
    const k = `${rows}x${cols}`;
    let p = prompts.get(k);
    if (!p) {
      p = tokenize(tiledImageText(d.layout, d.tokens.imageToken, rows, cols)).then((ids) => Int32Array.from(ids));
      prompts.set(k, p);
    }
    return p;
  };
  const side = cfg.split && cfg.longestEdge !== null ? Math.max(1, Math.ceil(cfg.longestEdge / cfg.tile)) : 0;
  const largest = (await promptIds(side > 1 ? side : 0, side > 1 ? side : 0)).length;
  if (largest > maxLength) {
    throw new ModelLoadError(`an image split into ${side} x ${side} tiles has a ${largest}-token prompt; the text model takes at most ${maxLength} positions`);
  }
  const runners = Array.from({ length: d.instances }, () => tiledImageRunner(d.session, d.output));
  const images = new Engine<MultiVector, TiledImageInput, TiledImageBatch>(`${d.key}/image`, runners, tiledImageBatches(padId, d.shape), d.limits, d.metrics);
  const plane = sizeOf(d.shape);
  return {
    layout: d.layout,
    tokens: d.tokens,
    images,
    maxImageVectors: largest,
    async prepare(files, param, firstIndex = 0) {
      const tiled = await d.pool.processTiled(d.mediaKey, files, param, firstIndex);
      const inputs = await Promise.all(tiled.map(async (t) => ({ pixels: t.data, tiles: t.data.length / plane, ids: await promptIds(t.rows, t.cols) })));
      return { vectors: inputs.map((x) => x.ids.length), run: (signal) => images.submit(inputs, signal) };
    },
    async warmUpImages() {
      await images.submit([{ pixels: new Float32Array(plane), tiles: 1, ids: await promptIds(0, 0) }]);
    },
  };
}

export const colpaliFamily: Family<FamilyPlan, Extract<ServedModel, { colpali: ColPaliModel }>> = {
  name: "colpali",
  serves: (layout) => layout.colpali !== null,
  async prepare() {
    return { mediaInput: IMAGE_INPUT };
  },
  async build({ layout, key, encoder, session, padId, base, limits, metrics, mediaPool, mediaLimits, each, sessionBytes }) {
    if (!mediaPool) throw new ModelLoadError("ColPali models need the media worker pool");
    const cp = layout.colpali!;
    if (!session.inputNames.includes(IMAGE_INPUT)) throw new ModelLoadError(`${layout.onnxFile}: a ColPali graph takes ${IMAGE_INPUT}; this one takes ${session.inputNames.join(", ")}`);
    // ColPaliProcessor tokenizes without the tokenizer's special tokens, ColModernVBertProcessor with them.
    const tokenize = async (text: string) => (await encoder.tokens(text, cp.kind === "idefics3")).map((t) => t.id);
    const tokens = await colpaliTokens(cp, layout.tokenizerConfig, tokenize, (t) => encoder.tokenId(t), encoder.singleSpecials, (id) => encoder.tokenOf(id));
    const output = colpaliOutput(session.outputNames);
    const tile = cp.kind === "idefics3" ? idefics3ConfigFrom(cp.preprocessor, cp.imageSize).tile : null;
    const shape = tile !== null ? [3, tile, tile] : pixelShape(imageConfigFrom(cp.preprocessor, cp.imageSize));
    const pool = mediaPool;
    const mediaKey = `${key}#image`;
    await pool.load({ key: mediaKey, modality: "image", preprocessor: cp.preprocessor, imageSize: cp.imageSize, maxPixels: mediaLimits.maxImagePixels });
    const probe = await encoder.encodeBatch([colpaliQueryText(cp, tokens, "a"), colpaliQueryText(cp, tokens, "a b")]);
    const batches = multiVectorBatches(padId);
    const probeBatch = batches.assemble(probe.map((e, i) => colpaliQueryInput(e, tokens, layout.maxLength, `probe[${i}]`))).tensors;
    // ColModernVBERT's pixel_values are [batch, tiles, 3, tile, tile]: a query batch gets one zero tile.
    const queryPixels = cp.kind === "idefics3" ? [1, ...shape] : shape;
    const { runner: queries, oneImage } = await colpaliQueryRunner(session, output, queryPixels, probeBatch);
    if (!oneImage) log.info("ColPali graph takes one pixel_values row per text row: queries are fed one zero image each", { model: key });
    const deps: ImageModelDeps = { key, layout: cp, tokens, session, output, shape, limits, metrics, pool, mediaKey, instances: session.instances };
    const colpali = cp.kind === "idefics3" ? await tiledImageModel(deps, padId, layout.maxLength, tokenize) : fixedImageModel(deps);
    const bytes = sessionBytes();
    return {
      ...base, memoryBytes: bytes, sessionBytes: bytes, task: "multivector", colbert: null,
      engine: new Engine<MultiVector, MultiVectorInput, MultiVectorBatch>(key, each(queries), batches, limits, metrics),
      colpali,
    };
  },
  warmUp: {
    shortTexts: true,
    async inputs(m, texts) {
      const { layout, tokens } = m.colpali;
      const encoded = await m.encode(texts.map((t) => colpaliQueryText(layout, tokens, t)));
      return encoded.map((e, i) => colpaliQueryInput(e, tokens, m.layout.maxLength, `warm-up[${i}]`));
    },
    async others(m) {
      m.colpali.images.start();
      await m.colpali.warmUpImages();
    },
    // Queries are of a fixed size.
    untimedBudget: "ColPali",
    oneSession: "a model with a media tower",
  },
};
