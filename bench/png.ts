// A tiny RGB raster with rectangles, lines and a 5x7 bitmap font, encoded as PNG with node:zlib: enough for the
// benchmark chart without a dependency.
import { deflateSync } from "node:zlib";

export type RGB = [number, number, number];

// 5x7 glyphs, rows top to bottom; lowercase letters are drawn as uppercase.
const GLYPHS: Record<string, string> = {
  A: ".###.#...##...#######...##...##...#", B: "####.#...##...#####.#...##...#####.", C: ".###.#...##....#....#....#...#.###.",
  D: "####.#...##...##...##...##...#####.", E: "######....#....####.#....#....#####", F: "######....#....####.#....#....#....",
  G: ".###.#...##....#.####...##...#.####", H: "#...##...##...#######...##...##...#", I: ".###...#....#....#....#....#...###.",
  J: "..###...#....#....#....##..#..##...", K: "#...##..#.#.#..##...#.#..#..#.#...#", L: "#....#....#....#....#....#....#####",
  M: "#...###.###.#.##...##...##...##...#", N: "#...##...###..##.#.##..###...##...#", O: ".###.#...##...##...##...##...#.###.",
  P: "####.#...##...#####.#....#....#....", Q: ".###.#...##...##...##.#.##..#..##.#", R: "####.#...##...#####.#.#..#..#.#...#",
  S: ".#####....#.....###.....#....#####.", T: "#####..#....#....#....#....#....#..", U: "#...##...##...##...##...##...#.###.",
  V: "#...##...##...##...##...#.#.#...#..", W: "#...##...##...##.#.##.#.##.#..#.#..", X: "#...##...#.#.#...#...#.#.#...##...#",
  Y: "#...##...#.#.#...#....#....#....#..", Z: "#####....#...#...#...#...#....#####",
  "0": ".###.#...##..###.#.###..##...#.###.", "1": "..#...##....#....#....#....#...###.", "2": ".###.#...#....#...#...#...#...#####",
  "3": "#####...#...#.....#.....##...#.###.", "4": "...#...##..#.#.#..#.#####...#....#.", "5": "######....####.....#....##...#.###.",
  "6": "..##..#...#....####.#...##...#.###.", "7": "#####....#...#...#...#....#....#...", "8": ".###.#...##...#.###.#...##...#.###.",
  "9": ".###.#...##...#.####....#...#..##..", ".": "..............................##...", "-": "................###................",
  "/": "....#...#....#...#...#....#...#....", ":": "......##...##.........##...##......", "(": "...#...#...#....#....#.....#.....#.",
  ")": ".#.....#.....#....#....#...#...#...", "=": "..........#####.....#####..........", ",": ".....................##....#...#...",
  "%": "##...##..#...#...#...#...#..##...##", " ": "...................................",
  ">": "#.....#.....#.....#...#...#...#....", "<": "....#...#...#...#.....#.....#.....#", "+": ".......#....#..#####..#....#.......",
};

export class Canvas {
  readonly data: Uint8Array;
  constructor(readonly width: number, readonly height: number, bg: RGB = [255, 255, 255]) {
    this.data = new Uint8Array(width * height * 3);
    for (let i = 0; i < width * height; i++) this.data.set(bg, i * 3);
  }

  pixel(x: number, y: number, c: RGB): void {
    x = Math.round(x);
    y = Math.round(y);
    if (x < 0 || y < 0 || x >= this.width || y >= this.height) return;
    this.data.set(c, (y * this.width + x) * 3);
  }

  rect(x: number, y: number, w: number, h: number, c: RGB): void {
    for (let j = Math.round(y); j < Math.round(y + h); j++) for (let i = Math.round(x); i < Math.round(x + w); i++) this.pixel(i, j, c);
  }

  /** A line `width` pixels thick; `dash` > 0 draws dashes of that length. */
  line(x0: number, y0: number, x1: number, y1: number, c: RGB, width = 1, dash = 0): void {
    const len = Math.hypot(x1 - x0, y1 - y0);
    const steps = Math.max(1, Math.ceil(len * 2));
    const r = (width - 1) / 2;
    for (let s = 0; s <= steps; s++) {
      const t = s / steps;
      if (dash > 0 && Math.floor((t * len) / dash) % 2 === 1) continue;
      const x = x0 + (x1 - x0) * t;
      const y = y0 + (y1 - y0) * t;
      this.rect(x - r, y - r, width, width, c);
    }
  }

  /** Text in the 5x7 font at `scale`; returns the drawn width. align: 0 left, 0.5 centre, 1 right. */
  text(s: string, x: number, y: number, c: RGB, scale = 2, align = 0): number {
    const w = s.length * 6 * scale - scale;
    let cx = x - w * align;
    for (const ch of s) {
      const g = GLYPHS[ch] ?? GLYPHS[ch.toUpperCase()] ?? GLYPHS[" "]!;
      for (let row = 0; row < 7; row++) {
        for (let col = 0; col < 5; col++) if (g[row * 5 + col] === "#") this.rect(cx + col * scale, y + row * scale, scale, scale, c);
      }
      cx += 6 * scale;
    }
    return w;
  }

  /** Text rotated 90 degrees counter-clockwise (for a y-axis label), centred on (x, y). */
  textUp(s: string, x: number, y: number, c: RGB, scale = 2): void {
    const w = s.length * 6 * scale - scale;
    let cy = y + w / 2;
    for (const ch of s) {
      const g = GLYPHS[ch] ?? GLYPHS[ch.toUpperCase()] ?? GLYPHS[" "]!;
      for (let row = 0; row < 7; row++) {
        for (let col = 0; col < 5; col++) if (g[row * 5 + col] === "#") this.rect(x + row * scale, cy - (col + 1) * scale, scale, scale, c);
      }
      cy -= 6 * scale;
    }
  }

  png(): Uint8Array {
    const raw = new Uint8Array((this.width * 3 + 1) * this.height);
    for (let y = 0; y < this.height; y++) {
      raw[y * (this.width * 3 + 1)] = 0; // filter: none
      raw.set(this.data.subarray(y * this.width * 3, (y + 1) * this.width * 3), y * (this.width * 3 + 1) + 1);
    }
    const ihdr = new Uint8Array(13);
    const dv = new DataView(ihdr.buffer);
    dv.setUint32(0, this.width);
    dv.setUint32(4, this.height);
    ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB, deflate, no filter choice, no interlace
    const parts = [
      new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      chunk("IHDR", ihdr),
      chunk("IDAT", deflateSync(raw, { level: 9 })),
      chunk("IEND", new Uint8Array(0)),
    ];
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, body: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + body.length);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, body.length);
  for (let i = 0; i < 4; i++) out[4 + i] = type.charCodeAt(i);
  out.set(body, 8);
  dv.setUint32(8 + body.length, crc32(out.subarray(4, 8 + body.length)));
  return out;
}
