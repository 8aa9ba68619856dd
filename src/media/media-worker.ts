// Media worker entry: decodes and preprocesses images and audio off the HTTP event loop, one preprocessor per
// model tower.
import { InvalidMedia } from "../errors";
import { audioConfigFrom } from "./audio";
import { AudioPreprocessor } from "./audio-features";
import { imageConfigFrom, preprocessImage, type ImageConfig } from "./image";
import { decodeImage } from "./image-decode";
import type { MediaRequest, MediaResponse } from "./protocol";

declare const self: Worker;

type Preprocessor = { process(bytes: Uint8Array): Promise<Float32Array> };
const preprocessors = new Map<string, Preprocessor>();

function imagePreprocessor(cfg: ImageConfig, maxPixels: number): Preprocessor {
  return { process: async (bytes) => preprocessImage(await decodeImage(bytes, { maxPixels }), cfg) };
}

async function handle(msg: MediaRequest): Promise<MediaResponse> {
  if (msg.type === "load") {
    preprocessors.set(
      msg.key,
      msg.modality === "image"
        ? imagePreprocessor(imageConfigFrom(msg.preprocessor, msg.imageSize), msg.maxPixels)
        : new AudioPreprocessor(audioConfigFrom(msg.preprocessor)),
    );
    return { id: msg.id, ok: true };
  }
  const p = preprocessors.get(msg.key);
  if (!p) return { id: msg.id, ok: false, error: `media preprocessor ${msg.key} is not loaded in this worker`, code: "internal", invalidInput: false };
  return { id: msg.id, ok: true, data: await p.process(msg.bytes) };
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
