// Late-interaction vision retrievers (ColPali, ColModernVBERT): prompts, image tokens and image processor settings
// from config.json, processor_config.json and preprocessor_config.json.
import { ModelLoadError } from "../errors";
import { sane } from "./config-values";

/**
 * ColPali (PaliGemma under a projection): text is read as a query, `<bos>{query_prefix}{query}` + 10 augmentation
 * tokens (the pad token) + "\n"; an image as `image_seq_length` image tokens + `<bos>{visual_prompt_prefix}\n` with its
 * pixel_values. One graph takes input_ids, attention_mask and pixel_values and returns every position's vector.
 */
export interface ColPaliLayout {
  /**
   * paligemma: ColPali, one fixed-size image per document; idefics3: ColModernVBERT, each image split into a grid of
   * tiles plus a global image (media/idefics3.ts), its prompt naming each tile (tasks/colpali.ts).
   */
  kind: "paligemma" | "idefics3";
  queryPrefix: string;
  visualPromptPrefix: string;
  /** Where the prefixes came from (processor_config.json, or transformers' ColPaliProcessor defaults). */
  promptSource: string;
  /** Image tokens per image (per tile for idefics3): the image processor's image_seq_length / image_seq_len. */
  imageSeqLength: number;
  /** The image token's id when config.json names it (image_token_index / image_token_id), else null (`<image>`). */
  imageTokenId: number | null;
  /** The image processor's settings (SiglipImageProcessor): size, resample, rescale, normalise. */
  preprocessor: Record<string, unknown>;
  /** Vision tower input size from config.json (fallback when the image processor omits sizes). */
  imageSize: number | null;
  /** Vector size from config.json's embedding_dim, when given. */
  dim: number | null;
}

/** transformers' ColPaliProcessor defaults, used when the repository has no processor_config.json saying otherwise. */
export const COLPALI_DEFAULTS = { queryPrefix: "Question: ", visualPromptPrefix: "Describe the image." } as const;

/** transformers' ColModernVBertProcessor defaults (fastembed's Qdrant/colmodernvbert pipeline uses the same). */
export const COLMODERNVBERT_DEFAULTS = {
  queryPrefix: "",
  visualPromptPrefix: "<|begin_of_text|>User:<image>Describe the image.<end_of_utterance>\nAssistant:",
} as const;

/** Late-interaction vision retrievers this server does not implement: refused at load by name. */
const UNSUPPORTED_VISION_RETRIEVERS: Record<string, string> = {
  modernvbert: "ModernVBERT without the ColModernVBert retrieval head (no multi-vector projection)",
  idefics3: "Idefics3 (a generative vision-language model, not a retriever)",
  colqwen2: "ColQwen2 (dynamic-resolution image patches)",
  colqwen2_5: "ColQwen2.5 (dynamic-resolution image patches)",
};

/**
 * Whether a model is ColPali, and its settings: transformers' layout (config.json model_type colpali, vlm_config =
 * PaliGemma) or a merged export whose config.json is the PaliGemma one (model_type paligemma). The prefixes and the
 * image processor come from processor_config.json (transformers 5 nests the image processor in it) or
 * preprocessor_config.json; prefixes default to transformers' ColPaliProcessor's. Other late-interaction vision
 * retrievers (ColModernVBERT, ColQwen2) are refused with what they would need.
 */
export function colpaliLayout(
  config: Record<string, unknown>,
  processorConfig: Record<string, unknown> | null,
  preprocessorConfig: Record<string, unknown> | null,
): ColPaliLayout | null {
  const type = String(config.model_type ?? "");
  const arch = Array.isArray(config.architectures) ? String(config.architectures[0] ?? "") : "";
  // ColModernVBERT: transformers' layout (model_type colmodernvbert, vlm_config = ModernVBert) or the original /
  // Qdrant export's flat ModernVBert config naming the ColModernVBert architecture.
  const idefics3 = type === "colmodernvbert" || /^ColModernVBert/.test(arch);
  const unsupported = idefics3 ? undefined : UNSUPPORTED_VISION_RETRIEVERS[type] ?? (/^ColQwen2/.test(arch) ? arch : undefined);
  if (unsupported) {
    throw new ModelLoadError(
      `${arch || type}: ${unsupported} is not supported; of the late-interaction vision retrievers this server serves ColPali (PaliGemma) and ColModernVBERT`,
    );
  }
  if (type !== "colpali" && type !== "paligemma" && !idefics3) return null;
  const vlm = vlmConfig(config);
  const vision = (vlm.vision_config ?? {}) as Record<string, unknown>;
  const text = colpaliTextConfig(config);
  const nested = processorConfig?.image_processor;
  const preprocessor = (nested && typeof nested === "object" ? nested : preprocessorConfig) as Record<string, unknown> | null;
  const what = idefics3 ? "a ColModernVBERT model" : "a ColPali model";
  if (!preprocessor) throw new ModelLoadError(`${what} needs its image processor settings (preprocessor_config.json, or image_processor in processor_config.json)`);
  if (idefics3 && !/^Idefics3ImageProcessor/.test(String(preprocessor.image_processor_type ?? ""))) {
    throw new ModelLoadError(`${what} needs an Idefics3 image processor (image_processor_type Idefics3ImageProcessor), got ${JSON.stringify(preprocessor.image_processor_type ?? null)}`);
  }
  const imageSize = Number.isFinite(Number(vision.image_size)) ? Number(vision.image_size) : null;
  const patch = Number(vision.patch_size);
  // ColModernVBERT: (tile / patch)^2 patches per tile, pixel-shuffled by pixel_shuffle_factor (default 4) per side.
  const shuffle = Number(vlm.pixel_shuffle_factor ?? vlm.scale_factor ?? 4);
  const seq = idefics3
    ? sane(processorConfig?.image_seq_len) ?? (imageSize && patch > 0 && shuffle > 0 ? Math.floor((imageSize / patch) ** 2 / shuffle ** 2) : null)
    : sane(preprocessor.image_seq_length) ?? sane(vision.num_image_tokens) ?? sane(text.num_image_tokens) ??
      (imageSize && patch > 0 ? Math.floor(imageSize / patch) ** 2 : null);
  if (seq === null) throw new ModelLoadError(`${what} needs image_seq_length (image processor) or the vision tower's image_size and patch_size`);
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  const queryPrefix = str(processorConfig?.query_prefix);
  const visualPromptPrefix = str(processorConfig?.visual_prompt_prefix);
  const tokenId = Number(vlm.image_token_index ?? vlm.image_token_id);
  const dim = Number(config.embedding_dim);
  const defaults = idefics3 ? COLMODERNVBERT_DEFAULTS : COLPALI_DEFAULTS;
  return {
    kind: idefics3 ? "idefics3" : "paligemma",
    // ColModernVBertProcessor takes an empty visual_prompt_prefix for absent (`or` its default); ColPali keeps it.
    queryPrefix: queryPrefix ?? defaults.queryPrefix,
    visualPromptPrefix: (idefics3 ? visualPromptPrefix || undefined : visualPromptPrefix) ?? defaults.visualPromptPrefix,
    promptSource: queryPrefix !== undefined && visualPromptPrefix !== undefined ? "processor_config.json" : `transformers' ${idefics3 ? "ColModernVBertProcessor" : "ColPaliProcessor"} defaults`,
    imageSeqLength: seq,
    imageTokenId: Number.isInteger(tokenId) && tokenId >= 0 ? tokenId : null,
    preprocessor,
    imageSize,
    dim: Number.isInteger(dim) && dim > 0 ? dim : null,
  };
}

/** The vision-language config of a retriever: transformers' vlm_config (ColPali, ColModernVBert), else the config itself. */
function vlmConfig(config: Record<string, unknown>): Record<string, unknown> {
  const wrapped = config.model_type === "colpali" || config.model_type === "colmodernvbert";
  return (wrapped ? config.vlm_config ?? config : config) as Record<string, unknown>;
}

/** The text_config of a ColPali (Gemma) or ColModernVBERT (ModernBERT) config.json. */
export function colpaliTextConfig(config: Record<string, unknown>): Record<string, unknown> {
  return (vlmConfig(config).text_config ?? {}) as Record<string, unknown>;
}
