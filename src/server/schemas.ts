// Request and response schemas (TypeBox through Elysia's `t`): the routes validate with them and /openapi.json
// is generated from them. Unknown extra fields are accepted, as OpenAI and Cohere clients send some.
import { t } from "elysia";

const ModelName = t.Optional(t.String({ description: "served model name; optional when one model is served" }));

/** Pruning of sparse vectors (SPLADE): on /embeddings with a sparse model and on /embed_sparse. */
const SparseOptions = {
  top_k: t.Optional(t.Integer({ description: "sparse models: keep only the k largest weights", error: "`top_k` must be an integer" })),
  threshold: t.Optional(t.Number({ description: "sparse models: keep only weights above this value", error: "`threshold` must be a number" })),
};

export const EmbeddingsRequest = t.Object(
  {
    input: t.Union(
      [
        t.String(),
        t.Array(t.String()),
        t.Array(t.Integer()),
        t.Array(t.Array(t.Integer())),
      ],
      {
        description:
          "text, list of texts, or token ids of the model's own vocabulary (one list or a list of lists); with modality image or audio, data: URIs (base64) or http(s) URLs",
        error: "`input` must be a string, an array of strings, an array of token ids, or an array of token-id arrays",
      },
    ),
    model: ModelName,
    encoding_format: t.Optional(
      t.Union([t.Literal("float"), t.Literal("base64")], { error: "`encoding_format` must be \"float\" or \"base64\"" }),
    ),
    dimensions: t.Optional(t.Integer({ description: "Matryoshka: keep the first n dimensions, then re-normalise", error: "`dimensions` must be an integer" })),
    user: t.Optional(t.String()),
    modality: t.Optional(t.String({ description: "text (default), image or audio: what `input` holds; image/audio need a multimodal model (CLIP, SigLIP, CLAP)" })),
    prompt_name: t.Optional(t.String({ description: "prompt from the model's config_sentence_transformers.json, e.g. query" })),
    input_type: t.Optional(
      t.String({
        description:
          "query | document (also Cohere's search_query | search_document, classification, clustering): selects the model's prompt for that kind of input; models without one embed the text as it is. Multi-vector (ColBERT) models: query or document (default) encoding",
      }),
    ),
    normalize: t.Optional(t.Boolean({ description: "L2-normalise the vectors (default true); false returns them as pooled", error: "`normalize` must be a boolean" })),
    ...SparseOptions,
  },
  { additionalProperties: true },
);

const Usage = t.Object({ prompt_tokens: t.Integer(), total_tokens: t.Integer() });

export const EmbeddingsResponse = t.Object({
  object: t.Literal("list"),
  data: t.Array(
    t.Object({
      object: t.Literal("embedding"),
      embedding: t.Union([
        t.Array(t.Number()),
        t.String({ description: "base64 of little-endian float32" }),
        t.Object({ indices: t.Array(t.Integer()), values: t.Array(t.Number()) }, { description: "sparse models: vocabulary ids (ascending) and their weights" }),
        t.Array(t.Array(t.Number()), { description: "multi-vector models: one vector per token" }),
      ]),
      shape: t.Optional(t.Array(t.Integer(), { description: "multi-vector models with base64: [vectors, dimensions] of the row-major float32 matrix" })),
      index: t.Integer(),
    }),
  ),
  model: t.String(),
  usage: Usage,
  id: t.String(),
  created: t.Integer(),
});

export const EmbedSparseRequest = t.Object(
  {
    inputs: t.Union([t.String(), t.Array(t.String())], { error: "`inputs` must be a string or an array of strings" }),
    model: ModelName,
    truncate: t.Optional(t.Boolean({ description: "accepted for TEI compatibility: inputs are always truncated to the model's limit" })),
    prompt_name: t.Optional(t.String({ description: "prompt from the model's config_sentence_transformers.json" })),
    ...SparseOptions,
  },
  { additionalProperties: true },
);

export const EmbedSparseResponse = t.Array(t.Array(t.Object({ index: t.Integer(), value: t.Number() })));

const RerankDocument = t.Union([t.String(), t.Object({ text: t.String() }, { additionalProperties: true })], {
  error: "each document must be a string or an object with a `text` string",
});

export const RerankRequest = t.Object(
  {
    query: t.String({ error: "`query` must be a string" }),
    documents: t.Array(RerankDocument, { error: "`documents` must be an array of strings or {text} objects" }),
    model: ModelName,
    top_n: t.Optional(t.Integer({ error: "`top_n` must be an integer" })),
    return_documents: t.Optional(t.Boolean({ error: "`return_documents` must be a boolean" })),
    raw_scores: t.Optional(t.Boolean({ error: "`raw_scores` must be a boolean" })),
    instruction: t.Optional(
      t.String({ description: "LLM rerankers (Qwen3-Reranker): the task instruction in their prompt; default the model card's web-search instruction", error: "`instruction` must be a string" }),
    ),
  },
  { additionalProperties: true },
);

export const RerankResponse = t.Object({
  object: t.Literal("rerank"),
  results: t.Array(
    t.Object({
      relevance_score: t.Number(),
      index: t.Integer(),
      document: t.Optional(t.Object({ text: t.String() })),
    }),
  ),
  model: t.String(),
  usage: Usage,
  id: t.String(),
  created: t.Integer(),
  meta: t.Object({ billed_units: t.Object({ search_units: t.Integer() }) }),
});

export const ClassifyRequest = t.Object(
  {
    input: t.Union([t.String(), t.Array(t.String())], { error: "`input` must be a string or an array of strings" }),
    model: ModelName,
    raw_scores: t.Optional(t.Boolean({ error: "`raw_scores` must be a boolean" })),
  },
  { additionalProperties: true },
);

export const ClassifyResponse = t.Object({
  object: t.Literal("classify"),
  data: t.Array(t.Array(t.Object({ label: t.String(), score: t.Number() }))),
  model: t.String(),
  usage: Usage,
  id: t.String(),
  created: t.Integer(),
});

export const ModelsResponse = t.Object({
  object: t.Literal("list"),
  data: t.Array(
    t.Object({
      id: t.String(),
      object: t.Literal("model"),
      created: t.Integer(),
      owned_by: t.String(),
      capabilities: t.Array(t.String()),
      modalities: t.Array(t.String()),
      task: t.String(),
      backend: t.String(),
      model_id: t.String(),
      dtype: t.String(),
      max_length: t.Integer(),
      dimensions: t.Union([t.Integer(), t.Null()]),
      pooling: t.Union([t.String(), t.Null()]),
      labels: t.Array(t.String()),
      batch_size: t.Integer(),
      max_batch_tokens: t.Integer(),
      memory_bytes: t.Integer(),
      state: t.String(),
    }),
  ),
});

export const ErrorResponse = t.Object({
  error: t.Object({
    message: t.String(),
    type: t.String(),
    param: t.Union([t.String(), t.Null()]),
    code: t.Union([t.String(), t.Null()]),
  }),
});
