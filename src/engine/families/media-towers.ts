// Multimodal embedders (CLIP / SigLIP text + image, CLAP text + audio): the text tower on the model's session, the
// media tower on its own engine over preprocessed tensors; a combined export is split into one graph per tower
// where it can be, else both towers share it with one-row dummies for the tower not asked.
import { dirname, join } from "node:path";
import { ModelLoadError } from "../../errors";
import { log } from "../../log";
import type { ModelLayout } from "../../model/layout";
import type { ModelSession } from "../../model/session";
import { onnxOutputNames } from "../../model/onnx-graph";
import { splitCombinedExport, type SplitTowers } from "../../model/split";
import { AUDIO_INPUT, audioInputShape, audioReader } from "../../tasks/audio";
import { textTowerReader } from "../../tasks/embed";
import { IMAGE_INPUT, imageInputShape, imageReader } from "../../tasks/image";
import { featureBatches, tokenBatches } from "../../tasks/batch-input";
import { sessionRunner, type Runner } from "../../tasks/runner";
import { Engine } from "../engine";
import type { MediaTower, ServedModel } from "../served";
import { combinedTextRunner, mediaDummy, mediaRunner, textDummy } from "../towers";
import type { Family, FamilyPlan } from "./family";

/**
 * A combined multimodal export (one graph, both towers) as one graph per tower (model/split.ts): onnxruntime runs a
 * whole graph for any output, so through the combined graph each text batch would also run the media tower on a
 * dummy input. Null when the graph lacks a tower's output (the load then reports it) or cannot be split (a warning;
 * the towers then share the combined graph with one-row dummies).
 */
function splitTowers(layout: ModelLayout, model: string): SplitTowers | null {
  const media = layout.media!;
  const path = join(layout.dir, layout.onnxFile);
  const names = onnxOutputNames(path);
  let outputs: [string, string];
  try {
    outputs = [textTowerReader.outputName(names), (media.modality === "image" ? imageReader : audioReader).outputName(names)];
  } catch {
    return null;
  }
  try {
    const split = splitCombinedExport(path, ...outputs);
    log.info(`${layout.onnxFile}: both towers in one graph, split into one graph per tower`, { model, text: outputs[0], [media.modality]: outputs[1], folder: dirname(split.text) });
    return split;
  } catch (e) {
    log.warn(`${layout.onnxFile}: both towers in one graph, which could not be split (${(e as Error).message}): each tower's batches feed the other tower a one-row dummy input, which onnxruntime runs too`, { model });
    return null;
  }
}

export const mediaTowersFamily: Family<FamilyPlan, Extract<ServedModel, { task: "embed" }>> = {
  name: "media towers",
  serves: (layout) => layout.media !== null,
  async prepare({ layout, key }) {
    const media = layout.media!;
    // A combined multimodal export runs as one graph per tower when it can be split (the text session gets the text one).
    return { mediaInput: media.modality === "image" ? IMAGE_INPUT : AUDIO_INPUT, split: media.combined ? splitTowers(layout, key) : null };
  },
  async build({ config: c, layout, key, plan, session, padId, base, limits, metrics, mediaPool, mediaLimits, each, sessionBytes, openSession }) {
    if (layout.task !== "embed") throw new ModelLoadError(`${layout.architecture} with ${layout.media!.modality} inputs can only serve embeddings`);
    const media = layout.media!;
    const split = plan.split ?? null;
    const image = media.modality === "image";
    const inputName = image ? IMAGE_INPUT : AUDIO_INPUT;
    const shape = image ? imageInputShape(media) : audioInputShape(media);
    const mediaReader = image ? imageReader : audioReader;
    const textReader = textTowerReader;
    let mediaSession: ModelSession | null = null;
    let textRunner: Runner<Float32Array>;
    let towerRunner;
    if (media.combined && !split) {
      textRunner = combinedTextRunner(session, textReader, mediaDummy(inputName, shape));
      towerRunner = mediaRunner(session, mediaReader, inputName, textDummy(padId));
    } else {
      mediaSession = await openSession(split?.media ?? join(layout.dir, media.mediaFile), { externalDataDir: split?.externalDataDir }, `${c.servedModelName}/${media.modality}`);
      textRunner = sessionRunner(session, textReader);
      towerRunner = mediaRunner(mediaSession, mediaReader, inputName);
    }
    if (!mediaPool) throw new ModelLoadError("media models need the media worker pool");
    const pool = mediaPool;
    const mediaKey = `${key}#${media.modality}`;
    await pool.load({ key: mediaKey, modality: media.modality, preprocessor: media.preprocessor, imageSize: media.imageSize, maxPixels: mediaLimits.maxImagePixels });
    // Each media input costs 1 in the batch budget: a batch holds up to --batch-size of them.
    const towerLimits = { ...limits, maxBatchTokens: c.batchSize };
    const tower: MediaTower = {
      modality: media.modality,
      engine: new Engine(`${key}/${media.modality}`, mediaSession ? towerRunner : each(towerRunner), featureBatches(shape), towerLimits, metrics),
      session: mediaSession,
      split,
      prepare: (files) => pool.process(mediaKey, files),
    };
    const bytes = sessionBytes();
    const tokens = `its text tower gives pooled ${media.modality === "image" ? "image-text" : "audio-text"} projections, not per-token states`;
    return { ...base, memoryBytes: bytes, sessionBytes: bytes, task: "embed", engine: new Engine(key, each(textRunner), tokenBatches(padId, layout.paddingSide, media.textLength), limits, metrics), media: tower, tokens };
  },
  warmUp: {
    async others(m) {
      if (!m.media) return;
      // One zero input through the media tower, so its first request does not pay for session initialisation.
      const tower = m.media;
      tower.engine.start();
      const size = tower.modality === "image" ? imageInputShape(m.layout.media!) : audioInputShape(m.layout.media!);
      await tower.engine.submit([new Float32Array(size.reduce((a, b) => a * b, 1))]);
    },
    oneSession: "a model with a media tower",
  },
};
