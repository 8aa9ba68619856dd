// Small measurement helpers shared by the harness and the limit child.
import { readFileSync } from "node:fs";

export function percentiles(xs: readonly number[]): { p50: number; p95: number; p99: number } {
  if (xs.length === 0) return { p50: NaN, p95: NaN, p99: NaN };
  const s = xs.slice().sort((a, b) => a - b);
  // Nearest-rank percentiles.
  const q = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!;
  return { p50: q(0.5), p95: q(0.95), p99: q(0.99) };
}

function statusKb(pid: number, key: string): number {
  try {
    const m = readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`^${key}:\\s+(\\d+) kB`, "m"));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

/** Peak resident set size (VmHWM) of a live process, in MiB. */
export function peakRssMb(pid: number): number {
  return statusKb(pid, "VmHWM") / 1024;
}

export function rssMb(pid: number): number {
  return statusKb(pid, "VmRSS") / 1024;
}

/** Resident memory split by kind (/proc/PID/smaps_rollup), MiB: anonymous (heaps, arenas) and file-backed (code). */
export function residentSplitMb(pid: number): { anon: number; file: number } {
  try {
    const s = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
    const kb = (key: string) => Number(s.match(new RegExp(`^${key}:\\s+(\\d+) kB`, "m"))?.[1] ?? NaN);
    return { anon: kb("Anonymous") / 1024, file: (kb("Rss") - kb("Anonymous")) / 1024 };
  } catch {
    return { anon: NaN, file: NaN };
  }
}

/**
 * A distribution-free 95% confidence interval for the median: the order statistics at ranks n/2 -+ 1.96 sqrt(n)/2
 * (the normal approximation of the binomial count of samples below the median). Needs about 10 samples or more.
 */
export function medianInterval(xs: readonly number[]): { lo: number; hi: number } {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  const n = s.length;
  if (n < 10) return { lo: NaN, hi: NaN };
  const half = 1.96 * Math.sqrt(n) / 2;
  // 1-based ranks, rounded outwards.
  const lo = Math.max(1, Math.floor(n / 2 - half));
  const hi = Math.min(n, Math.ceil(n / 2 + half + 1));
  return { lo: s[lo - 1]!, hi: s[hi - 1]! };
}
