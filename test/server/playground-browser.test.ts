// The playground page at GET /, driven in a real headless Chromium (Debian's `chromium` package via playwright-core)
// against a real server on 127.0.0.1: the heat-map's cells against cosine similarities of the fixture's reference
// vectors, the rerank order and scores against the reference and the API, classify labels against the reference
// probabilities, empty input, an API error, the API key flow with its 401; no console errors, no page errors, and
// every request the page makes goes to the server's own origin.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { CHROMIUM_ENV, findChromium, launchChromium } from "../../build/chromium";
import { capturePlayground } from "../../build/playground-screenshot";
import sharp from "sharp";
import type { RunningServer } from "../../src/server/serve";
import { cosine, fixture, postJson, reference, startTestServer } from "../helpers";

const chromiumPath = findChromium();
const missing = `no Chromium binary found (looked at $${CHROMIUM_ENV.join(", $")} and chromium, chromium-browser, google-chrome on PATH; install Debian's \`chromium\` package, as .ci/run does)`;
if (!chromiumPath) {
  // CI must run these tests (.ci/run installs chromium): there a missing browser is a failure, not a skip.
  if (process.env.CI) test("Chromium is installed for the playground tests", () => { throw new Error(missing); });
  else console.warn(`SKIP playground browser tests: ${missing}`);
}
const browserTest = chromiumPath ? test : test.skip;

const WAIT = 30_000;

interface Ref {
  embed: { cases: { text: string; embedding: number[] }[] };
  rerank: { cases: { query: string; document: string; score: number }[] };
  classify: { id2label: Record<string, string>; cases: { text: string; probabilities: number[] }[] };
  bgem3: { cases: { text: string; dense: number[] }[]; query: { text: string }; rerank_dense_cosine: number[] };
}
let ref: Ref;
let browser: Browser | undefined;
let open: RunningServer;
let locked: RunningServer;
/** One model of each other kind: hybrid (bge-m3: dense, sparse, multi-vector), sparse, ColBERT, ColPali. */
let mixed: RunningServer;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  const [embed, rerank, classify, bgem3] = await Promise.all([reference("bert-mean-norm"), reference("bert-rerank"), reference("bert-classify"), reference("bge-m3")]);
  ref = { embed, rerank, classify, bgem3 };
  [open, locked, mixed, browser] = await Promise.all([
    startTestServer({
      "model-id": [fixture("bert-mean-norm"), fixture("bert-rerank"), fixture("bert-classify")],
      "served-model-name": ["bge", "reranker", "classifier"],
      "max-inputs-per-request": "8",
      // the page, not the engine, is under test here: no warm-up's timed runs (they compete with Chromium's start)
      "model-warmup": "false",
    }),
    startTestServer({ "model-id": fixture("bert-classify"), "served-model-name": "classifier", "api-key": "s3cret", "model-warmup": "false" }),
    startTestServer({
      "model-id": [fixture("bge-m3-onnx"), fixture("splade"), fixture("colbert-pylate"), fixture("colpali")],
      "served-model-name": ["bge-m3", "splade", "colbert", "colpali"],
      "model-warmup": "false",
    }),
    chromiumPath ? launchChromium(chromiumPath) : Promise.resolve(undefined),
  ]);
}, 120_000);

afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await Promise.all([open?.shutdown(), locked?.shutdown(), mixed?.shutdown()]);
});

interface Watched {
  page: Page;
  /** "METHOD url" of every request the page made. */
  requests: string[];
  /** Requests to any other origin (aborted, so nothing leaves the host even when the page misbehaves). */
  foreign: string[];
  consoleErrors: string[];
  pageErrors: string[];
}

async function openPlayground(base: string): Promise<Watched> {
  const context = await browser!.newContext({ viewport: { width: 1100, height: 900 } });
  contexts.push(context);
  const origin = new URL(base).origin;
  const w: Watched = { page: await context.newPage(), requests: [], foreign: [], consoleErrors: [], pageErrors: [] };
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin) return route.continue();
    w.foreign.push(url);
    return route.abort();
  });
  w.page.setDefaultTimeout(WAIT);
  w.page.on("request", (r) => w.requests.push(`${r.method()} ${r.url()}`));
  w.page.on("console", (m) => {
    if (m.type() === "error") w.consoleErrors.push(m.text());
  });
  w.page.on("pageerror", (e) => w.pageErrors.push(e.message));
  const res = await w.page.goto(`${base}/`, { waitUntil: "load", timeout: WAIT });
  expect(res?.status()).toBe(200);
  return w;
}

/** Every request went to the server's own origin, over http (data: URIs make no request). */
function expectOnlyOwnOrigin(w: Watched, base: string) {
  expect(w.foreign).toEqual([]);
  const origin = new URL(base).origin;
  expect(w.requests.map((r) => new URL(r.split(" ")[1]!).origin).filter((o) => o !== origin)).toEqual([]);
}

const count = (page: Page, selector: string, n: number) =>
  page.waitForFunction(([s, k]) => document.querySelectorAll(s as string).length === k, [selector, n] as const, { timeout: WAIT });

const posts = (w: Watched, path: string) => w.requests.filter((r) => r === `POST ${new URL(path, w.page.url()).href}`).length;

describe("playground in headless Chromium", () => {
  browserTest("models, heat-map, rerank and classify match the references; bad input and API errors are shown; nothing leaves the host", async () => {
    const base = open.url;
    const w = await openPlayground(base);
    const { page } = w;

    // The models table is GET /models, row for row.
    await count(page, "#models-table tbody tr[data-model]", 3);
    const listed = ((await (await fetch(`${base}/models`)).json()) as { data: { id: string; task: string; state: string; capabilities: string[] }[] }).data;
    const rows = await page.$$eval("#models-table tbody tr", (trs) => trs.map((tr) => Array.from(tr.children, (c) => c.textContent)));
    expect(rows).toEqual(listed.map((m) => [m.id, m.task, m.capabilities.join(", "), m.state, expect.any(String)]));
    expect(listed.map((m) => m.state)).toEqual(["ready", "ready", "ready"]);
    const options = (id: string) => page.$$eval(`#${id} option`, (os) => os.map((o) => (o as HTMLOptionElement).value));
    expect(await options("embed-model")).toEqual(["bge"]);
    expect(await page.isHidden("#embed-note")).toBe(true); // every embedding model here makes dense vectors
    expect(await options("rerank-model")).toEqual(["reranker", "bge"]); // the reranker first, then the embedder
    expect(await options("classify-model")).toEqual(["classifier"]);
    // Every form control has a label.
    expect(await page.$$eval("input, select, textarea", (els) => els.filter((e) => !(e as HTMLInputElement).labels?.length).map((e) => e.id))).toEqual([]);

    // Embed: the heat-map's cells are the cosine similarities of the reference vectors.
    const texts = ref.embed.cases.filter((c) => !/\n|^\s|\s$/.test(c.text)).slice(0, 5);
    expect(texts.length).toBe(5);
    await page.fill("#embed-texts", `${texts[0]!.text}\n\n   ${texts.slice(1).map((c) => c.text).join("\n")}  \n`);
    await page.click("#embed-form button[type=submit]");
    await count(page, ".heatmap tbody td", 25);
    const cells = await page.$$eval(".heatmap tbody td", (tds) => tds.map((td) => { const d = (td as HTMLElement).dataset; return { row: d.row, col: d.col, value: d.value, text: td.textContent }; }));
    for (const cell of cells) {
      const expected = cosine(texts[Number(cell.row)]!.embedding, texts[Number(cell.col)]!.embedding);
      expect(Math.abs(Number(cell.value) - expected)).toBeLessThan(1e-4);
      expect(cell.text).toBe(Number(cell.value).toFixed(2));
    }
    expect(await page.$$eval(".heatmap tbody th", (ths) => ths.map((th) => th.getAttribute("title")))).toEqual(texts.map((c) => c.text));

    // Rerank: best first, the reference's scores, and the same order the API gives.
    const query = "what is the capital of France?";
    const withRef = ref.rerank.cases.filter((c) => c.query === query);
    expect(withRef.length).toBe(2);
    const documents = [...withRef.map((c) => c.document), "Berlin is the capital of Germany.", "Bananas are rich in potassium."];
    await page.selectOption("#rerank-model", "reranker");
    await page.fill("#rerank-query", query);
    await page.fill("#rerank-documents", documents.join("\n"));
    await page.click("#rerank-form button[type=submit]");
    await count(page, ".ranking li", documents.length);
    const ranked = await page.$$eval(".ranking li", (lis) => lis.map((li) => ({ index: Number((li as HTMLElement).dataset.index), score: Number((li as HTMLElement).dataset.score) })));
    const api = await postJson(`${base}/rerank`, { model: "reranker", query, documents });
    expect(ranked.map((r) => r.index)).toEqual(api.json.results.map((r: { index: number }) => r.index));
    for (const r of ranked) if (r.index < withRef.length) expect(Math.abs(r.score - withRef[r.index]!.score)).toBeLessThan(1e-4);
    for (let i = 1; i < ranked.length; i++) expect(ranked[i]!.score).toBeLessThanOrEqual(ranked[i - 1]!.score);

    // Classify: the top label and every label's score from the reference probabilities.
    const toClassify = ref.classify.cases.filter((c) => ["hello", "Hi!", "The quick brown fox jumps over the lazy dog."].includes(c.text) || c.text.startsWith("Le renard"));
    expect(toClassify.length).toBe(4);
    await page.fill("#classify-texts", toClassify.map((c) => c.text).join("\n"));
    // Keyboard: Ctrl+Enter in the text box submits the form.
    await page.focus("#classify-texts");
    await page.keyboard.press("Control+Enter");
    await count(page, ".classification tbody tr", toClassify.length);
    const classified = await page.$$eval(".classification tbody tr", (trs) =>
      trs.map((tr) => ({ top: (tr as HTMLElement).dataset.top, labels: Array.from(tr.querySelectorAll("[data-label]"), (d) => [(d as HTMLElement).dataset.label, Number((d as HTMLElement).dataset.score)] as const) })),
    );
    const labels = ref.classify.id2label;
    const tops = new Set<string>();
    classified.forEach((row, i) => {
      const probs = toClassify[i]!.probabilities;
      const best = probs.indexOf(Math.max(...probs));
      expect(row.top).toBe(labels[String(best)]!);
      tops.add(row.top!);
      expect(row.labels.length).toBe(probs.length);
      for (const [label, score] of row.labels) {
        const id = Object.keys(labels).find((k) => labels[k] === label)!;
        expect(Math.abs(score - probs[Number(id)]!)).toBeLessThan(1e-4);
      }
    });
    expect(tops.size).toBe(3); // the four texts cover every label, so a constant answer would fail

    // Nothing went wrong so far, and nothing left the host.
    expect(w.consoleErrors).toEqual([]);
    expect(w.pageErrors).toEqual([]);
    expectOnlyOwnOrigin(w, base);
    for (const path of ["/embeddings", "/rerank", "/classify"]) expect(posts(w, path)).toBe(1);

    // Empty input: said in the page, the field marked, nothing sent.
    await page.fill("#embed-texts", "  \n \n");
    await page.click("#embed-form button[type=submit]");
    await page.waitForSelector("#embed-error:not([hidden])");
    expect(await page.textContent("#embed-error")).toContain("Enter at least one text");
    expect(await page.getAttribute("#embed-texts", "aria-invalid")).toBe("true");
    expect(await page.$$(".heatmap")).toEqual([]);
    await page.fill("#rerank-query", "   ");
    await page.click("#rerank-form button[type=submit]");
    await page.waitForSelector("#rerank-error:not([hidden])");
    expect(await page.textContent("#rerank-error")).toContain("Enter a query");
    await page.fill("#rerank-query", query);
    await page.fill("#rerank-documents", "\n");
    await page.click("#rerank-form button[type=submit]");
    await page.waitForFunction(() => document.querySelector("#rerank-error")?.textContent?.includes("at least one document"), undefined, { timeout: WAIT });
    expect(posts(w, "/embeddings")).toBe(1);
    expect(posts(w, "/rerank")).toBe(1);

    // An API error (9 inputs over --max-inputs-per-request 8) shows the API's own message; the page keeps working.
    const nine = Array.from({ length: 9 }, (_, i) => `text number ${i}`);
    const refused = await postJson(`${base}/embeddings`, { model: "bge", input: nine, encoding_format: "float" });
    expect(refused.status).toBe(413);
    await page.fill("#embed-texts", nine.join("\n"));
    await page.click("#embed-form button[type=submit]");
    await page.waitForSelector("#embed-error:not([hidden])");
    const shown = await page.textContent("#embed-error");
    expect(shown).toStartWith("Error 413");
    expect(shown).toContain(refused.json.error.message);
    await page.fill("#embed-texts", "one\ntwo");
    await page.click("#embed-form button[type=submit]");
    await count(page, ".heatmap tbody td", 4);
    expect(await page.isHidden("#embed-error")).toBe(true);

    // The only console errors are Chromium's own line for the refused request; no script error at any point.
    expect(w.pageErrors).toEqual([]);
    expect(w.consoleErrors.map((m) => /^Failed to load resource: .*status of (\d+)/.exec(m)?.[1] ?? m)).toEqual(["413"]);
    expectOnlyOwnOrigin(w, base);
  }, 120_000);

  browserTest("sparse, hybrid and multi-vector models: listed, the heat-map offers only dense vectors (saying which it leaves out), rerank by each", async () => {
    const base = mixed.url;
    const w = await openPlayground(base);
    const { page } = w;
    await count(page, "#models-table tbody tr[data-model]", 4);
    const listed = ((await (await fetch(`${base}/models`)).json()) as { data: { id: string; task: string; state: string; capabilities: string[] }[] }).data;
    expect(listed.map((m) => [m.id, m.task])).toEqual([["bge-m3", "hybrid"], ["splade", "sparse"], ["colbert", "multivector"], ["colpali", "multivector"]]);
    const rows = await page.$$eval("#models-table tbody tr", (trs) => trs.map((tr) => Array.from(tr.children, (c) => c.textContent)));
    expect(rows).toEqual(listed.map((m) => [m.id, m.task, m.capabilities.join(", "), m.state, expect.any(String)]));
    expect(rows[1]![2]).toBe("embed, embed_sparse, rerank");
    expect(rows[1]![4]).toContain("splade (max, relu) pooling");
    expect(rows[2]![4]).toContain("16 dimensions per token vector");
    expect(rows[3]![4]).toContain("inputs: text, image");

    const options = (id: string) => page.$$eval(`#${id} option`, (os) => os.map((o) => [(o as HTMLOptionElement).value, o.textContent]));
    // bge-m3 answers /embeddings with its dense vector; the others are named with their task, not hidden silently.
    expect(await options("embed-model")).toEqual([["bge-m3", "bge-m3"]]);
    expect(await page.isVisible("#embed-note")).toBe(true);
    expect(await page.textContent("#embed-note")).toContain("splade (sparse), colbert (multivector), colpali (multivector)");
    // ColPali ranks page images, and this page sends text documents.
    expect(await options("rerank-model")).toEqual([["bge-m3", "bge-m3"], ["splade", "splade"], ["colbert", "colbert"]]);
    expect(await options("classify-model")).toEqual([["", "no served model classifies"]]);
    expect(await page.isDisabled("#classify-form button[type=submit]")).toBe(true);

    // The heat-map of bge-m3's dense vectors: cosines of the reference's dense_vecs.
    const cases = ref.bgem3.cases.slice(0, 4);
    await page.fill("#embed-texts", cases.map((c) => c.text).join("\n"));
    await page.click("#embed-form button[type=submit]");
    await count(page, ".heatmap tbody td", 16);
    const cells = await page.$$eval(".heatmap tbody td", (tds) => tds.map((td) => { const d = (td as HTMLElement).dataset; return [Number(d.row), Number(d.col), Number(d.value)] as const; }));
    for (const [r, c, v] of cells) expect(Math.abs(v - cosine(cases[r]!.dense, cases[c]!.dense))).toBeLessThan(1e-4);

    // Rerank by bge-m3's dense cosine (the reference's scores), then by splade's dot product and ColBERT's MaxSim,
    // each the API's order and scores.
    const query = ref.bgem3.query.text;
    const documents = cases.map((c) => c.text);
    for (const model of ["bge-m3", "splade", "colbert"]) {
      await page.selectOption("#rerank-model", model);
      await page.fill("#rerank-query", query);
      await page.fill("#rerank-documents", documents.join("\n"));
      await page.click("#rerank-form button[type=submit]");
      await page.waitForFunction((m) => document.querySelector(".ranking")?.previousElementSibling?.textContent?.includes(`by ${m} `), model, { timeout: WAIT });
      await count(page, ".ranking li", documents.length);
      const ranked = await page.$$eval(".ranking li", (lis) => lis.map((li) => [Number((li as HTMLElement).dataset.index), Number((li as HTMLElement).dataset.score)] as const));
      const api = await postJson(`${base}/rerank`, { model, query, documents });
      expect(api.status).toBe(200);
      expect(ranked.map(([i]) => i)).toEqual(api.json.results.map((r: { index: number }) => r.index));
      for (const [i, score] of ranked) {
        expect(Math.abs(score - api.json.results.find((r: { index: number }) => r.index === i).relevance_score)).toBeLessThan(1e-9);
        if (model === "bge-m3") expect(Math.abs(score - ref.bgem3.rerank_dense_cosine[i]!)).toBeLessThan(1e-4);
      }
    }
    expect(new Set((await page.$$eval(".ranking li", (lis) => lis.map((li) => (li as HTMLElement).dataset.score)))).size).toBeGreaterThan(1);

    expect(w.consoleErrors).toEqual([]);
    expect(w.pageErrors).toEqual([]);
    expectOnlyOwnOrigin(w, base);
  }, 120_000);

  browserTest("with --api-key: the 401 is shown, a wrong key is refused, the right one is sent as Bearer", async () => {
    const base = locked.url;
    const w = await openPlayground(base);
    const { page } = w;
    await page.waitForSelector("#models-error:not([hidden])");
    expect(await page.textContent("#models-error")).toStartWith("Error 401");
    expect(await page.textContent("#models-error")).toContain("missing API key");
    expect(await page.textContent("#key-status")).toContain("needs an API key");
    expect(await page.getAttribute("#api-key", "aria-invalid")).toBe("true");
    expect(await page.isDisabled("#classify-form button[type=submit]")).toBe(true);

    // Enter in the key box submits it.
    await page.fill("#api-key", "wrong");
    await page.press("#api-key", "Enter");
    await page.waitForFunction(() => document.querySelector("#key-status")?.textContent?.includes("refused"), undefined, { timeout: WAIT });
    expect(await page.textContent("#models-error")).toContain("invalid API key");

    await page.fill("#api-key", "s3cret");
    await page.click("#key-form button[type=submit]");
    await count(page, "#models-table tbody tr[data-model]", 1);
    expect(await page.isHidden("#models-error")).toBe(true);
    expect(await page.textContent("#key-status")).toContain("accepted");
    expect(await page.getAttribute("#api-key", "aria-invalid")).toBeNull();

    const sent = new Promise<string | undefined>((resolve) => page.on("request", (r) => r.url().endsWith("/classify") && resolve(r.headers().authorization)));
    await page.fill("#classify-texts", "hello");
    await page.click("#classify-form button[type=submit]");
    await count(page, ".classification tbody tr", 1);
    expect(await sent).toBe("Bearer s3cret");
    const probs = ref.classify.cases.find((c) => c.text === "hello")!.probabilities;
    expect(await page.getAttribute(".classification tbody tr", "data-top")).toBe(ref.classify.id2label[String(probs.indexOf(Math.max(...probs)))]!);

    expect(w.pageErrors).toEqual([]);
    // Chromium's own line for each refused request (page load, wrong key); no script error.
    expect(w.consoleErrors.map((m) => /^Failed to load resource: .*status of (\d+)/.exec(m)?.[1] ?? m)).toEqual(["401", "401"]);
    expectOnlyOwnOrigin(w, base);
  }, 120_000);

  browserTest("`bun run screenshot`'s capture: the whole page with its three answers, under 200 KB", async () => {
    const png = await capturePlayground(browser!, open.url);
    const meta = await sharp(png).metadata();
    expect(meta.format).toBe("png");
    expect(meta.width).toBe(980);
    // Taller than the window: the full page with the heat-map, the ranking and the labels below the forms.
    expect(meta.height!).toBeGreaterThan(1400);
    expect(png.byteLength).toBeLessThan(200_000);
  }, 120_000);
});
