// The playground page at GET / (src/server/routes/playground.ts serves this file as it is: no build step, no
// framework, nothing fetched from outside this server). It lists the served models from GET /models and calls
// /embeddings, /rerank and /classify of the same server, with the API key the user enters sent as a Bearer token.
// Everything the user or the server provides is put into the page as text (textContent), never as HTML.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  // "" when the API is at the root, "prefix/" under --url-prefix: relative, so a reverse proxy's sub-path works.
  const apiBase = document.querySelector('meta[name="infinity-api-base"]').content;
  const KEY_STORAGE = "infinity-playground-api-key";
  let apiKey = "";
  try {
    apiKey = sessionStorage.getItem(KEY_STORAGE) || "";
  } catch {
    // Storage can be off (privacy settings): the key then lives only as long as the page.
  }
  $("api-key").value = apiKey;

  class ApiError extends Error {
    constructor(status, message, type = null, code = null, param = null) {
      super(message);
      this.status = status;
      this.type = type;
      this.code = code;
      this.param = param;
    }
  }

  /** One call to this server's API; a non-2xx answer throws the API's own error message. */
  async function api(method, path, body) {
    const headers = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (apiKey) headers.authorization = `Bearer ${apiKey}`;
    let res;
    try {
      res = await fetch(apiBase + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      throw new ApiError(0, `the server did not answer (${e && e.message ? e.message : e})`);
    }
    const text = await res.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    if (!res.ok) {
      const err = json && typeof json === "object" && json.error && typeof json.error === "object" ? json.error : null;
      const message = err && typeof err.message === "string" ? err.message : text.slice(0, 300) || res.statusText || "request failed";
      const error = new ApiError(res.status, message, err ? err.type : null, err ? err.code : null, err ? err.param : null);
      if (res.status === 401) askForKey(error);
      throw error;
    }
    if (json === null) throw new ApiError(res.status, "the server's answer is not JSON");
    return json;
  }

  function askForKey(error) {
    $("api-key").setAttribute("aria-invalid", "true");
    $("key-status").textContent = apiKey
      ? `The server refused this API key (${error.message}). Enter the right key and press "Use key".`
      : `This server needs an API key (${error.message}). Enter it above and press "Use key".`;
  }

  function describeError(e) {
    if (!(e instanceof ApiError)) return String(e && e.message ? e.message : e);
    if (e.status === 0) return e.message;
    const kind = [e.type, e.code].filter((x) => typeof x === "string" && x).join(", ");
    let text = `Error ${e.status}${kind ? ` (${kind})` : ""}: ${e.message}`;
    if (typeof e.param === "string" && e.param) text += ` [field: ${e.param}]`;
    if (e.status === 401) text += "\nEnter the server's API key in the API key box above.";
    return text;
  }

  function showError(id, e) {
    const el = $(id);
    el.textContent = describeError(e);
    el.hidden = false;
  }

  function clearError(id) {
    const el = $(id);
    el.textContent = "";
    el.hidden = true;
  }

  /** Non-empty lines of a text box, trimmed. */
  function lines(el) {
    return el.value.split("\n").map((s) => s.trim()).filter((s) => s.length > 0);
  }

  function el(tag, props = {}, children = []) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) {
      if (k === "text") node.textContent = v;
      else if (k === "className") node.className = v;
      else if (k === "dataset") Object.assign(node.dataset, v);
      else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c);
    return node;
  }

  const short = (s, n = 60) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

  // ---- models ----------------------------------------------------------------------------------------------
  let models = [];

  // Models that answer /embeddings with one dense vector per text: embedders and hybrids (bge-m3: dense unless asked
  // for more). Sparse models answer {indices, values} and multi-vector ones (ColBERT, ColPali) a matrix per text,
  // which a cosine heat-map cannot show; they rank in the Rerank form.
  const dense = (m) => (m.task === "embed" || m.task === "hybrid") && (m.modalities || ["text"]).includes("text");
  // ColPali (multi-vector with an image tower) reranks page images for a text query; this page sends text documents.
  const textDocuments = (m) => !(m.task === "multivector" && (m.modalities || []).includes("image"));
  const PICKERS = [
    { select: "embed-model", form: "embed-form", fits: dense, none: "no served model makes dense text embeddings" },
    { select: "rerank-model", form: "rerank-form", fits: (m) => (m.capabilities || []).includes("rerank") && textDocuments(m), none: "no served model reranks text documents" },
    { select: "classify-model", form: "classify-form", fits: (m) => (m.capabilities || []).includes("classify"), none: "no served model classifies" },
  ];

  function fillPickers() {
    for (const p of PICKERS) {
      const select = $(p.select);
      const previous = select.value;
      const fit = models.filter(p.fits);
      // A reranker first for rerank: the model made for the task before embedders that rerank by similarity.
      if (p.select === "rerank-model") fit.sort((a, b) => (a.task === "rerank" ? 0 : 1) - (b.task === "rerank" ? 0 : 1));
      select.replaceChildren(
        ...(fit.length
          ? fit.map((m) => el("option", { value: m.id, text: m.state === "ready" ? m.id : `${m.id} (${m.state})` }))
          : [el("option", { value: "", text: p.none })]),
      );
      if (fit.some((m) => m.id === previous)) select.value = previous;
      select.disabled = fit.length === 0;
      $(p.form).querySelector('button[type="submit"]').disabled = fit.length === 0;
    }
    // Say which embedding models the heat-map leaves out, and why, instead of hiding them silently.
    const other = models.filter((m) => (m.capabilities || []).includes("embed") && !dense(m));
    $("embed-note").textContent = other.length
      ? `Not in this list (no single dense vector per text): ${other.map((m) => `${m.id} (${m.task})`).join(", ")}. They rank documents in the Rerank form and answer the API.`
      : "";
    $("embed-note").hidden = other.length === 0;
  }

  function details(m) {
    const parts = [];
    if (m.dimensions) parts.push(m.task === "multivector" ? `${m.dimensions} dimensions per token vector` : `${m.dimensions} dimensions`);
    if (m.pooling) parts.push(`${m.pooling} pooling`);
    if (m.labels && m.labels.length) parts.push(`labels: ${m.labels.join(", ")}`);
    if (m.max_length) parts.push(`max ${m.max_length} tokens`);
    if (m.modalities && m.modalities.some((x) => x !== "text")) parts.push(`inputs: ${m.modalities.join(", ")}`);
    if (m.error) parts.push(`error: ${m.error}`);
    return parts.join("; ");
  }

  function renderModels() {
    const rows = models.map((m) =>
      el("tr", { dataset: { model: m.id } }, [
        el("th", { scope: "row", text: m.id }),
        el("td", { text: m.task }),
        el("td", { text: (m.capabilities || []).join(", ") }),
        el("td", {}, [el("span", { className: `state state-${m.state}`, text: m.state })]),
        el("td", { text: details(m) }),
      ]),
    );
    if (!rows.length) rows.push(el("tr", {}, [el("td", { colspan: "5", className: "note", text: "No models are configured." })]));
    $("models-table").tBodies[0].replaceChildren(...rows);
  }

  async function loadModels() {
    const button = $("models-refresh");
    button.disabled = true;
    try {
      const out = await api("GET", "models");
      models = Array.isArray(out.data) ? out.data : [];
      clearError("models-error");
      renderModels();
      fillPickers();
      document.body.dataset.models = "loaded";
      return true;
    } catch (e) {
      showError("models-error", e);
      document.body.dataset.models = "failed";
      return false;
    } finally {
      button.disabled = false;
    }
  }

  // ---- forms -------------------------------------------------------------------------------------------------
  /** Runs one form's request: clears the old answer, marks the form busy, shows the error if any. */
  function onSubmit(formId, errorId, resultId, run) {
    const form = $(formId);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = form.querySelector('button[type="submit"]');
      if (button.disabled) return;
      clearError(errorId);
      for (const invalid of form.querySelectorAll('[aria-invalid="true"]')) invalid.removeAttribute("aria-invalid");
      const result = $(resultId);
      result.replaceChildren();
      button.disabled = true;
      form.setAttribute("aria-busy", "true");
      result.setAttribute("aria-busy", "true");
      try {
        const node = await run();
        if (node) result.replaceChildren(node);
      } catch (e) {
        showError(errorId, e);
      } finally {
        button.disabled = false;
        form.removeAttribute("aria-busy");
        result.removeAttribute("aria-busy");
        // A request may load a model on demand: show the states as they are now.
        if (models.length) void loadModels();
      }
    });
    // Ctrl+Enter (Cmd+Enter) in a text box submits, since Enter makes a new line there.
    for (const area of form.querySelectorAll("textarea")) {
      area.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
          event.preventDefault();
          form.requestSubmit();
        }
      });
    }
  }

  /** A problem with the form's own input, said before anything is sent. */
  function inputProblem(field, message) {
    field.setAttribute("aria-invalid", "true");
    field.focus();
    return new Error(message);
  }

  function numberArrays(list, what) {
    if (!Array.isArray(list) || !list.every((v) => Array.isArray(v) && v.every((x) => typeof x === "number"))) {
      throw new Error(`the server's answer has no ${what}`);
    }
    return list;
  }

  // Cosine similarity from the returned vectors (normalised here, so a model that does not normalise works too).
  function cosineMatrix(vectors) {
    const unit = vectors.map((v) => {
      const norm = Math.hypot(...v) || 1;
      return v.map((x) => x / norm);
    });
    return unit.map((a) => unit.map((b) => a.reduce((s, x, i) => s + x * b[i], 0)));
  }

  // White at 0, red towards 1, blue towards -1.
  function heatColor(value) {
    const v = Math.max(-1, Math.min(1, value));
    const lightness = 100 - 55 * Math.abs(v);
    return v >= 0 ? `hsl(6, 78%, ${lightness}%)` : `hsl(214, 72%, ${lightness}%)`;
  }

  onSubmit("embed-form", "embed-error", "embed-result", async () => {
    const area = $("embed-texts");
    const texts = lines(area);
    if (!texts.length) throw inputProblem(area, "Enter at least one text, one per line.");
    const model = $("embed-model").value;
    const out = await api("POST", "embeddings", { model, input: texts, encoding_format: "float" });
    const data = Array.isArray(out.data) ? out.data.slice().sort((a, b) => a.index - b.index) : [];
    const vectors = numberArrays(data.map((d) => d.embedding), "vectors");
    if (vectors.length !== texts.length) throw new Error(`asked for ${texts.length} vectors, got ${vectors.length}`);
    const sims = cosineMatrix(vectors);
    const head = el("tr", {}, [el("td"), ...texts.map((t, j) => el("th", { scope: "col", title: t, text: String(j + 1) }))]);
    const rows = texts.map((t, i) =>
      el("tr", {}, [
        el("th", { scope: "row", title: t, text: `${i + 1}. ${short(t)}` }),
        ...sims[i].map((v, j) => {
          const cell = el("td", {
            title: `"${short(t, 40)}" vs "${short(texts[j], 40)}": ${v.toFixed(4)}`,
            dataset: { row: String(i), col: String(j), value: String(v) },
            text: v.toFixed(2),
          });
          cell.style.backgroundColor = heatColor(v);
          if (Math.abs(v) > 0.6) cell.style.color = "#fff";
          return cell;
        }),
      ]),
    );
    const table = el("table", { className: "heatmap" }, [
      el("caption", { text: `Cosine similarity of ${out.model || model}'s vectors (${vectors[0].length} dimensions)` }),
      el("thead", {}, [head]),
      el("tbody", {}, rows),
    ]);
    return el("div", {}, [table, el("p", { className: "legend", text: "White: 0; red towards 1 (same meaning); blue towards -1. Hover a cell for the pair." })]);
  });

  onSubmit("rerank-form", "rerank-error", "rerank-result", async () => {
    const queryField = $("rerank-query");
    const docsField = $("rerank-documents");
    const query = queryField.value.trim();
    if (!query) throw inputProblem(queryField, "Enter a query.");
    const documents = lines(docsField);
    if (!documents.length) throw inputProblem(docsField, "Enter at least one document, one per line.");
    const model = $("rerank-model").value;
    const out = await api("POST", "rerank", { model, query, documents, return_documents: false });
    const results = Array.isArray(out.results) ? out.results : [];
    if (results.length !== documents.length) throw new Error(`asked to rank ${documents.length} documents, got ${results.length}`);
    const items = results.map((r) =>
      el("li", { dataset: { index: String(r.index), score: String(r.relevance_score) } }, [
        el("span", { className: "score", text: r.relevance_score.toFixed(4) }),
        (() => {
          const bar = el("span", { className: "bar", "aria-hidden": "true" });
          bar.style.width = `${(Math.max(0, Math.min(1, r.relevance_score)) * 10).toFixed(2)}rem`;
          return bar;
        })(),
        el("span", { text: `${documents[r.index]} (document ${r.index + 1})` }),
      ]),
    );
    return el("div", {}, [
      el("p", { className: "legend", text: `Best first, scored by ${out.model || model} for: "${short(query, 80)}"` }),
      el("ol", { className: "ranking" }, items),
    ]);
  });

  onSubmit("classify-form", "classify-error", "classify-result", async () => {
    const area = $("classify-texts");
    const texts = lines(area);
    if (!texts.length) throw inputProblem(area, "Enter at least one text, one per line.");
    const model = $("classify-model").value;
    const out = await api("POST", "classify", { model, input: texts });
    const data = Array.isArray(out.data) ? out.data : [];
    if (data.length !== texts.length) throw new Error(`asked to classify ${texts.length} texts, got ${data.length}`);
    const rows = texts.map((t, i) => {
      const labels = data[i].slice().sort((a, b) => b.score - a.score);
      const scores = labels.map((l) => {
        const bar = el("span", { className: "bar", "aria-hidden": "true" });
        bar.style.width = `${(Math.max(0, Math.min(1, l.score)) * 6).toFixed(2)}rem`;
        return el("div", { dataset: { label: l.label, score: String(l.score) } }, [
          el("span", { className: "score", text: l.score.toFixed(4) }),
          bar,
          el("span", { text: l.label }),
        ]);
      });
      return el("tr", { dataset: { top: labels[0] ? labels[0].label : "" } }, [
        el("th", { scope: "row", text: t }),
        el("td", { className: "top-label", text: labels[0] ? labels[0].label : "" }),
        el("td", {}, scores),
      ]);
    });
    return el("table", { className: "classification" }, [
      el("caption", { text: `Labels from ${out.model || model}` }),
      el("thead", {}, [el("tr", {}, [el("th", { scope: "col", text: "Text" }), el("th", { scope: "col", text: "Label" }), el("th", { scope: "col", text: "Scores" })])]),
      el("tbody", {}, rows),
    ]);
  });

  // ---- key and start -----------------------------------------------------------------------------------------
  $("key-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    apiKey = $("api-key").value.trim();
    try {
      if (apiKey) sessionStorage.setItem(KEY_STORAGE, apiKey);
      else sessionStorage.removeItem(KEY_STORAGE);
    } catch {
      // See above: without storage the key is kept for this page only.
    }
    $("api-key").removeAttribute("aria-invalid");
    $("key-status").textContent = "Checking the key…";
    if (await loadModels()) $("key-status").textContent = apiKey ? "Key in use: the server accepted it." : "No key is sent.";
  });
  $("models-refresh").addEventListener("click", () => void loadModels());

  fillPickers();
  void loadModels();
})();
