// Image decoding with sharp (libvips): JPEG, PNG, WebP, GIF (first frame), upright per EXIF orientation, RGB with
// alpha dropped and not composited (PIL's convert("RGB")). Only the media workers import this file, so sharp's
// native addon is never loaded by a server that serves text only.
import sharp from "sharp";
import { InvalidMedia as MediaError } from "../errors";
import type { RgbImage } from "./image";

export interface DecodeLimits {
  /** Largest width x height accepted (decompression bombs). */
  maxPixels: number;
}

const FORMATS = new Set(["jpeg", "png", "webp", "gif"]);
export const SUPPORTED_IMAGES = "JPEG, PNG, WebP, GIF";

/** Decodes an image file into RGB pixels, upright per EXIF. */
export async function decodeImage(bytes: Uint8Array, limits: DecodeLimits): Promise<RgbImage> {
  if (bytes.length === 0) throw new MediaError("the image is empty (0 bytes)");
  let meta: Awaited<ReturnType<ReturnType<typeof sharp>["metadata"]>>;
  try {
    meta = await sharp(bytes, { limitInputPixels: false }).metadata();
  } catch {
    throw new MediaError(`not a decodable image; supported formats: ${SUPPORTED_IMAGES}`);
  }
  if (!meta.format || !FORMATS.has(meta.format)) {
    throw new MediaError(`unsupported image format ${meta.format ?? "unknown"}; supported formats: ${SUPPORTED_IMAGES}`);
  }
  const w = meta.width ?? 0;
  const h = meta.height ?? 0;
  if (w < 1 || h < 1) throw new MediaError("the image has no pixels");
  if (w * h > limits.maxPixels) {
    throw new MediaError(`the image is ${w}x${h} = ${w * h} pixels; at most ${limits.maxPixels} are accepted (--max-image-pixels)`);
  }
  try {
    const { data, info } = await sharp(bytes, { limitInputPixels: limits.maxPixels, failOn: "error", pages: 1 })
      .autoOrient()
      .removeAlpha()
      .toColourspace("srgb")
      .raw({ depth: "uchar" })
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new Error(`decoded ${info.channels} channels`);
    return { width: info.width, height: info.height, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
  } catch (e) {
    throw new MediaError(`the ${meta.format.toUpperCase()} image could not be decoded (truncated or corrupt): ${(e as Error).message}`);
  }
}
