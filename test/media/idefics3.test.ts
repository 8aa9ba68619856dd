// Idefics3 image processing (ColModernVBERT) against transformers' Idefics3ImageProcessorPil: the resize sizes of the
// real export's settings (longest edge 2048, 512 px tiles; expected values computed with transformers'
// _resize_output_size_rescale_to_max_len / _resize_output_size_scale_below_upper_bound and
// get_number_of_image_patches), and the fixture images' grids and tiles (each tile's sum and sum of squares, from
// test/fixtures/generate/colmodernvbert.py), split and unsplit.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { decodeImage } from "../../src/media/image-decode";
import { idefics3ConfigFrom, isIdefics3, longestEdgeSize, preprocessIdefics3, tiledSize } from "../../src/media/idefics3";
import { fixture, fixtureBytes, reference } from "../helpers";

describe("sizes (longest edge 2048, tiles of 512)", () => {
  // [width, height] -> after the longest-edge resize -> after rounding up to tiles, and the rows x cols.
  const cases: Array<[[number, number], [number, number], [number, number], [number, number]]> = [
    [[1700, 2200], [1582, 2048], [2048, 2048], [4, 4]],
    [[2200, 1700], [2048, 1582], [2048, 2048], [4, 4]],
    [[300, 200], [2048, 1366], [2048, 1536], [3, 4]],
    [[4000, 10], [2048, 6], [2048, 512], [1, 4]],
    [[10, 5000], [4, 2048], [512, 2048], [4, 1]],
    [[513, 100], [2048, 400], [2048, 512], [1, 4]],
  ];
  for (const [[w, h], first, second, [rows, cols]] of cases) {
    test(`${w}x${h}`, () => {
      const a = longestEdgeSize(w, h, 2048);
      expect([a.width, a.height]).toEqual(first);
      const b = tiledSize(a.width, a.height, 512);
      expect([b.width, b.height]).toEqual(second);
      expect([b.height / 512, b.width / 512]).toEqual([rows, cols]);
    });
  }
});

describe("the fixture's images, as Idefics3ImageProcessorPil processes them", () => {
  const pre = JSON.parse(readFileSync(`${fixture("colmodernvbert")}/processor_config.json`, "utf8")).image_processor;
  for (const [which, settings] of [["split", pre], ["unsplit", { ...pre, do_image_splitting: false }]] as const) {
    test(`${which}: grid, tile count and every tile's pixels`, async () => {
      const ref = await reference("colmodernvbert");
      const cases = which === "split" ? ref.image_cases : ref.nosplit_cases;
      expect(isIdefics3(settings)).toBe(true);
      const cfg = idefics3ConfigFrom(settings, 32);
      for (const c of cases) {
        const t = preprocessIdefics3(await decodeImage(await fixtureBytes(c.file), { maxPixels: 1e8 }), cfg);
        expect([t.rows, t.cols]).toEqual(c.grid);
        expect(t.tiles).toBe(c.tiles);
        const plane = 3 * 32 * 32;
        c.tile_sums.forEach(([sum, squares]: [number, number], k: number) => {
          let s = 0;
          let q = 0;
          for (let i = k * plane; i < (k + 1) * plane; i++) {
            s += t.data[i]!;
            q += t.data[i]! * t.data[i]!;
          }
          expect(Math.abs(s - sum)).toBeLessThan(1e-6);
          expect(Math.abs(q - squares)).toBeLessThan(1e-6);
        });
      }
    });
  }
});

test("settings Idefics3 cannot be served with are refused at load", () => {
  expect(() => idefics3ConfigFrom({ size: { height: 512, width: 512 } }, 512)).toThrow("size must give longest_edge");
  expect(() => idefics3ConfigFrom({ size: { longest_edge: 2048 }, max_image_size: { longest_edge: 364 } }, 512)).toThrow("tiles of 364 px, but the vision tower takes 512 px images");
  expect(() => idefics3ConfigFrom({ do_resize: false, max_image_size: { longest_edge: 512 } }, 512)).toThrow("do_resize false with do_image_splitting");
  expect(idefics3ConfigFrom({ do_resize: false, do_image_splitting: false, max_image_size: { longest_edge: 512 } }, 512).longestEdge).toBeNull();
});
