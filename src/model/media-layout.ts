// Multimodal (text + image or audio) models: the towers' files and preprocessing settings.

export type Modality = "text" | "image" | "audio";

/**
 * The towers of a CLIP/SigLIP (text + image) or CLAP (text + audio) repository: either separate exports
 * (onnx/text_model.onnx + onnx/vision_model.onnx or onnx/audio_model.onnx, each with its projected output) or one
 * combined onnx/model.onnx that takes both towers' inputs.
 */
export interface MediaLayout {
  modality: "image" | "audio";
  /** ONNX file of the text tower; the same file as mediaFile when combined. */
  textFile: string;
  mediaFile: string;
  combined: boolean;
  preprocessor: Record<string, unknown>;
  /** Vision tower input size from config.json (fallback when the preprocessor config omits sizes). */
  imageSize: number | null;
  /**
   * SigLIP: the text tower reads a fixed-length sequence (its processor pads to max_length, 64) and pools the LAST
   * position, so text is padded to this length; null for towers that take any length (CLIP, CLAP).
   */
  textLength: number | null;
}

/** Which media tower a config.json describes: vision_config (CLIP, SigLIP) or audio_config (CLAP). */
export function mediaModalityOf(config: Record<string, unknown>): "image" | "audio" | null {
  if (config.vision_config && typeof config.vision_config === "object") return "image";
  if (config.audio_config && typeof config.audio_config === "object") return "audio";
  return null;
}
