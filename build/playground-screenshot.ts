// `bun run screenshot`: writes docs/playground.png, the README's picture of the playground. It starts the server in
// this process on 127.0.0.1 (a free port) with the fixture models, submits the page's three forms in headless
// Chromium (build/chromium.ts) and captures the page. The fixture models have random weights: their numbers show
// the page, not a model's quality. test/server/playground-browser.test.ts runs capturePlayground too.
import { join } from "node:path";
import type { Browser } from "playwright-core";
import sharp from "sharp";
import { findChromium, launchChromium } from "./chromium";

const WAIT = 30_000;

/** Opens the playground at `base`, submits the embed, rerank and classify forms with their sample texts, and returns the page as a PNG. */
export async function capturePlayground(browser: Browser, base: string): Promise<Uint8Array> {
  const context = await browser.newContext({ viewport: { width: 980, height: 800 }, deviceScaleFactor: 1 });
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    const errors: string[] = [];
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`${base}/`);
    await page.waitForSelector("#models-table tbody tr[data-model]");
    for (const [form, result] of [["embed-form", ".heatmap td"], ["rerank-form", ".ranking li"], ["classify-form", ".classification td"]]) {
      await page.click(`#${form} button[type=submit]`);
      await page.waitForSelector(result!);
    }
    if (errors.length) throw new Error(`the page logged errors:\n${errors.join("\n")}`);
    const shot = await page.screenshot({ fullPage: true, type: "png" });
    // A 128-colour palette keeps the committed picture small (the page is flat colours and text).
    return new Uint8Array(await sharp(shot).png({ palette: true, colors: 128, compressionLevel: 9 }).toBuffer());
  } finally {
    await context.close();
  }
}

if (import.meta.main) {
  const { fixture, ROOT, startTestServer } = await import("../test/helpers");
  const out = join(ROOT, "docs", "playground.png");
  const chromiumPath = findChromium();
  if (!chromiumPath) {
    console.error("no Chromium binary found: install Debian's `chromium` package or set CHROMIUM_PATH");
    process.exit(1);
  }
  const server = await startTestServer({
    "model-id": [fixture("bert-mean-norm"), fixture("bert-rerank"), fixture("bert-classify")],
    "served-model-name": ["embedder", "reranker", "classifier"],
  });
  const browser = await launchChromium(chromiumPath);
  try {
    const png = await capturePlayground(browser, server.url);
    await Bun.write(out, png);
    console.log(`wrote ${out} (${png.byteLength} bytes)`);
  } finally {
    await browser.close();
    await server.shutdown();
  }
}
