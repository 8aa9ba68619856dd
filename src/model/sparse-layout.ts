// SPLADE and inference-free sparse encoders: their settings from modules.json, a Router's router_config.json or the
// older OpenSearch idf.json.
import type { PoolingMethod } from "../config";
import { ModelLoadError } from "../errors";
import type { StModule } from "./st-modules";

/** The query side of an inference-free sparse encoder: SparseStaticEmbedding's folder and tokenizer. */
export interface SparseQueryLayout {
  path: string;
  /** Its own tokenizer (the model's when the folder has none); queries are tokenized without special tokens. */
  tokenizerJson: unknown;
  tokenizerConfig: Record<string, unknown>;
  /** Content tokens a query keeps (the tokenizer's model_max_length, as transformers truncates). */
  maxLength: number;
  /**
   * The older OpenSearch layout: idf.json's weight per token string (an absent token weighs 0, as in the model
   * card's lookup); null for a Router, whose weights are the query module's model.safetensors `weight`.
   */
  idf?: Record<string, number> | null;
}

/** SPLADE: weight of vocabulary entry v = pool over real tokens of activation(logit[t, v]) (SpladePooling). */
export interface SparseLayout {
  poolingStrategy: "max" | "sum";
  /** relu: log(1 + relu(x)); log1p_relu: log(1 + log(1 + relu(x))) (OpenSearch models). */
  activation: "relu" | "log1p_relu";
  /** Where the settings came from, for the load log. */
  source: string;
  /**
   * Inference-free encoders (a sentence-transformers Router: query -> SparseStaticEmbedding, document -> MLM +
   * SpladePooling): the query module's folder, whose tokenizer and per-token weights (model.safetensors `weight`,
   * e.g. IDF) encode queries without a model run; null for plain SPLADE.
   */
  query: SparseQueryLayout | null;
  /** The encoding an input without input_type gets (the Router's default_route); document for plain SPLADE. */
  defaultKind: "query" | "document";
  /** Documents leave out the tokenizer's special tokens (the older OpenSearch idf.json layout's model card does). */
  dropSpecialTokens?: boolean;
}

/**
 * Whether a model is a SPLADE sparse encoder: a sentence-transformers SparseEncoder (a SpladePooling module in
 * modules.json, its settings in that module's config.json) or a masked-LM export declared sparse with
 * --pooling-method splade (Qdrant/Splade_PP_en_v1 ships only config.json and model.onnx). A masked-LM
 * (*ForMaskedLM) model declared neither way is refused: its logits are not an embedding.
 */
export function sparseLayout(
  modules: readonly StModule[],
  moduleConfig: (path: string) => Record<string, unknown> | null,
  poolingOverride: PoolingMethod,
  architecture: string,
  routerConfig: Record<string, unknown> | null = null,
  idf: Record<string, unknown> | null = null,
): SparseLayout | null {
  if (modules.some((m) => m.kind === "Router")) return routedSparseLayout(modules, moduleConfig, routerConfig);
  const splade = modules.find((m) => m.kind === "SpladePooling");
  if (!splade && idf && architecture.endsWith("ForMaskedLM")) return idfSparseLayout(idf);
  if (!splade && modules.some((m) => m.kind === "SparseStaticEmbedding" || m.kind === "SparseAutoEncoder")) {
    throw new ModelLoadError("this SparseEncoder uses modules other than an MLM transformer + SpladePooling (a CSR SparseAutoEncoder, or a static embedding outside a query/document Router), which this server does not serve");
  }
  if (splade) return { ...spladeSettings(splade.path, moduleConfig), query: null, defaultKind: "document" };
  if (poolingOverride === "splade" && architecture.endsWith("ForSequenceClassification")) {
    throw new ModelLoadError(`--pooling-method splade needs a masked-LM export; ${architecture} is a classifier`);
  }
  if (poolingOverride === "splade") return { poolingStrategy: "max", activation: "relu", source: "--pooling-method splade", query: null, defaultKind: "document" };
  if (architecture.endsWith("ForMaskedLM")) {
    throw new ModelLoadError(
      `${architecture} is a masked language model and declares no sparse pooling (no SpladePooling module in modules.json); ` +
        "its logits are not an embedding. If it is a SPLADE model, serve it with --pooling-method splade",
    );
  }
  return null;
}

/**
 * The older OpenSearch inference-free layout (doc-v1, doc-v2-distill, doc-v2-mini before sentence-transformers 6):
 * a masked-LM export with idf.json (token -> query weight) and no Router. As the model cards' usage code does:
 * queries weigh each distinct token by idf.json with no model run; documents take the max over real tokens of
 * log(1 + relu(logit)) with the tokenizer's special tokens set to 0.
 */
function idfSparseLayout(idf: Record<string, unknown>): SparseLayout {
  const weights: Record<string, number> = {};
  for (const [token, w] of Object.entries(idf)) {
    if (typeof w !== "number" || !Number.isFinite(w)) throw new ModelLoadError(`idf.json must map each token to a number; "${token}" has ${JSON.stringify(w)}`);
    weights[token] = w;
  }
  return {
    poolingStrategy: "max", activation: "relu", source: "idf.json (OpenSearch inference-free layout)",
    query: { path: ".", tokenizerJson: null, tokenizerConfig: {}, maxLength: 0, idf: weights },
    defaultKind: "document", dropSpecialTokens: true,
  };
}

/** A SpladePooling module's settings from its config.json. */
function spladeSettings(path: string, moduleConfig: (path: string) => Record<string, unknown> | null) {
  const cfg = moduleConfig(path) ?? {};
  const strategy = String(cfg.pooling_strategy ?? "max");
  const activation = String(cfg.activation_function ?? "relu");
  if (strategy !== "max" && strategy !== "sum") throw new ModelLoadError(`SpladePooling pooling_strategy "${strategy}" is not supported (max, sum)`);
  if (activation !== "relu" && activation !== "log1p_relu") throw new ModelLoadError(`SpladePooling activation_function "${activation}" is not supported (relu, log1p_relu)`);
  return { poolingStrategy: strategy as "max" | "sum", activation: activation as "relu" | "log1p_relu", source: `${path}/config.json` };
}

/**
 * An inference-free SparseEncoder (OpenSearch doc-v2/v3-distill, sentence-transformers 6): modules.json holds one
 * Router whose router_config.json routes query -> [SparseStaticEmbedding] and document -> [MLMTransformer,
 * SpladePooling]; each module sits in the folder named by its id. Any other routing is refused.
 */
function routedSparseLayout(modules: readonly StModule[], moduleConfig: (path: string) => Record<string, unknown> | null, routerConfig: Record<string, unknown> | null): SparseLayout {
  if (modules.length !== 1) throw new ModelLoadError("a Router must be the only module in modules.json");
  if (!routerConfig) throw new ModelLoadError("modules.json has a Router but there is no router_config.json");
  const types = (routerConfig.types ?? {}) as Record<string, unknown>;
  const structure = (routerConfig.structure ?? {}) as Record<string, unknown>;
  const kind = (id: string) => String(types[id] ?? "").split(".").pop() ?? "";
  const route = (name: string) => (Array.isArray(structure[name]) ? (structure[name] as unknown[]).map(String) : []);
  const routes = Object.keys(structure).sort();
  const query = route("query");
  const document = route("document");
  const shape = `query -> [${query.map(kind).join(", ")}], document -> [${document.map(kind).join(", ")}]`;
  if (
    routes.join(",") !== "document,query" || query.length !== 1 || kind(query[0]!) !== "SparseStaticEmbedding" ||
    document.length !== 2 || !["MLMTransformer", "Transformer"].includes(kind(document[0]!)) || kind(document[1]!) !== "SpladePooling"
  ) {
    throw new ModelLoadError(
      `router_config.json routes ${routes.length ? routes.join(", ") : "nothing"} (${shape}); this server serves a Router of query -> ` +
        "[SparseStaticEmbedding] and document -> [MLMTransformer, SpladePooling] (inference-free sparse encoders) only",
    );
  }
  const params = (routerConfig.parameters ?? {}) as Record<string, unknown>;
  const fallback = params.allow_empty_key === false ? null : Object.keys(structure)[0];
  const defaultRoute = typeof params.default_route === "string" ? params.default_route : fallback;
  return {
    ...spladeSettings(document[1]!, moduleConfig),
    query: { path: query[0]!, tokenizerJson: null, tokenizerConfig: {}, maxLength: 0 },
    defaultKind: defaultRoute === "query" ? "query" : "document",
  };
}
