// Idefics3 image processing (ColModernVBERT), as transformers' Idefics3ImageProcessorPil does it: resize so the longest
// edge is size.longest_edge (the short edge even), resize again to multiples of the tile size (max_image_size), cut
// that into rows x cols tiles and add the whole image resized to one tile (the global image); rescale and normalise
// each tile. Every resize is PIL's 8-bit one (image.ts), so the tiles equal what transformers feeds the model. The
// row and column counts decide the image's prompt (tasks/colpali.ts).
import { InvalidMedia as MediaError, ModelLoadError } from "../errors";
import { normalizationFrom, normalizeInto, resize, type ImageConfig, type RgbImage } from "./image";

/** The parts of an Idefics3 preprocessor_config.json the processing reads. */
export interface Idefics3Config extends Pick<ImageConfig, "resample" | "doRescale" | "rescaleFactor" | "doNormalize" | "mean" | "std" | "doConvertRgb" | "fill" | "divideBy255"> {
  /** size.longest_edge, or null when do_resize is false. */
  longestEdge: number | null;
  /** max_image_size.longest_edge: the side of every tile the vision tower takes. */
  tile: number;
  split: boolean;
}

/** transformers' MAX_IMAGE_SIZE for Idefics3: no edge is resized past it. */
const MAX_IMAGE_SIZE = 4096;

/** Whether an image processor config is Idefics3's (Idefics3ImageProcessor, its Pil variant, or the Fast one). */
export function isIdefics3(pre: Record<string, unknown>): boolean {
  return /^Idefics3ImageProcessor/.test(String(pre.image_processor_type ?? ""));
}

/** Reads an Idefics3 image processor's settings; sizes other than longest_edge are refused at load. */
export function idefics3ConfigFrom(pre: Record<string, unknown>, visionImageSize: number | null): Idefics3Config {
  const size = (pre.size ?? { longest_edge: 4 * 364 }) as Record<string, unknown>;
  const max = (pre.max_image_size ?? { longest_edge: visionImageSize ?? 364 }) as Record<string, unknown>;
  const doResize = pre.do_resize !== false;
  if (doResize && !(Number(size.longest_edge) > 0)) throw new ModelLoadError(`Idefics3 image processor: size must give longest_edge, got ${JSON.stringify(pre.size)}`);
  if (!doResize && pre.do_image_splitting !== false) {
    throw new ModelLoadError("Idefics3 image processor: do_resize false with do_image_splitting leaves an image's grid (and its vectors) unbounded");
  }
  const tile = Number(max.longest_edge);
  if (!(tile > 0)) throw new ModelLoadError(`Idefics3 image processor: max_image_size must give longest_edge, got ${JSON.stringify(pre.max_image_size)}`);
  if (visionImageSize !== null && tile !== visionImageSize) {
    throw new ModelLoadError(`Idefics3 image processor: tiles of ${tile} px, but the vision tower takes ${visionImageSize} px images`);
  }
  return {
    longestEdge: doResize ? Number(size.longest_edge) : null,
    tile,
    split: pre.do_image_splitting !== false,
    resample: Number(pre.resample ?? 1),
    ...normalizationFrom(pre),
  };
}

/** Size after the longest-edge resize: the long edge set, the short one truncated then made even, capped at 4096. */
export function longestEdgeSize(width: number, height: number, longest: number): { width: number; height: number } {
  let w = width;
  let h = height;
  const aspect = w / h;
  if (w >= h) {
    w = longest;
    h = Math.trunc(w / aspect);
    if (h % 2 !== 0) h += 1;
  } else {
    h = longest;
    w = Math.trunc(h * aspect);
    if (w % 2 !== 0) w += 1;
  }
  h = Math.max(h, 1);
  w = Math.max(w, 1);
  // Then scaled below MAX_IMAGE_SIZE, keeping the aspect ratio.
  const capped = w / h;
  if (w >= h && w > MAX_IMAGE_SIZE) {
    w = MAX_IMAGE_SIZE;
    h = Math.trunc(w / capped);
  } else if (h > w && h > MAX_IMAGE_SIZE) {
    h = MAX_IMAGE_SIZE;
    w = Math.trunc(h * capped);
  }
  return { width: Math.max(w, 1), height: Math.max(h, 1) };
}

/** Size after resize_for_vision_encoder: both edges rounded up to multiples of the tile. */
export function tiledSize(width: number, height: number, tile: number): { width: number; height: number } {
  const aspect = width / height;
  let w = width;
  let h = height;
  if (w >= h) {
    w = Math.ceil(w / tile) * tile;
    h = Math.trunc(w / aspect);
    h = Math.ceil(h / tile) * tile;
  } else {
    h = Math.ceil(h / tile) * tile;
    w = Math.trunc(h * aspect);
    w = Math.ceil(w / tile) * tile;
  }
  return { width: w, height: h };
}

/** An image's tiles ([tiles, 3, tile, tile] float32, the global image last) and its grid (0 x 0: not split). */
export interface TiledImage {
  data: Float32Array;
  tiles: number;
  rows: number;
  cols: number;
}

/** Idefics3ImageProcessorPil's processing of one decoded image. */
export function preprocessIdefics3(img: RgbImage, cfg: Idefics3Config): TiledImage {
  if (img.width < 1 || img.height < 1) throw new MediaError("the image has no pixels");
  if (cfg.longestEdge !== null) {
    const to = longestEdgeSize(img.width, img.height, cfg.longestEdge);
    img = resize(img, to.width, to.height, cfg.resample);
  }
  const t = cfg.tile;
  const plane = 3 * t * t;
  if (!cfg.split) {
    const data = new Float32Array(plane);
    normalizeInto(resize(img, t, t, cfg.resample), 0, 0, t, t, cfg, data, 0);
    return { data, tiles: 1, rows: 0, cols: 0 };
  }
  const to = tiledSize(img.width, img.height, t);
  img = resize(img, to.width, to.height, cfg.resample);
  if (img.height <= t && img.width <= t) {
    const data = new Float32Array(plane);
    normalizeInto(img, 0, 0, t, t, cfg, data, 0);
    return { data, tiles: 1, rows: 0, cols: 0 };
  }
  const rows = Math.floor((img.height - t) / t) + 1;
  const cols = Math.floor((img.width - t) / t) + 1;
  const tiles = rows * cols + 1;
  const data = new Float32Array(tiles * plane);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) normalizeInto(img, r * t, c * t, t, t, cfg, data, (r * cols + c) * plane);
  normalizeInto(resize(img, t, t, cfg.resample), 0, 0, t, t, cfg, data, rows * cols * plane);
  return { data, tiles, rows, cols };
}
