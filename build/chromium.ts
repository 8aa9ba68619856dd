// Finds and starts a headless Chromium for the playground's browser test and the README screenshot
// (build/playground-screenshot.ts), driven by playwright-core (a devDependency: it downloads no browser; the
// browser is Debian's `chromium` package, which .ci/run installs).
import { accessSync, constants } from "node:fs";
import { chromium, type Browser } from "playwright-core";

/** Environment variables that name the browser binary, checked in this order before PATH. */
export const CHROMIUM_ENV = ["CHROMIUM_PATH", "CHROME_PATH"] as const;
const NAMES = ["chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "chrome"];

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The Chromium binary: $CHROMIUM_PATH or $CHROME_PATH when set (a set path that is not an executable file is an
 * error, not a skip), else the first of chromium, chromium-browser, google-chrome(-stable), chrome on PATH; null
 * when there is none.
 */
export function findChromium(env: Record<string, string | undefined> = process.env): string | null {
  for (const name of CHROMIUM_ENV) {
    const path = env[name];
    if (!path) continue;
    if (!executable(path)) throw new Error(`$${name} is ${path}, which is not an executable file`);
    return path;
  }
  for (const name of NAMES) {
    const path = Bun.which(name, env.PATH ? { PATH: env.PATH } : undefined);
    if (path) return path;
  }
  return null;
}

/**
 * Headless Chromium as root in a container can run it: no sandbox (it needs user namespaces), no GPU, /tmp
 * instead of a small /dev/shm. Host names other than loopback resolve to nothing, so a page that tried to reach
 * another host would fail visibly instead of reaching it.
 */
export function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    headless: true,
    chromiumSandbox: false,
    timeout: 60_000,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"],
  });
}
