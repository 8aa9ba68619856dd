// GET / : the playground page (list the models, embed texts into a similarity heat-map, rerank, classify), and its
// two files, and /favicon.ico (its icon, an SVG). They are imported as text, so they ship inside the server and the
// compiled binary, and the page asks nothing of any other host (the Content-Security-Policy below holds it to this origin). POST / stays the HF
// Inference route (routes/tei.ts).

import { router, type ServerContext } from "../context";
import { VERSION } from "../../version";
import pageHtmlText from "../playground/index.html" with { type: "text" };
import pageScript from "../playground/playground.js" with { type: "text" };
import pageCss from "../playground/playground.css" with { type: "text" };
import favicon from "../playground/favicon.svg" with { type: "text" };

/** Only this server: scripts, styles and API calls from its own origin, nothing inline but the CSSOM colours. */
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// bun-types declares every *.html import as an HTMLBundle (Bun's HTML imports); with `type: "text"` it is the text.
const pageHtml = pageHtmlText as unknown as string;

const escapeAttr = (s: string) => s.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** The page with the API's base (relative to `/`, so a reverse proxy's sub-path keeps working) and the version. */
export function playgroundHtml(urlPrefix: string): string {
  const apiBase = urlPrefix ? `${urlPrefix.replace(/^\/+/, "")}/` : "";
  return pageHtml.replace("{{API_BASE}}", escapeAttr(apiBase)).replace("{{VERSION}}", escapeAttr(VERSION));
}

export function playgroundRoutes(ctx: ServerContext) {
  const html = playgroundHtml(ctx.config.urlPrefix);
  const file = (body: string, type: string, extra: Record<string, string> = {}) => () =>
    new Response(body, { headers: { "content-type": type, "cache-control": "no-cache", "x-content-type-options": "nosniff", ...extra } });
  return router()
    .get("/", file(html, "text/html; charset=utf-8", { "content-security-policy": CSP }), { detail: { hide: true } })
    .get("/playground/playground.js", file(pageScript, "text/javascript; charset=utf-8"), { detail: { hide: true } })
    .get("/playground/playground.css", file(pageCss, "text/css; charset=utf-8"), { detail: { hide: true } })
    // The playground's icon, also what browsers ask for on /docs (and any page without a <link rel="icon">).
    .get("/favicon.ico", file(favicon, "image/svg+xml"), { detail: { hide: true } });
}
