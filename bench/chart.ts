// The results chart: tokens/s by concurrency, one panel per request size, one line per server, the limit as a
// dashed line.
import { Canvas, type RGB } from "./png";

export interface ChartSeries {
  name: string;
  color: RGB;
  /** request size -> concurrency -> tokens/s */
  points: Map<number, Map<number, number>>;
}

const AXIS: RGB = [60, 60, 60];
const GRID: RGB = [225, 225, 225];

function niceStep(max: number, ticks: number): number {
  const raw = max / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

export function drawChart(opts: {
  title: string;
  subtitle: string;
  sizes: number[];
  concurrency: number[];
  series: ChartSeries[];
  limit: { tokensPerSec: number; label: string; color: RGB } | null;
}): Uint8Array {
  const panelW = 520, panelH = 380, left = 90, top = 135, gap = 60, bottom = 70, right = 30;
  const width = left + opts.sizes.length * panelW + (opts.sizes.length - 1) * gap + right;
  const height = top + panelH + bottom;
  const c = new Canvas(width, height);
  c.text(opts.title, width / 2, 14, AXIS, 3, 0.5);
  c.text(opts.subtitle, width / 2, 44, AXIS, 2, 0.5);
  // Legend.
  const legend: Array<{ name: string; color: RGB; dashed: boolean }> = opts.series.map((s) => ({ name: s.name, color: s.color, dashed: false }));
  if (opts.limit) legend.push({ name: opts.limit.label, color: opts.limit.color, dashed: true });
  let lx = left;
  for (const l of legend) {
    c.line(lx, 80, lx + 36, 80, l.color, 3, l.dashed ? 6 : 0);
    lx += 46 + c.text(l.name, lx + 46, 73, AXIS, 2) + 40;
  }
  let max = opts.limit?.tokensPerSec ?? 0;
  for (const s of opts.series) for (const m of s.points.values()) for (const v of m.values()) if (Number.isFinite(v)) max = Math.max(max, v);
  const step = niceStep(max * 1.1 || 1, 5);
  const ymax = Math.ceil((max * 1.1 || 1) / step) * step;
  opts.sizes.forEach((size, p) => {
    const x0 = left + p * (panelW + gap);
    const y0 = top;
    const sy = (v: number) => y0 + panelH - (v / ymax) * panelH;
    const n = opts.concurrency.length;
    const sx = (i: number) => x0 + 40 + (i * (panelW - 80)) / Math.max(1, n - 1);
    for (let v = 0; v <= ymax + 1e-9; v += step) {
      c.line(x0, sy(v), x0 + panelW, sy(v), GRID);
      c.text(String(Math.round(v)), x0 - 8, sy(v) - 7, AXIS, 2, 1);
    }
    c.line(x0, y0, x0, y0 + panelH, AXIS, 2);
    c.line(x0, y0 + panelH, x0 + panelW, y0 + panelH, AXIS, 2);
    opts.concurrency.forEach((conc, i) => {
      c.line(sx(i), y0 + panelH, sx(i), y0 + panelH + 6, AXIS, 2);
      c.text(String(conc), sx(i), y0 + panelH + 12, AXIS, 2, 0.5);
    });
    c.text("concurrency", x0 + panelW / 2, y0 + panelH + 40, AXIS, 2, 0.5);
    c.text(`${size} input${size === 1 ? "" : "s"} per request`, x0 + panelW / 2, y0 - 18, AXIS, 2, 0.5);
    if (opts.limit) c.line(x0, sy(opts.limit.tokensPerSec), x0 + panelW, sy(opts.limit.tokensPerSec), opts.limit.color, 3, 8);
    for (const s of opts.series) {
      const pts = opts.concurrency.map((conc, i) => [sx(i), s.points.get(size)?.get(conc)] as const).filter(([, v]) => v !== undefined && Number.isFinite(v)) as Array<readonly [number, number]>;
      for (let i = 1; i < pts.length; i++) c.line(pts[i - 1]![0], sy(pts[i - 1]![1]), pts[i]![0], sy(pts[i]![1]), s.color, 3);
      for (const [x, v] of pts) c.rect(x - 5, sy(v) - 5, 10, 10, s.color);
    }
  });
  c.textUp("tokens/s", 14, top + panelH / 2, AXIS, 2);
  return c.png();
}
