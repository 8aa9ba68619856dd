// JinaCLIPImageProcessor (jina-clip): pixel_values against open_clip's eval transform as test/fixtures/generate/
// jina_clip.py runs it (shortest-edge resize + CenterCrop with round(), squash, longest-edge resize + pad with
// fill_color), for the fixture's images and a 60x25 one whose longest-edge resize lands on a half.
import { describe, expect, test } from "bun:test";
import { imageConfigFrom, preprocessImage, resizedSize, roundHalfEven } from "../../src/media/image";
import { decodeImage } from "../../src/media/image-decode";
import { fixtureBytes, maxAbsDiff, reference } from "../helpers";

const limits = { maxPixels: 1_000_000 };
const floats = (b64: string) => {
  const bytes = Buffer.from(b64, "base64");
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
};

describe("JinaCLIPImageProcessor parity", async () => {
  const ref = await reference("jina-clip");
  for (const v of ref.preprocess_variants as Array<{ preprocessor: Record<string, unknown>; pixel_values: string[] }>) {
    const label = `${v.preprocessor.resize_mode}${v.preprocessor.interpolation === "bilinear" ? ", bilinear" : ""}${v.preprocessor.fill_color ? `, fill ${v.preprocessor.fill_color}` : ""}`;
    test(`${label}: pixel_values of every image within 1e-6`, async () => {
      const cfg = imageConfigFrom(v.preprocessor, null);
      for (const [i, file] of (ref.variant_files as string[]).entries()) {
        const pv = preprocessImage(await decodeImage(await fixtureBytes(file), limits), cfg);
        const want = floats(v.pixel_values[i]!);
        expect(pv.length).toBe(want.length);
        const diff = maxAbsDiff(pv, want);
        if (diff >= 1e-6) console.log(`${label} ${file}: max abs diff ${diff}`);
        expect(diff).toBeLessThan(1e-6);
      }
    });
  }

  test("the shortest-edge crop starts at torchvision's round(), not transformers' floor", () => {
    const cfg = imageConfigFrom({ image_processor_type: "JinaCLIPImageProcessor", size: 30 }, null);
    expect(cfg.cropRounding).toBe("half-even");
    expect(resizedSize(48, 32, cfg)).toEqual({ width: 45, height: 30 });
    // 45 - 30 = 15: round(7.5) = 8; a flat left half and bright right half shows where the crop started
    const img = { width: 45, height: 30, data: new Uint8Array(45 * 30 * 3) };
    for (let y = 0; y < 30; y++) for (let x = 8; x < 45; x++) img.data.fill(255, (y * 45 + x) * 3, (y * 45 + x) * 3 + 3);
    const pv = preprocessImage(img, { ...cfg, doResize: false });
    expect(pv[0]).toBeGreaterThan(1); // column 0 of the crop is source column 8: bright
  });

  test("defaults: OpenAI mean/std, 224, shortest, bicubic; Python's round", () => {
    const cfg = imageConfigFrom({ image_processor_type: "JinaCLIPImageProcessor" }, null);
    expect(cfg.size).toEqual({ shortestEdge: 224 });
    expect(cfg.resample).toBe(3);
    expect(cfg.mean[0]).toBe(Math.fround(0.48145466));
    expect([0.5, 1.5, 2.5, 3.5, -0.5, 12.5, 12.4999].map(roundHalfEven)).toEqual([0, 2, 2, 4, -0, 12, 12]);
  });
});
