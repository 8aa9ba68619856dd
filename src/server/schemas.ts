// Request and response schemas (TypeBox through Elysia's `t`): the routes validate with them and /openapi.json
// is generated from them. Unknown extra fields are accepted, as OpenAI and Cohere clients send some.
import { Type } from "@sinclair/typebox";
import { t } from "elysia";

/**
 * TypeBox's own integer. Elysia's `t.Integer` also accepts an integer-formatted string and converts it, so a JSON body
 * with a token id "50" or `top_n: "3"` would pass as a number: bodies are typed strictly instead (Elysia's `t.Number`
 * and `t.Boolean` are TypeBox's already).
 */
const Integer = Type.Integer;

const ModelName = t.Optional(
  t.Union([t.String(), t.Null()], { description: "served model name; optional when one model serves the route", error: "`model` must be a string" }),
);

/** encoding_format values of /embeddings: OpenAI's two, then the compact types and base64 of their bytes. */
export const ENCODING_FORMATS = ["float", "base64", "int8", "uint8", "binary", "ubinary", "base64_int8", "base64_uint8", "base64_binary", "base64_ubinary"] as const;

const Dimensions = (description: string, name: string) =>
  t.Optional(t.Union([Integer(), t.Null()], { description: `${description}; 0 or null: the model's full size`, error: `\`${name}\` must be an integer` }));

const Truncate = t.Optional(
  t.Union([t.Boolean(), t.Null()], { description: "false: an input longer than the model takes is a 413 instead of being cut (default: cut)", error: "`truncate` must be a boolean" }),
);
const TruncationDirection = t.Optional(
  t.Union([t.Literal("right"), t.Literal("left"), t.Literal("Right"), t.Literal("Left")], {
    description: "which end of a long text is cut: right (default) keeps its beginning",
    error: "`truncation_direction` must be \"right\" or \"left\"",
  }),
);

/** Pruning of sparse vectors (SPLADE): on /embeddings with a sparse model and on /embed_sparse. */
const SparseOptions = {
  top_k: t.Optional(Integer({ description: "sparse models: keep only the k largest weights", error: "`top_k` must be an integer" })),
  threshold: t.Optional(t.Number({ description: "sparse models: keep only weights above this value", error: "`threshold` must be a number" })),
};

export const EmbeddingsRequest = t.Object(
  {
    input: t.Union(
      [
        t.String(),
        t.Array(t.String()),
        t.Array(Integer()),
        t.Array(t.Array(Integer())),
      ],
      {
        description:
          "text, list of texts, or token ids (one list or a list of lists): OpenAI's cl100k_base ids, decoded, then tokenized by the model (default), or with --openai-token-ids model ids of the model's own vocabulary, fed as given; with modality image or audio, data: URIs (base64) or http(s) URLs",
        error: "`input` must be a string, an array of strings, or token ids (an array of integers or an array of integer arrays)",
      },
    ),
    model: ModelName,
    encoding_format: t.Optional(
      t.String({
        description:
          "float (default) | base64 (little-endian float32) | int8 | uint8 | binary | ubinary | base64_int8 | base64_uint8 | base64_binary | base64_ubinary (see README: compact types)",
        error: "`encoding_format` must be a string",
      }),
    ),
    dimensions: Dimensions("Matryoshka: keep the first n dimensions, then re-normalise", "dimensions"),
    user: t.Optional(t.Union([t.String(), t.Null()])),
    truncate: Truncate,
    truncation_direction: TruncationDirection,
    modality: t.Optional(t.String({ description: "text (default), image or audio: what `input` holds; image/audio need a multimodal model (CLIP, SigLIP, CLAP)" })),
    prompt_name: t.Optional(t.String({ description: "prompt from the model's config_sentence_transformers.json, e.g. query" })),
    input_type: t.Optional(
      t.String({
        description:
          "query | document (also Cohere's search_query | search_document, classification, clustering): selects the model's prompt for that kind of input; models without one embed the text as it is. Multi-vector (ColBERT) models: query or document (default) encoding",
      }),
    ),
    task: t.Optional(
      t.String({
        description:
          "models with task adapters (Jina v3): retrieval.query | retrieval.passage | separation | classification | text-matching (the model's lora_adaptations). Default: from input_type (query -> retrieval.query, document -> retrieval.passage, classification, clustering -> separation), else text-matching",
        error: "`task` must be a string",
      }),
    ),
    normalize: t.Optional(t.Boolean({ description: "L2-normalise the vectors (default true); false returns them as pooled", error: "`normalize` must be a boolean" })),
    output: t.Optional(
      t.Union([t.String(), t.Array(t.String())], {
        description:
          "hybrid (bge-m3) models: dense (default) | sparse | multi_vector, or a list of them: all from one run, each input's `embedding` then an object {dense, sparse, multi_vector}. Other models accept only their own kind",
        error: "`output` must be a string or an array of strings",
      }),
    ),
    ...SparseOptions,
  },
  { additionalProperties: true },
);

const Usage = t.Object({ prompt_tokens: Integer(), total_tokens: Integer() });

export const EmbeddingsResponse = t.Object({
  object: t.Literal("list"),
  data: t.Array(
    t.Object({
      object: t.Literal("embedding"),
      embedding: t.Union([
        t.Array(t.Number()),
        t.String({ description: "base64 of the vector's bytes (little-endian float32, or the compact type)" }),
        t.Object({ indices: t.Array(Integer()), values: t.Array(t.Number()) }, { description: "sparse models: vocabulary ids (ascending) and their weights" }),
        t.Array(t.Array(t.Number()), { description: "multi-vector models: one vector per token" }),
        t.Object(
          {
            dense: t.Optional(t.Union([t.Array(t.Number()), t.String()])),
            sparse: t.Optional(t.Object({ indices: t.Array(Integer()), values: t.Array(t.Number()) })),
            multi_vector: t.Optional(t.Union([t.Array(t.Array(t.Number())), t.String()])),
          },
          { description: "hybrid (bge-m3) models with a list of outputs: each asked output in its own shape" },
        ),
      ]),
      shape: t.Optional(t.Array(Integer(), { description: "multi-vector answers (ColBERT, bge-m3 multi_vector) with base64: [vectors, dimensions] of the row-major float32 matrix" })),
      index: Integer(),
    }),
  ),
  model: t.String(),
  usage: Usage,
  id: t.String(),
  created: Integer(),
});

export const EmbedSparseRequest = t.Object(
  {
    inputs: t.Union([t.String(), t.Array(t.String())], { error: "`inputs` must be a string or an array of strings" }),
    model: ModelName,
    truncate: t.Optional(t.Boolean({ description: "accepted for TEI compatibility: inputs are always truncated to the model's limit" })),
    prompt_name: t.Optional(t.String({ description: "prompt from the model's config_sentence_transformers.json" })),
    input_type: t.Optional(
      t.String({
        description:
          "query | document (also search_query | search_document): inference-free sparse models encode queries from their static token weights without a model run, documents through the model (default: the model's default route, document for OpenSearch's); other models: picks their prompt",
      }),
    ),
    ...SparseOptions,
  },
  { additionalProperties: true },
);

export const EmbedSparseResponse = t.Array(t.Array(t.Object({ index: Integer(), value: t.Number() })));

const RerankDocument = t.Union([t.String(), t.Object({ text: t.String() }, { additionalProperties: true })], {
  error: "each document must be a string or an object with a `text` string",
});

export const RerankRequest = t.Object(
  {
    query: t.String({ error: "`query` must be a string" }),
    documents: t.Array(RerankDocument, { error: "`documents` must be an array of strings or {text} objects" }),
    model: ModelName,
    top_n: t.Optional(t.Union([Integer(), t.Null()], { error: "`top_n` must be an integer" })),
    top_k: t.Optional(t.Union([Integer(), t.Null()], { description: "Voyage shape: the answer lists `data` instead of `results`", error: "`top_k` must be an integer" })),
    return_documents: t.Optional(t.Union([t.Boolean(), t.Null()], { error: "`return_documents` must be a boolean" })),
    raw_scores: t.Optional(t.Boolean({ error: "`raw_scores` must be a boolean" })),
    truncate: Truncate,
    truncation: t.Optional(t.Boolean({ description: "Voyage's name for `truncate`", error: "`truncation` must be a boolean" })),
    instruction: t.Optional(
      t.String({ description: "LLM rerankers (Qwen3-Reranker): the task instruction in their prompt; default the model card's web-search instruction", error: "`instruction` must be a string" }),
    ),
  },
  { additionalProperties: true },
);

/** TEI's /rerank body: `texts` instead of `documents`. */
export const TeiRerankRequest = t.Object(
  {
    query: t.String({ error: "`query` must be a string" }),
    texts: t.Array(t.String(), { error: "`texts` must be an array of strings" }),
    model: ModelName,
    truncate: Truncate,
    truncation_direction: TruncationDirection,
    raw_scores: t.Optional(t.Boolean({ error: "`raw_scores` must be a boolean" })),
    return_text: t.Optional(t.Boolean({ error: "`return_text` must be a boolean" })),
  },
  { additionalProperties: true },
);

export const TeiRerankResponse = t.Array(t.Object({ index: Integer(), score: t.Number(), text: t.Optional(t.String()) }));

export const VoyageRerankResponse = t.Object({
  object: t.Literal("list"),
  data: t.Array(t.Object({ relevance_score: t.Number(), index: Integer(), document: t.Optional(t.String()) })),
  model: t.String(),
  usage: t.Object({ total_tokens: Integer() }),
});

export const RerankResponse = t.Object({
  object: t.Literal("rerank"),
  results: t.Array(
    t.Object({
      relevance_score: t.Number(),
      index: Integer(),
      document: t.Optional(t.Object({ text: t.String() })),
    }),
  ),
  model: t.String(),
  usage: t.Object(
    { prompt_tokens: Integer(), completion_tokens: Integer(), total_tokens: Integer() },
    { description: "completion_tokens is always 0; it is there because Together-shaped clients (@ai-sdk/togetherai) require it" },
  ),
  id: t.String(),
  created: Integer(),
  meta: t.Object({ billed_units: t.Object({ search_units: Integer() }) }),
});

export const ClassifyRequest = t.Object(
  {
    input: t.Union([t.String(), t.Array(t.String())], { error: "`input` must be a string or an array of strings" }),
    model: ModelName,
    raw_scores: t.Optional(t.Boolean({ error: "`raw_scores` must be a boolean" })),
    truncate: Truncate,
    truncation_direction: TruncationDirection,
  },
  { additionalProperties: true },
);

export const ClassifyResponse = t.Object({
  object: t.Literal("classify"),
  data: t.Array(t.Array(t.Object({ label: t.String(), score: t.Number() }))),
  model: t.String(),
  usage: Usage,
  id: t.String(),
  created: Integer(),
});

export const ModelsResponse = t.Object({
  object: t.Literal("list"),
  data: t.Array(
    t.Object({
      id: t.String(),
      object: t.Literal("model"),
      created: Integer(),
      owned_by: t.String(),
      capabilities: t.Array(t.String()),
      modalities: t.Array(t.String()),
      task: t.String(),
      backend: t.String(),
      model_id: t.String(),
      dtype: t.String(),
      graph: t.Object({
        source: t.Union([t.Literal("export"), t.Literal("build")], { description: "the repository's ONNX export, or a graph built from config.json + safetensors" }),
        reason: t.String(),
        architecture: t.Union([t.String(), t.Null()]),
        cached: t.Union([t.Boolean(), t.Null()]),
      }),
      max_length: Integer(),
      dimensions: t.Union([Integer(), t.Null()]),
      pooling: t.Union([t.String(), t.Null()]),
      labels: t.Array(t.String()),
      batch_size: Integer(),
      max_batch_tokens: Integer(),
      memory_bytes: Integer(),
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

// ---- TEI (text-embeddings-inference) and HF Inference shapes ----

const TeiInputs = t.Union(
  [t.String(), t.Array(t.String()), t.Array(Integer()), t.Array(t.Array(Integer()))],
  {
    description: "text, list of texts, or token ids of the model's own vocabulary (one list or a list of lists)",
    error: "`inputs` must be a string, an array of strings, or token ids of the model's vocabulary (an array of integers or an array of integer arrays)",
  },
);

export const TeiEmbedRequest = t.Object(
  {
    inputs: TeiInputs,
    model: ModelName,
    normalize: t.Optional(t.Union([t.Boolean(), t.Null()], { description: "L2-normalise (default true)", error: "`normalize` must be a boolean" })),
    truncate: Truncate,
    truncation_direction: TruncationDirection,
    prompt_name: t.Optional(t.Union([t.String(), t.Null()], { error: "`prompt_name` must be a string" })),
    input_type: t.Optional(t.String({ description: "query | document | ...: picks the model's prompt for that kind of input" })),
    dimensions: Dimensions("Matryoshka: keep the first n dimensions", "dimensions"),
  },
  { additionalProperties: true },
);

export const TeiEmbedResponse = t.Array(t.Array(t.Number()));

export const TeiEmbedAllRequest = t.Object(
  {
    inputs: TeiInputs,
    model: ModelName,
    truncate: Truncate,
    truncation_direction: TruncationDirection,
    prompt_name: t.Optional(t.Union([t.String(), t.Null()], { error: "`prompt_name` must be a string" })),
    input_type: t.Optional(t.String({ description: "query | document | ...: picks the model's prompt for that kind of input" })),
  },
  { additionalProperties: true },
);

export const TeiEmbedAllResponse = t.Array(t.Array(t.Array(t.Number())), { description: "per input, one vector of the model's hidden size per token" });

const TextOrPair = t.Union([t.String(), t.Array(t.String(), { minItems: 1, maxItems: 2 })]);
export const TeiPredictRequest = t.Object(
  {
    inputs: t.Union([t.String(), t.Array(TextOrPair)], {
      description: "a text, a pair [text, text], or a batch of texts and pairs [[text], [text, text], ...]",
      error: "`inputs` must be a string, a pair of strings, or a list of [string] / [string, string]",
    }),
    model: ModelName,
    truncate: Truncate,
    truncation_direction: TruncationDirection,
    raw_scores: t.Optional(t.Boolean({ error: "`raw_scores` must be a boolean" })),
  },
  { additionalProperties: true },
);

const Prediction = t.Object({ score: t.Number(), label: t.String() });
export const TeiPredictResponse = t.Union([t.Array(Prediction), t.Array(t.Array(Prediction))]);

const SimilarityParameters = t.Object(
  { truncate: Truncate, truncation_direction: TruncationDirection, prompt_name: t.Optional(t.Union([t.String(), t.Null()])) },
  { additionalProperties: true },
);
export const TeiSimilarityRequest = t.Object(
  {
    inputs: t.Object(
      {
        source_sentence: t.String({ error: "`inputs.source_sentence` must be a string" }),
        sentences: t.Array(t.String(), { error: "`inputs.sentences` must be an array of strings" }),
      },
      { error: "`inputs` must be {source_sentence, sentences}" },
    ),
    model: ModelName,
    parameters: t.Optional(t.Union([SimilarityParameters, t.Null()])),
  },
  { additionalProperties: true },
);
export const TeiSimilarityResponse = t.Array(t.Number());

export const TeiTokenizeRequest = t.Object(
  {
    inputs: t.Union([t.String(), t.Array(t.String())], { error: "`inputs` must be a string or an array of strings" }),
    model: ModelName,
    add_special_tokens: t.Optional(t.Boolean({ error: "`add_special_tokens` must be a boolean" })),
    prompt_name: t.Optional(t.Union([t.String(), t.Null()], { error: "`prompt_name` must be a string" })),
  },
  { additionalProperties: true },
);
export const TeiTokenizeResponse = t.Array(
  t.Array(t.Object({ id: Integer(), text: t.String(), special: t.Boolean(), start: t.Union([Integer(), t.Null()]), stop: t.Union([Integer(), t.Null()]) })),
);

export const TeiDecodeRequest = t.Object(
  {
    ids: t.Union([t.Array(Integer()), t.Array(t.Array(Integer()))], { error: "`ids` must be token ids: an array of integers or an array of integer arrays" }),
    model: ModelName,
    skip_special_tokens: t.Optional(t.Boolean({ error: "`skip_special_tokens` must be a boolean" })),
  },
  { additionalProperties: true },
);
export const TeiDecodeResponse = t.Array(t.String());

export const TeiInfoResponse = t.Object({
  model_id: t.String(),
  model_sha: t.Union([t.String(), t.Null()]),
  model_dtype: t.String(),
  served_model_name: t.String(),
  model_type: t.Record(t.String(), t.Unknown()),
  max_concurrent_requests: Integer(),
  max_input_length: Integer(),
  max_batch_tokens: Integer(),
  max_batch_requests: t.Union([Integer(), t.Null()]),
  max_client_batch_size: Integer(),
  auto_truncate: t.Boolean(),
  tokenization_workers: Integer(),
  version: t.String(),
  sha: t.Union([t.String(), t.Null()]),
  docker_label: t.Union([t.String(), t.Null()]),
});

/** HF Inference: {"inputs": ..., "parameters": {...}}, the task decided by the model. */
export const HfInferenceRequest = t.Object(
  {
    inputs: t.Optional(t.Unknown({ description: "embedders: text(s) or {source_sentence, sentences}; classifiers: text(s); rerankers use {query, texts} instead" })),
    parameters: t.Optional(t.Union([t.Record(t.String(), t.Unknown()), t.Null()])),
    model: ModelName,
  },
  { additionalProperties: true },
);

// ---- Cohere v2 embed ----

export const CohereEmbedRequest = t.Object(
  {
    texts: t.Array(t.String(), { error: "`texts` must be an array of strings" }),
    model: ModelName,
    input_type: t.Optional(t.String({ description: "search_query | search_document | classification | clustering: picks the model's prompt" })),
    embedding_types: t.Optional(
      t.Array(t.String(), { description: "float (default) | int8 | uint8 | binary | ubinary | base64", error: "`embedding_types` must be an array of strings" }),
    ),
    truncate: t.Optional(
      t.Union([t.Literal("NONE"), t.Literal("START"), t.Literal("END")], {
        description: "END (default) cuts a long text's end, START its beginning, NONE refuses it with a 413",
        error: "`truncate` must be \"NONE\", \"START\" or \"END\"",
      }),
    ),
    output_dimension: Dimensions("Matryoshka: keep the first n dimensions, then re-normalise", "output_dimension"),
  },
  { additionalProperties: true },
);

export const CohereEmbedResponse = t.Object({
  id: t.String(),
  embeddings: t.Object({
    float: t.Optional(t.Array(t.Array(t.Number()))),
    int8: t.Optional(t.Array(t.Array(Integer()))),
    uint8: t.Optional(t.Array(t.Array(Integer()))),
    binary: t.Optional(t.Array(t.Array(Integer()))),
    ubinary: t.Optional(t.Array(t.Array(Integer()))),
    base64: t.Optional(t.Array(t.String())),
  }),
  texts: t.Array(t.String()),
  meta: t.Object({ api_version: t.Object({ version: t.String() }), billed_units: t.Object({ input_tokens: Integer() }) }),
  response_type: t.Literal("embeddings_by_type"),
});

/** Cohere v1 embed: plain float vectors without embedding_types, v2's by-type object with them. */
export const CohereV1EmbedResponse = t.Union([
  t.Object({
    id: t.String(),
    embeddings: t.Array(t.Array(t.Number())),
    texts: t.Array(t.String()),
    meta: t.Object({ api_version: t.Object({ version: t.String() }), billed_units: t.Object({ input_tokens: Integer() }) }),
    response_type: t.Literal("embeddings_floats"),
  }),
  CohereEmbedResponse,
]);
