// CPU time that other processes take, from /proc (Linux): the machine's busy time minus the watched processes' own.
// Warm-up calibration times the model on the machine it will serve on; while other processes take cores, those
// timings say more about them than about the model (on a 2-core machine with one core taken, a 2-thread run waits
// at every operator for its descheduled thread, and the budget calibration kept 264 tokens instead of 528).
import { readFileSync } from "node:fs";

/** USER_HZ: the unit of /proc's CPU times (100 on every Linux architecture Bun runs on). */
export const TICKS_PER_SECOND = 100;

/** Busy jiffies of the whole machine (all CPUs), or null where /proc/stat cannot be read. */
function machineBusy(): number | null {
  try {
    const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3]! + (f[4] ?? 0);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return total - idle;
  } catch {
    return null;
  }
}

/** utime + stime of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat line (after the command name, which may hold spaces). */
export function statJiffies(stat: string): number {
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(f[11]) + Number(f[12]);
}

/** utime + stime of a process, all its threads (0 once it has exited). */
function processJiffies(pid: number): number {
  try {
    return statJiffies(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return 0;
  }
}

/** CPU used by processes other than the watched ones (in cores), between start() and stop(). */
export class OtherLoad {
  private busy0: number | null = null;
  private own0 = 0;
  private t0 = 0;
  constructor(private readonly pids: () => number[] = () => [process.pid]) {}

  start(): void {
    this.busy0 = machineBusy();
    this.own0 = this.pids().reduce((s, p) => s + processJiffies(p), 0);
    this.t0 = performance.now();
  }

  /** Cores the others used since start(); null where /proc cannot tell (not Linux) or when not started. */
  stop(): number | null {
    const busy = machineBusy();
    if (busy === null || this.busy0 === null) return null;
    const own = this.pids().reduce((s, p) => s + processJiffies(p), 0) - this.own0;
    const seconds = (performance.now() - this.t0) / 1000;
    if (!(seconds > 0)) return null;
    return Math.max(0, (busy - this.busy0 - own) / TICKS_PER_SECOND / seconds);
  }
}
