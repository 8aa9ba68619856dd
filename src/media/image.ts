// Image preprocessing for CLIP/SigLIP-style vision towers, as transformers' image processors (PIL backend) do it
// after decoding (image-decode.ts): resize of the shortest edge with PIL's resampling filters, center crop, rescale,
// normalise, CHW float32. jina-clip's JinaCLIPImageProcessor runs open_clip's eval transform instead (torchvision on
// PIL images), read from its own keys by jinaClipConfig: the same steps with torchvision's rounding. The resampler is
// a port of PIL's separable, antialiased 8-bit resampler, so the pixels equal what transformers feeds the model
// (sharp's own resize and transformers.js's affine resize differ on downscaling). Knows nothing of requests: bad
// input raises MediaError with a message for the client.
import { InvalidMedia as MediaError, ModelLoadError } from "../errors";

/** The parts of preprocessor_config.json an image processor reads. */
export interface ImageConfig {
  doResize: boolean;
  /**
   * Resize target: shortest edge (CLIP), an exact height/width (SigLIP), or the longest edge with the aspect kept
   * (open_clip's ResizeKeepRatio(longest=1), rounding half to even), padded to the crop with `fill`.
   */
  size: { shortestEdge: number } | { height: number; width: number } | { longestEdge: number };
  /** PIL resample code: 0 nearest, 1 lanczos, 2 bilinear, 3 bicubic, 4 box, 5 hamming. */
  resample: number;
  doCenterCrop: boolean;
  crop: { height: number; width: number };
  doRescale: boolean;
  rescaleFactor: number;
  doNormalize: boolean;
  mean: [number, number, number];
  std: [number, number, number];
  doConvertRgb: boolean;
  /**
   * Center-crop offsets: transformers' floor((size - crop) / 2), or torchvision's CenterCrop int(round(...)) (half to
   * even), which is one pixel further when size - crop is 3 mod 4. A smaller side is padded: (crop - size) // 2 before.
   */
  cropRounding: "floor" | "half-even";
  /** Pixel value (0-255, every channel) of the padding around a smaller image, before rescale and normalise. */
  fill: number;
  /** Rescale as torchvision's ToTensor (float32 v / 255) instead of transformers' float32(v * rescale_factor). */
  divideBy255: boolean;
}

const triple = (v: unknown, fallback: number): [number, number, number] =>
  Array.isArray(v) && v.length === 3 ? [Number(v[0]), Number(v[1]), Number(v[2])] : typeof v === "number" ? [v, v, v] : [fallback, fallback, fallback];

/** Reads preprocessor_config.json (CLIPImageProcessor, SiglipImageProcessor and kin; JinaCLIPImageProcessor). */
export function imageConfigFrom(pre: Record<string, unknown>, modelImageSize: number | null): ImageConfig {
  if (pre.image_processor_type === "JinaCLIPImageProcessor" || pre.resize_mode !== undefined) return jinaClipConfig(pre);
  const size = (pre.size ?? {}) as Record<string, number>;
  const fallback = modelImageSize ?? 224;
  const resizeTo: ImageConfig["size"] =
    typeof pre.size === "number" ? { shortestEdge: pre.size as number }
    : size.shortest_edge ? { shortestEdge: size.shortest_edge }
    : { height: Number(size.height ?? fallback), width: Number(size.width ?? fallback) };
  const cropRaw = pre.crop_size;
  const crop =
    typeof cropRaw === "number" ? { height: cropRaw, width: cropRaw }
    : cropRaw && typeof cropRaw === "object" ? { height: Number((cropRaw as Record<string, number>).height), width: Number((cropRaw as Record<string, number>).width) }
    : "shortestEdge" in resizeTo ? { height: resizeTo.shortestEdge, width: resizeTo.shortestEdge } : { height: resizeTo.height, width: resizeTo.width };
  return {
    doResize: pre.do_resize !== false,
    size: resizeTo,
    resample: Number(pre.resample ?? 3),
    doCenterCrop: pre.do_center_crop === true || (pre.do_center_crop === undefined && "shortestEdge" in resizeTo),
    crop,
    ...normalizationFrom(pre),
    cropRounding: "floor",
  };
}

/**
 * The rescale / normalise settings transformers' image processor configs share (defaults: 1/255, mean and std 0.5;
 * padding 0, transformers' float32(v * rescale_factor)).
 */
export function normalizationFrom(
  pre: Record<string, unknown>,
): Pick<ImageConfig, "doRescale" | "rescaleFactor" | "doNormalize" | "mean" | "std" | "doConvertRgb" | "fill" | "divideBy255"> {
  return {
    doRescale: pre.do_rescale !== false,
    rescaleFactor: Number(pre.rescale_factor ?? 1 / 255),
    doNormalize: pre.do_normalize !== false,
    mean: triple(pre.image_mean, 0.5),
    std: triple(pre.image_std, 0.5),
    doConvertRgb: pre.do_convert_rgb !== false,
    fill: 0,
    divideBy255: false,
  };
}

// open_clip's OPENAI_DATASET_MEAN / _STD, JinaCLIPImageProcessor's defaults.
const OPENAI_MEAN = [0.48145466, 0.4578275, 0.40821073];
const OPENAI_STD = [0.26862954, 0.26130258, 0.27577711];
const JINA_RESIZE_MODES = ["shortest", "longest", "squash"];

/**
 * jina-clip's preprocessor_config.json (JinaCLIPImageProcessor, jinaai/jina-clip-implementation processing_clip.py):
 * `size` (int), `mean`, `std`, `resize_mode`, `interpolation`, `fill_color`, fed to open_clip's
 * image_transform(is_train=False): shortest = Resize(size) + CenterCrop(size); squash = Resize((size, size));
 * longest = ResizeKeepRatio(size, longest=1) + CenterCropOrPad(size, fill_color); then ToTensor and Normalize in
 * float32. What that transform would not accept is refused here, at load.
 */
function jinaClipConfig(pre: Record<string, unknown>): ImageConfig {
  const bad = (what: string) => new ModelLoadError(`preprocessor_config.json (JinaCLIPImageProcessor): ${what}`);
  let size = pre.size ?? 224;
  if (Array.isArray(size) && size.length === 2 && size[0] === size[1]) size = size[0];
  if (typeof size !== "number" || !Number.isInteger(size) || size < 1) throw bad(`size must be one positive integer (a square image), got ${JSON.stringify(pre.size)}`);
  const mode = pre.resize_mode ?? "shortest";
  if (typeof mode !== "string" || !JINA_RESIZE_MODES.includes(mode)) throw bad(`resize_mode must be one of ${JINA_RESIZE_MODES.join(", ")}, got ${JSON.stringify(pre.resize_mode)}`);
  // open_clip: bilinear, else bicubic ("random" is bicubic at inference).
  const interpolation = pre.interpolation ?? "bicubic";
  if (!["bicubic", "bilinear", "random"].includes(String(interpolation))) throw bad(`interpolation must be bicubic, bilinear or random, got ${JSON.stringify(interpolation)}`);
  const fill = pre.fill_color ?? 0;
  if (typeof fill !== "number" || !Number.isInteger(fill) || fill < 0 || fill > 255) throw bad(`fill_color must be an integer 0-255, got ${JSON.stringify(fill)}`);
  const f32 = (v: [number, number, number]) => v.map(Math.fround) as [number, number, number];
  const mean = pre.mean === undefined ? (OPENAI_MEAN as [number, number, number]) : triple(pre.mean, NaN);
  const std = pre.std === undefined ? (OPENAI_STD as [number, number, number]) : triple(pre.std, NaN);
  if (![...mean, ...std].every(Number.isFinite) || std.some((v) => v === 0)) throw bad(`mean and std must be numbers or lists of 3 (std non-zero), got ${JSON.stringify(pre.mean)} / ${JSON.stringify(pre.std)}`);
  return {
    doResize: true,
    size: mode === "shortest" ? { shortestEdge: size } : mode === "longest" ? { longestEdge: size } : { height: size, width: size },
    resample: interpolation === "bilinear" ? 2 : 3,
    doCenterCrop: mode !== "squash",
    crop: { height: size, width: size },
    doRescale: true,
    rescaleFactor: 1 / 255,
    doNormalize: true,
    mean: f32(mean),
    std: f32(std),
    doConvertRgb: true,
    cropRounding: "half-even",
    fill,
    divideBy255: true,
  };
}

/** The [3, height, width] tensor the vision tower takes. */
export function pixelShape(cfg: ImageConfig): [number, number, number] {
  if (cfg.doCenterCrop) return [3, cfg.crop.height, cfg.crop.width];
  if ("shortestEdge" in cfg.size) return [3, cfg.size.shortestEdge, cfg.size.shortestEdge];
  if ("longestEdge" in cfg.size) return [3, cfg.size.longestEdge, cfg.size.longestEdge];
  return [3, cfg.size.height, cfg.size.width];
}

export interface RgbImage {
  width: number;
  height: number;
  /** Interleaved RGB, 8 bits per channel. */
  data: Uint8Array;
}

// PIL's filters (src/libImaging/Resample.c), each with its support radius.
type Filter = { support: number; fn: (x: number) => number };
const sinc = (x: number) => (x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x));
const FILTERS: Record<number, Filter> = {
  0: { support: 0.5, fn: (x) => (x > -0.5 && x <= 0.5 ? 1 : 0) }, // nearest is special-cased below
  1: { support: 3, fn: (x) => (x >= -3 && x < 3 ? sinc(x) * sinc(x / 3) : 0) },
  2: { support: 1, fn: (x) => { x = Math.abs(x); return x < 1 ? 1 - x : 0; } },
  3: {
    support: 2,
    fn: (x) => {
      const a = -0.5;
      x = Math.abs(x);
      if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
      if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
      return 0;
    },
  },
  4: { support: 0.5, fn: (x) => (x > -0.5 && x <= 0.5 ? 1 : 0) },
  // Hamming-windowed sinc (PIL's hamming_filter: sin(pi x) / (pi x) * (0.54 + 0.46 cos(pi x))).
  5: { support: 1, fn: (x) => { x = Math.abs(x); if (x === 0) return 1; if (x >= 1) return 0; x *= Math.PI; return (Math.sin(x) / x) * (0.54 + 0.46 * Math.cos(x)); } },
};

const PRECISION_BITS = 32 - 8 - 2;
/** The rounding term every fixed-point sum starts from (PIL: 1 << (PRECISION_BITS - 1)). */
const HALF = 1 << (PRECISION_BITS - 1);

interface Coeffs { bounds: Int32Array; kernel: Int32Array; ksize: number }

/** Fixed-point filter weights per output pixel, as PIL's precompute_coeffs + normalize_coeffs_8bpc. */
function computeCoefficients(inSize: number, outSize: number, filter: Filter): Coeffs {
  const scale = inSize / outSize;
  const filterScale = Math.max(scale, 1);
  const support = filter.support * filterScale;
  const ksize = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const kernel = new Int32Array(outSize * ksize);
  const pre = new Float64Array(ksize);
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    const ss = 1 / filterScale;
    // C's (int) truncates toward zero.
    let xmin = Math.trunc(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    let xmax = Math.trunc(center + support + 0.5);
    if (xmax > inSize) xmax = inSize;
    xmax -= xmin;
    let ww = 0;
    for (let x = 0; x < xmax; x++) {
      const w = filter.fn((x + xmin - center + 0.5) * ss);
      pre[x] = w;
      ww += w;
    }
    for (let x = 0; x < xmax; x++) {
      const k = ww !== 0 ? pre[x]! / ww : pre[x]!;
      kernel[xx * ksize + x] = Math.trunc(k < 0 ? -0.5 + k * (1 << PRECISION_BITS) : 0.5 + k * (1 << PRECISION_BITS));
    }
    bounds[2 * xx] = xmin;
    bounds[2 * xx + 1] = xmax;
  }
  return { bounds, kernel, ksize };
}

// The weights depend only on (filter, in size, out size): an image processor resizes to the same few sizes again and
// again (Idefics3: 2048 -> 512 for every global tile), so they are kept. The map is emptied before it would hold more
// than COEFF_CACHE_INTS weights (4 MB; one set is out size x window, e.g. 2048 x 9 for 2200 -> 2048 LANCZOS), so a
// stream of odd sizes cannot grow it.
const COEFF_CACHE_INTS = 1 << 20;
const coeffCache = new Map<string, Coeffs>();
let coeffCacheInts = 0;

function coefficients(inSize: number, outSize: number, resample: number, filter: Filter): Coeffs {
  const key = `${resample}:${inSize}:${outSize}`;
  let c = coeffCache.get(key);
  if (!c) {
    c = computeCoefficients(inSize, outSize, filter);
    const ints = c.kernel.length + c.bounds.length;
    if (coeffCacheInts + ints > COEFF_CACHE_INTS) {
      coeffCache.clear();
      coeffCacheInts = 0;
    }
    if (ints <= COEFF_CACHE_INTS) {
      coeffCache.set(key, c);
      coeffCacheInts += ints;
    }
  }
  return c;
}

/**
 * PIL's clip8: the fixed-point sum shifted down to 8 bits, clamped to 0-255. `v` is an int32 (PIL's int ss);
 * >> is C's arithmetic shift on it.
 */
const clip8 = (v: number) => {
  const x = v >> PRECISION_BITS;
  return x < 0 ? 0 : x > 255 ? 255 : x;
};

// Both passes keep PIL's int32 arithmetic: the products (8-bit pixel x 22-bit weight, Math.imul) and sums are exact
// integers in float64 and are wrapped to int32 (| 0, or the store into an Int32Array) after at most a few additions.
// int32 addition is associative modulo 2^32, so the result is PIL's int ss whatever the grouping: exact while PIL's
// sums stay in range, wrapping as C's int does where they would not. Every pixel equals PIL's.

/** Horizontal pass (PIL's ImagingResampleHorizontal_8bpc on RGB): each output row from the same input row. */
function resampleHorizontal(src: RgbImage, outW: number, c: Coeffs): RgbImage {
  const { width, height, data } = src;
  const { bounds, kernel, ksize } = c;
  const out = new Uint8Array(outW * height * 3);
  const inRow = width * 3;
  const outRow = outW * 3;
  for (let y = 0; y < height; y++) {
    const row = y * inRow;
    let o = y * outRow;
    for (let xx = 0; xx < outW; xx++) {
      let p = row + bounds[2 * xx]! * 3;
      let k = xx * ksize;
      const end = k + bounds[2 * xx + 1]!;
      let r = HALF;
      let g = HALF;
      let b = HALF;
      // Two taps a step.
      for (; k + 1 < end; k += 2, p += 6) {
        const w = kernel[k]!;
        const v = kernel[k + 1]!;
        r = (r + Math.imul(data[p]!, w) + Math.imul(data[p + 3]!, v)) | 0;
        g = (g + Math.imul(data[p + 1]!, w) + Math.imul(data[p + 4]!, v)) | 0;
        b = (b + Math.imul(data[p + 2]!, w) + Math.imul(data[p + 5]!, v)) | 0;
      }
      if (k < end) {
        const w = kernel[k]!;
        r = (r + Math.imul(data[p]!, w)) | 0;
        g = (g + Math.imul(data[p + 1]!, w)) | 0;
        b = (b + Math.imul(data[p + 2]!, w)) | 0;
      }
      out[o++] = clip8(r);
      out[o++] = clip8(g);
      out[o++] = clip8(b);
    }
  }
  return { width: outW, height, data: out };
}

/**
 * Vertical pass (PIL's ImagingResampleVertical_8bpc): each output row is a weighted sum of input rows, accumulated
 * row-major in an int32 row, two input rows a step (the sums PIL forms per pixel, read in memory order).
 */
function resampleVertical(src: RgbImage, outH: number, c: Coeffs): RgbImage {
  const { width, data } = src;
  const { bounds, kernel, ksize } = c;
  const rowLen = width * 3;
  const out = new Uint8Array(rowLen * outH);
  const acc = new Int32Array(rowLen);
  for (let yy = 0; yy < outH; yy++) {
    const ymin = bounds[2 * yy]!;
    const n = bounds[2 * yy + 1]!;
    const k = yy * ksize;
    acc.fill(HALF);
    let y = 0;
    for (; y + 1 < n; y += 2) {
      const w = kernel[k + y]!;
      const v = kernel[k + y + 1]!;
      const p = (ymin + y) * rowLen;
      const q = p + rowLen;
      for (let i = 0; i < rowLen; i++) acc[i] = acc[i]! + Math.imul(data[p + i]!, w) + Math.imul(data[q + i]!, v);
    }
    if (y < n) {
      const w = kernel[k + y]!;
      const p = (ymin + y) * rowLen;
      for (let i = 0; i < rowLen; i++) acc[i] = acc[i]! + Math.imul(data[p + i]!, w);
    }
    const o = yy * rowLen;
    for (let i = 0; i < rowLen; i++) out[o + i] = clip8(acc[i]!);
  }
  return { width, height: outH, data: out };
}

function nearest(src: RgbImage, outW: number, outH: number): RgbImage {
  const out = new Uint8Array(outW * outH * 3);
  const data = src.data;
  const columns = new Int32Array(outW);
  for (let x = 0; x < outW; x++) columns[x] = Math.min(src.width - 1, Math.floor((x + 0.5) * (src.width / outW))) * 3;
  let o = 0;
  for (let y = 0; y < outH; y++) {
    const row = Math.min(src.height - 1, Math.floor((y + 0.5) * (src.height / outH))) * src.width * 3;
    for (let x = 0; x < outW; x++) {
      const p = row + columns[x]!;
      out[o++] = data[p]!;
      out[o++] = data[p + 1]!;
      out[o++] = data[p + 2]!;
    }
  }
  return { width: outW, height: outH, data: out };
}

/** PIL's Image.resize((outW, outH), resample): horizontal pass, then vertical, each rounding to 8 bits. */
export function resize(src: RgbImage, outW: number, outH: number, resample: number): RgbImage {
  if (src.width === outW && src.height === outH) return src;
  if (resample === 0) return nearest(src, outW, outH);
  const filter = FILTERS[resample];
  if (!filter) throw new MediaError(`resample filter ${resample} is not supported`);
  let img = src;
  if (outW !== img.width) img = resampleHorizontal(img, outW, coefficients(img.width, outW, resample, filter));
  if (outH !== img.height) img = resampleVertical(img, outH, coefficients(img.height, outH, resample, filter));
  return img;
}

/** Python's round(): halves go to the even neighbour. */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * transformers' get_resize_output_image_size for {shortest_edge} (and torchvision's Resize(int)): the long side is
 * truncated, not rounded. {longestEdge}: open_clip's ResizeKeepRatio(longest=1), each side round(side / ratio).
 */
export function resizedSize(width: number, height: number, cfg: ImageConfig): { width: number; height: number } {
  if ("longestEdge" in cfg.size) {
    const s = cfg.size.longestEdge;
    const ratio = Math.max(height / s, width / s);
    const size = { width: roundHalfEven(width / ratio), height: roundHalfEven(height / ratio) };
    // A very thin image keeps no pixel across (open_clip's PIL resize fails there too): a bad input, not a crash.
    if (size.width === 0 || size.height === 0) {
      throw new MediaError(`a ${width}x${height} image is too thin: with its longest side resized to ${s} pixels its shortest side has none`);
    }
    return size;
  }
  if (!("shortestEdge" in cfg.size)) return { width: cfg.size.width, height: cfg.size.height };
  const s = cfg.size.shortestEdge;
  if (width <= height) return { width: s, height: Math.trunc((s * height) / width) };
  return { width: Math.trunc((s * width) / height), height: s };
}

/**
 * Where the crop starts along one side (negative: padding before the image). transformers' center_crop takes
 * floor((size - crop) / 2) either way; torchvision pads (crop - size) // 2 before a smaller side and crops a larger
 * one at int(round((size - crop) / 2)).
 */
function cropOffset(size: number, crop: number, rounding: ImageConfig["cropRounding"]): number {
  if (rounding === "floor") return Math.floor((size - crop) / 2);
  return size < crop ? -Math.floor((crop - size) / 2) : roundHalfEven((size - crop) / 2);
}

/** Resize, center crop, rescale, normalise: the [3, H, W] float32 the vision tower takes. */
export function preprocessImage(img: RgbImage, cfg: ImageConfig): Float32Array {
  if (cfg.doResize) {
    const to = resizedSize(img.width, img.height, cfg);
    img = resize(img, to.width, to.height, cfg.resample);
  }
  const [, outH, outW] = pixelShape(cfg);
  const cropH = cfg.doCenterCrop ? outH : img.height;
  const cropW = cfg.doCenterCrop ? outW : img.width;
  const top = cropOffset(img.height, cropH, cfg.cropRounding);
  const left = cropOffset(img.width, cropW, cfg.cropRounding);
  const out = new Float32Array(3 * cropH * cropW);
  normalizeInto(img, top, left, cropH, cropW, cfg, out, 0);
  return out;
}

/**
 * The [3, height, width] region of `img` at (top, left), rescaled and normalised, written at `offset` of `out`
 * (pixels outside the image are `fill` before rescaling, as a smaller image is padded).
 */
export function normalizeInto(
  img: RgbImage,
  top: number,
  left: number,
  height: number,
  width: number,
  cfg: Pick<ImageConfig, "doRescale" | "rescaleFactor" | "doNormalize" | "mean" | "std" | "fill" | "divideBy255">,
  out: Float32Array,
  offset: number,
): void {
  const plane = height * width;
  const scale = cfg.doRescale ? cfg.rescaleFactor : 1;
  const rescale = cfg.doRescale && cfg.divideBy255 ? (v: number) => Math.fround(v / 255) : (v: number) => Math.fround(v * scale);
  // The image's columns [x0, x1) of the region; the rest (and rows outside) are padding.
  const x0 = Math.min(width, Math.max(0, -left));
  const x1 = Math.max(x0, Math.min(width, img.width - left));
  const lut = new Float32Array(256);
  const data = img.data;
  for (let c = 0; c < 3; c++) {
    const mean = cfg.doNormalize ? cfg.mean[c]! : 0;
    const std = cfg.doNormalize ? cfg.std[c]! : 1;
    // float32 at each step, as numpy does with float32 arrays; a pixel's value depends only on its byte, so the 256
    // possible values are computed once per channel (the same expression, so the same float32s).
    const value = (v: number) => Math.fround(Math.fround(rescale(v) - mean) / std);
    for (let v = 0; v < 256; v++) lut[v] = value(v);
    const padding = value(cfg.fill);
    for (let y = 0; y < height; y++) {
      const sy = y + top;
      const o = offset + c * plane + y * width;
      if (sy < 0 || sy >= img.height) {
        out.fill(padding, o, o + width);
        continue;
      }
      if (x0 > 0) out.fill(padding, o, o + x0);
      let p = (sy * img.width + x0 + left) * 3 + c;
      for (let x = x0; x < x1; x++, p += 3) out[o + x] = lut[data[p]!]!;
      if (x1 < width) out.fill(padding, o + x1, o + width);
    }
  }
}
