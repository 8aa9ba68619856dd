// One logger for the process: level-filtered, text or JSON lines on stderr.
import type { LogLevel } from "./config";

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

let threshold = ORDER.info;
let json = false;

export function configureLog(level: LogLevel, format: "text" | "json"): void {
  threshold = ORDER[level];
  json = format === "json";
}

/** The level and format in force (an inference worker thread is given them, as its own copy of this module starts at info). */
export function logSettings(): { level: LogLevel; format: "text" | "json" } {
  const level = (Object.keys(ORDER) as LogLevel[]).find((l) => ORDER[l] === threshold) ?? "info";
  return { level, format: json ? "json" : "text" };
}

export function isDebug(): boolean {
  return threshold <= ORDER.debug;
}

function write(level: LogLevel, msg: string, fields?: Record<string, unknown>): void {
  if (ORDER[level] < threshold) return;
  let line: string;
  if (json) {
    line = JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields });
  } else {
    const extra = fields
      ? " " + Object.entries(fields).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`).join(" ")
      : "";
    line = `${new Date().toISOString()} ${level.toUpperCase().padEnd(5)} ${msg}${extra}`;
  }
  process.stderr.write(line + "\n");
}

export const log = {
  debug: (msg: string, fields?: Record<string, unknown>) => write("debug", msg, fields),
  info: (msg: string, fields?: Record<string, unknown>) => write("info", msg, fields),
  warn: (msg: string, fields?: Record<string, unknown>) => write("warn", msg, fields),
  error: (msg: string, fields?: Record<string, unknown>) => write("error", msg, fields),
};
