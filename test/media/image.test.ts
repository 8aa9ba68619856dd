// Image decoding and preprocessing against the transformers (PIL) reference pixel_values, and the vision tower
// alone on the reference pixel_values (separating decoding differences from model differences).
import { describe, expect, test } from "bun:test";
import sharp from "sharp";
import { join } from "node:path";
import { InvalidMedia } from "../../src/errors";
import { imageConfigFrom, preprocessImage, resize, resizedSize } from "../../src/media/image";
import { decodeImage } from "../../src/media/image-decode";
import { ModelSession } from "../../src/model/session";
import { cosine, fixture, fixtureBytes, hugeHeaderPng, l2, maxAbsDiff, reference, ROOT } from "../helpers";

const media = fixtureBytes;
const limits = { maxPixels: 1_000_000 };

describe("CLIPImageProcessor parity", async () => {
  const ref = await reference("clip");
  const cfg = imageConfigFrom(await Bun.file(join(fixture("clip"), "preprocessor_config.json")).json(), 32);
  for (const c of ref.image_cases) {
    test(`${c.file}: decoded size and pixel_values within 1e-6`, async () => {
      const img = await decodeImage(await media(c.file), limits);
      expect([img.width, img.height]).toEqual(c.oriented_size);
      const pv = preprocessImage(img, cfg);
      expect(pv.length).toBe(3 * 32 * 32);
      const diff = maxAbsDiff(pv, c.pixel_values);
      console.log(`pixel_values max abs diff ${c.file}: ${diff.toExponential(2)}`);
      expect(diff).toBeLessThan(1e-6);
    });
  }

  test("the vision tower alone on the reference pixel_values reproduces image_embeds", async () => {
    const session = await ModelSession.create(join(fixture("clip"), "onnx", "vision_model.onnx"), { device: "cpu", numThreads: 1 });
    for (const c of ref.image_cases) {
      const out = await session.runFeeds({ pixel_values: { data: Float32Array.from(c.pixel_values), dims: [1, 3, 32, 32] } }, "image_embeds");
      const cos = cosine(out.data, c.image_embeds);
      console.log(`vision tower on reference pixel_values ${c.file}: cosine ${cos}, max abs diff ${maxAbsDiff(out.data, c.image_embeds).toExponential(2)}`);
      expect(cos).toBeGreaterThanOrEqual(0.99999);
      expect(maxAbsDiff(out.data, c.image_embeds)).toBeLessThan(1e-4);
    }
    await session.release();
  });
});

describe("resizing", () => {
  test("shortest edge: the long side is truncated like transformers", () => {
    const cfg = imageConfigFrom({ size: { shortest_edge: 224 }, crop_size: 224 }, null);
    expect(resizedSize(640, 480, cfg)).toEqual({ width: 298, height: 224 });
    expect(resizedSize(24, 40, { ...cfg, size: { shortestEdge: 32 } })).toEqual({ width: 32, height: 53 });
    expect(resizedSize(1, 1, cfg)).toEqual({ width: 224, height: 224 });
    // open_clip's ResizeKeepRatio(longest=1): a side that rounds to no pixel is a bad image, not a crash later.
    expect(resizedSize(10, 100, { ...cfg, size: { longestEdge: 30 } })).toEqual({ width: 3, height: 30 });
    expect(() => resizedSize(1, 100, { ...cfg, size: { longestEdge: 30 } })).toThrow("a 1x100 image is too thin");
  });

  test("SigLIP-style exact size without crop", () => {
    const cfg = imageConfigFrom({ size: { height: 16, width: 16 }, do_center_crop: false, image_mean: 0.5, image_std: 0.5, resample: 2 }, null);
    const img = { width: 40, height: 20, data: new Uint8Array(40 * 20 * 3).fill(255) };
    const pv = preprocessImage(img, cfg);
    expect(pv.length).toBe(3 * 16 * 16);
    expect(Math.max(...pv)).toBeCloseTo(1, 5);
  });

  test("every filter, odd sizes up and down: byte for byte PIL's Image.resize", async () => {
    // test/fixtures/generate/pil_resize.py: a 31x23 RGB image (noise, a checkerboard and hard edges, so the filters
    // overshoot and clip) resized by Pillow to 7 sizes with each of the 6 filters.
    const ref = await reference("pil-resize");
    const src = { width: ref.width, height: ref.height, data: new Uint8Array(Buffer.from(ref.rgb, "base64")) };
    expect(src.data.length).toBe(31 * 23 * 3);
    const filters = new Set<number>();
    for (const c of ref.cases) {
      const out = resize(src, c.width, c.height, c.filter);
      const want = new Uint8Array(Buffer.from(c.rgb, "base64"));
      expect([out.width, out.height, out.data.length]).toEqual([c.width, c.height, want.length]);
      let differ = 0;
      for (let i = 0; i < want.length; i++) if (out.data[i] !== want[i]) differ++;
      if (differ) console.log(`filter ${c.filter} -> ${c.width}x${c.height}: ${differ} of ${want.length} bytes differ from PIL`);
      expect(differ).toBe(0);
      filters.add(c.filter);
    }
    expect([...filters].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    // Resizing again to the same sizes (weights from the cache) gives the same bytes.
    for (const c of ref.cases.filter((c: { filter: number }) => c.filter === 1)) {
      expect(Buffer.from(resize(src, c.width, c.height, 1).data).toString("base64")).toBe(c.rgb);
    }
  });

  test("a flat image stays flat under every filter (weights sum to one)", () => {
    const img = { width: 37, height: 23, data: new Uint8Array(37 * 23 * 3).fill(100) };
    for (const f of [0, 1, 2, 3, 4, 5]) {
      for (const [w, h] of [[10, 7], [80, 50]] as const) {
        const out = resize(img, w, h, f);
        expect(out.width).toBe(w);
        expect(new Set(out.data).size).toBe(1);
        expect(out.data[0]).toBe(100);
      }
    }
  });
});

describe("decoding", () => {
  const rgb = (w: number, h: number) => sharp({ create: { width: w, height: h, channels: 3, background: { r: 200, g: 30, b: 90 } } });

  test("WebP and GIF decode; lossless WebP equals the PNG pixels", async () => {
    const png = new Uint8Array(await sharp(await media("media/landscape.png")).png().toBuffer());
    const webp = new Uint8Array(await sharp(png).webp({ lossless: true }).toBuffer());
    const a = await decodeImage(png, limits);
    const b = await decodeImage(webp, limits);
    expect(Array.from(b.data)).toEqual(Array.from(a.data));
    const gif = new Uint8Array(await rgb(20, 10).gif().toBuffer());
    const g = await decodeImage(gif, limits);
    expect([g.width, g.height]).toEqual([20, 10]);
  });

  test("an animated GIF gives its first frame", async () => {
    // Two 8x8 frames stacked vertically: red, then blue.
    const frames = new Uint8Array(8 * 16 * 3);
    for (let i = 0; i < 8 * 8; i++) frames.set([255, 0, 0], i * 3);
    for (let i = 8 * 8; i < 8 * 16; i++) frames.set([0, 0, 255], i * 3);
    const gif = new Uint8Array(await sharp(frames, { raw: { width: 8, height: 16, channels: 3, pageHeight: 8 } }).gif().toBuffer());
    const g = await decodeImage(gif, limits);
    expect([g.width, g.height]).toEqual([8, 8]);
    expect(g.data[0]).toBeGreaterThan(200);
    expect(g.data[2]).toBeLessThan(50);
  });

  test("grayscale becomes three equal channels; alpha is dropped without compositing", async () => {
    const gray = new Uint8Array(await sharp(Buffer.alloc(4 * 4, 77), { raw: { width: 4, height: 4, channels: 1 } }).png().toBuffer());
    const g = await decodeImage(gray, limits);
    expect(Array.from(g.data.subarray(0, 3))).toEqual([77, 77, 77]);
    const rgba = new Uint8Array(await sharp(Buffer.from([10, 20, 30, 0, 10, 20, 30, 0, 10, 20, 30, 0, 10, 20, 30, 0]), { raw: { width: 2, height: 2, channels: 4 } }).png().toBuffer());
    const a = await decodeImage(rgba, limits);
    expect(Array.from(a.data.subarray(0, 3))).toEqual([10, 20, 30]);
  });

  const bad: Array<[string, () => Promise<Uint8Array>, string]> = [
    ["empty", async () => new Uint8Array(0), "empty"],
    ["not an image", async () => new TextEncoder().encode("hello, I am text"), "not a decodable image"],
    ["truncated PNG", async () => (await media("media/landscape.png")).slice(0, 200), "PNG"],
    ["truncated JPEG", async () => (await media("media/portrait.jpg")).slice(0, 400), "JPEG"],
    ["TIFF (unsupported format)", async () => new Uint8Array(await rgb(4, 4).tiff().toBuffer()), "supported formats: JPEG, PNG, WebP, GIF"],
    ["too many pixels", async () => new Uint8Array(await rgb(1200, 1000).png().toBuffer()), "at most 1000000"],
  ];
  for (const [name, make, needle] of bad) {
    test(`${name}: a clear InvalidMedia`, async () => {
      const err = await decodeImage(await make(), limits).catch((e) => e);
      expect(err).toBeInstanceOf(InvalidMedia);
      expect(err.message).toContain(needle);
    });
  }

  test("a decompression bomb's header is refused before decoding", async () => {
    expect(hugeHeaderPng(60000, 60000).length).toBeLessThan(200);
    const err = await decodeImage(hugeHeaderPng(60000, 60000), limits).catch((e) => e);
    expect(err).toBeInstanceOf(InvalidMedia);
    expect(err.message).toContain("3600000000 pixels");
  });
});
