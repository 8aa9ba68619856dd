// Media worker entry: decodes and preprocesses images and audio off the HTTP event loop, one preprocessor per
// model tower.
import { InvalidMedia } from "../errors";
import { audioConfigFrom } from "./audio";
import { AudioPreprocessor } from "./audio-features";
import { imageConfigFrom, preprocessImage, type ImageConfig } from "./image";
import { decodeImage } from "./image-decode";
import { idefics3ConfigFrom, isIdefics3, preprocessIdefics3 } from "./idefics3";
import type { MediaRequest, MediaResponse } from "./protocol";

declare const self: Worker;

/** One input's tensor; an image split into tiles (Idefics3) also gives its grid of rows x cols. */
type Preprocessor = { process(bytes: Uint8Array): Promise<Float32Array | { data: Float32Array; grid: [number, number] }> };
const preprocessors = new Map<string, Preprocessor>();

function imagePreprocessor(cfg: ImageConfig, maxPixels: number): Preprocessor {
  return { process: async (bytes) => preprocessImage(await decodeImage(bytes, { maxPixels }), cfg) };
}

function tiledImagePreprocessor(pre: Record<string, unknown>, imageSize: number | null, maxPixels: number): Preprocessor {
  const cfg = idefics3ConfigFrom(pre, imageSize);
  return {
    async process(bytes) {
      const t = preprocessIdefics3(await decodeImage(bytes, { maxPixels }), cfg);
      return { data: t.data, grid: [t.rows, t.cols] };
    },
  };
}

async function handle(msg: MediaRequest): Promise<MediaResponse> {
  if (msg.type === "load") {
    preprocessors.set(
      msg.key,
      msg.modality === "image"
        ? isIdefics3(msg.preprocessor)
          ? tiledImagePreprocessor(msg.preprocessor, msg.imageSize, msg.maxPixels)
          : imagePreprocessor(imageConfigFrom(msg.preprocessor, msg.imageSize), msg.maxPixels)
        : new AudioPreprocessor(audioConfigFrom(msg.preprocessor)),
    );
    return { id: msg.id, ok: true };
  }
  const p = preprocessors.get(msg.key);
  if (!p) return { id: msg.id, ok: false, error: `media preprocessor ${msg.key} is not loaded in this worker`, code: "internal", invalidInput: false };
  const out = await p.process(msg.bytes);
  return out instanceof Float32Array ? { id: msg.id, ok: true, data: out } : { id: msg.id, ok: true, data: out.data, grid: out.grid };
}

self.onmessage = async (event: MessageEvent<MediaRequest>) => {
  const msg = event.data;
  let res: MediaResponse;
  try {
    res = await handle(msg);
  } catch (e) {
    const err = e as Error;
    res = e instanceof InvalidMedia
      ? { id: msg.id, ok: false, error: err.message, code: e.code, invalidInput: true }
      : { id: msg.id, ok: false, error: err?.message ?? String(e), code: "internal", invalidInput: false };
  }
  self.postMessage(res);
};
