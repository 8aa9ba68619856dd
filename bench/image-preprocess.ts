// Image preprocessing cost of one page-sized image (1700x2200, A4 at 200 dpi, seeded random pixels; decoding
// excluded), in one thread as a media worker does it: ColModernVBERT's Idefics3 processing at Qdrant/colmodernvbert's
// settings (longest edge 2048, 512 px tiles, LANCZOS: 1582x2048, then 2048x2048, 4 x 4 tiles + the global one = 17),
// its three PIL resizes alone, ColPali's SigLIP 448x448 bicubic and a CLIP 224 shortest-edge bicubic + center crop.
// Prints the median and range of wall time per image over the rounds (after one warm-up call, whose time is printed
// as the first call: a fresh media worker's first image), the process CPU time per image, and the load average (the machine may be shared: read CPU time and the load with the wall times).
//   npx bun bench/image-preprocess.ts [--rounds 7] [--src DIR]
// --src DIR takes src/media from another checkout's src folder (A/B against an older resizer).
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { uniform } from "./model";

const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const rounds = arg("rounds", 7);
const srcAt = process.argv.indexOf("--src");
const src = srcAt > 0 ? resolve(process.argv[srcAt + 1]!) : resolve(import.meta.dir, "../src");
const image: typeof import("../src/media/image") = await import(`${src}/media/image.ts`);
const idefics3: typeof import("../src/media/idefics3") = await import(`${src}/media/idefics3.ts`);

const rand = uniform(11);
const W = 1700;
const H = 2200;
const page = { width: W, height: H, data: Uint8Array.from({ length: W * H * 3 }, () => Math.floor(rand() * 256)) };

const colmodernvbert = idefics3.idefics3ConfigFrom(
  { image_processor_type: "Idefics3ImageProcessorPil", size: { longest_edge: 2048 }, max_image_size: { longest_edge: 512 }, resample: 1, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5] },
  512,
);
const siglip = image.imageConfigFrom({ size: { height: 448, width: 448 }, resample: 3, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5] }, null);
const clip = image.imageConfigFrom({ size: { shortest_edge: 224 }, crop_size: 224, resample: 3 }, null);

const cases: Array<[string, () => unknown]> = [
  ["ColModernVBERT (Idefics3, LANCZOS, 17 tiles of 512)", () => {
    const t = idefics3.preprocessIdefics3(page, colmodernvbert);
    if (t.tiles !== 17) throw new Error(`expected 17 tiles, got ${t.tiles}`);
  }],
  ["  its three LANCZOS resizes alone (-> 1582x2048 -> 2048x2048 -> 512x512)", () => {
    const a = image.resize(page, 1582, 2048, 1);
    const b = image.resize(a, 2048, 2048, 1);
    image.resize(b, 512, 512, 1);
  }],
  ["ColPali (SigLIP 448x448 bicubic)", () => image.preprocessImage(page, siglip)],
  ["CLIP (shortest edge 224 bicubic + crop)", () => image.preprocessImage(page, clip)],
];

const median = (xs: number[]) => {
  const s = xs.slice().sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

console.log(`src ${src}; ${rounds} rounds; load average before ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
for (const [name, run] of cases) {
  const first = performance.now();
  run();
  const cold = performance.now() - first;
  const wall: number[] = [];
  const c0 = cpuMs();
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    run();
    wall.push(performance.now() - t0);
  }
  const cpu = (cpuMs() - c0) / rounds;
  console.log(`${name}: median ${median(wall).toFixed(1)} ms (range ${Math.min(...wall).toFixed(1)}-${Math.max(...wall).toFixed(1)}), CPU ${cpu.toFixed(1)} ms per image; first call ${cold.toFixed(1)} ms`);
}
console.log(`load average after ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
