// Image embeddings (CLIP/SigLIP vision towers). Preparing inputs: media/image.ts in the media workers turns a file
// into pixel_values [3, H, W]; reading outputs: the tower's projected image_embeds (jina-clip: image_embeddings, the
// raw one of its outputs, not l2norm_image_embeddings: normalised here after any Matryoshka cut, as its encode_image
// does), normalised like text.
import type { MediaLayout } from "../model/media-layout";
import { imageConfigFrom, pixelShape } from "../media/image";
import { projectionReader } from "./embed";

export const IMAGE_INPUT = "pixel_values";
export const imageReader = projectionReader(["image_embeds", "image_embeddings", "pooler_output"]);

/** The per-input tensor shape the vision tower takes, from preprocessor_config.json. */
export function imageInputShape(media: MediaLayout): number[] {
  return pixelShape(imageConfigFrom(media.preprocessor, media.imageSize));
}
