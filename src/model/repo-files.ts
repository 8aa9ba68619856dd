// Which files of a hub repository a model needs: the ONNX export for a dtype (one file, or a multimodal model's two
// towers), its external weight data, and the metadata read beside it. Pure over file listings, so hub downloads and
// local folders share it.
import type { Dtype } from "../config";
import { ModelLoadError } from "../errors";

/** The hub's conventional ONNX file names per dtype, in preference order. */
export const ONNX_CANDIDATES: Record<Exclude<Dtype, "auto">, string[]> = {
  // vespa_colbert.onnx: fastembed's export of answerdotai/answerai-colbert-small-v1.
  float32: ["onnx/model.onnx", "model.onnx", "vespa_colbert.onnx"],
  float16: ["onnx/model_fp16.onnx", "model_fp16.onnx"],
  int8: [
    "onnx/model_quantized.onnx", "onnx/model_int8.onnx", "onnx/model_qint8_avx512_vnni.onnx", "onnx/model_qint8_avx512.onnx",
    "onnx/model_qint8_avx2.onnx", "onnx/model_quint8_avx2.onnx", "onnx/model_qint8_arm64.onnx", "onnx/model_uint8.onnx",
    "model_quantized.onnx", "model_int8.onnx",
  ],
};
const AUTO_ORDER: Exclude<Dtype, "auto">[] = ["float32", "int8", "float16"];

/** Picks the ONNX file for a dtype from a list of repository paths. Pure, so hub listings and folders share it. */
export function chooseOnnxFile(files: readonly string[], dtype: Dtype, modelId = "the model"): { file: string; dtype: Exclude<Dtype, "auto"> } {
  const have = new Set(files);
  const order = dtype === "auto" ? AUTO_ORDER : [dtype];
  for (const d of order) {
    for (const f of ONNX_CANDIDATES[d]) if (have.has(f)) return { file: f, dtype: d };
  }
  const looked = order.flatMap((d) => ONNX_CANDIDATES[d]);
  const present = files.filter((f) => f.endsWith(".onnx"));
  if (present.length) throw new ModelLoadError(`no ONNX export for dtype ${dtype}: looked for ${looked.join(", ")}; the repository has ${present.join(", ")}`);
  throw new ModelLoadError(noOnnxMessage(files, modelId));
}

/**
 * A repository without any ONNX export: what it has instead, and the command that makes an export this server
 * can serve from a local folder.
 */
export function noOnnxMessage(files: readonly string[], modelId: string): string {
  const weights = files.filter((f) => /\.(safetensors|bin|pt|pth|gguf|h5|msgpack|ckpt|tflite)$/.test(f) && !/(^|\/)(training_args|optimizer|scheduler)\.bin$/.test(f));
  const shown = weights.slice(0, 6).join(", ") + (weights.length > 6 ? ` and ${weights.length - 6} more` : "");
  const dir = `${modelId.split("/").pop() || "model"}-onnx`;
  return (
    `${modelId} has no ONNX export (no .onnx file; ` +
    (weights.length ? `its weights are ${shown})` : `it has ${files.slice(0, 8).join(", ") || "no files"})`) +
    `. Export one with \`optimum-cli export onnx --model ${modelId} ${dir}\` (pip install "optimum[onnxruntime]") ` +
    `and serve the folder: --model-id ./${dir}` +
    (files.some((f) => /^model(\.safetensors|\.safetensors\.index\.json)$/.test(f)) ? `; or let the server build the graph from its safetensors (--graph auto or build)` : "")
  );
}

const TOWER_SUFFIX: Record<Exclude<Dtype, "auto">, string[]> = {
  float32: [""],
  float16: ["_fp16"],
  int8: ["_quantized", "_int8", "_uint8"],
};

/**
 * The ONNX files of a multimodal model for a dtype: the separate tower exports when both are there, else the
 * combined model.onnx. Pure, so hub listings and folders share it.
 */
export function chooseTowerFiles(files: readonly string[], dtype: Dtype, modality: "image" | "audio"): { text: string; media: string; combined: boolean; dtype: Exclude<Dtype, "auto"> } {
  const have = new Set(files);
  const order = dtype === "auto" ? AUTO_ORDER : [dtype];
  const tower = modality === "image" ? "vision" : "audio";
  for (const d of order) {
    for (const sfx of TOWER_SUFFIX[d]) {
      const text = `onnx/text_model${sfx}.onnx`;
      const media = `onnx/${tower}_model${sfx}.onnx`;
      if (have.has(text) && have.has(media)) return { text, media, combined: false, dtype: d };
    }
  }
  try {
    const { file, dtype: d } = chooseOnnxFile(files, dtype);
    return { text: file, media: file, combined: true, dtype: d };
  } catch (e) {
    throw new ModelLoadError(`no ONNX export for this ${modality} model: looked for onnx/text_model.onnx + onnx/${tower}_model.onnx (and dtype variants); ${(e as Error).message}`);
  }
}

/** The ONNX files a repository listing needs for a dtype: both towers of a multimodal export, or the one model file. */
export function onnxFilesFor(files: readonly string[], dtype: Dtype, modelId?: string): string[] {
  const modality = files.some((f) => /^onnx\/vision_model[^/]*\.onnx$/.test(f)) ? "image" : files.some((f) => /^onnx\/audio_model[^/]*\.onnx$/.test(f)) ? "audio" : null;
  if (modality && files.some((f) => /^onnx\/text_model[^/]*\.onnx$/.test(f))) {
    try {
      const t = chooseTowerFiles(files, dtype, modality);
      return t.combined ? [t.text] : [t.text, t.media];
    } catch {
      /* fall through to the single-file rule and its message */
    }
  }
  return [chooseOnnxFile(files, dtype, modelId).file];
}

/** External weight files that belong to an ONNX file (both naming conventions in use on the hub). */
export function externalDataFiles(onnxFile: string, files: readonly string[]): string[] {
  const have = new Set(files);
  return [`${onnxFile}_data`, `${onnxFile}.data`, `${onnxFile}_data_1`].filter((f) => have.has(f));
}

/** The files a model needs besides its weights; missing optional ones are fine. */
export const METADATA_FILES = [
  "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "modules.json",
  "sentence_bert_config.json", "config_sentence_transformers.json", "preprocessor_config.json", "artifact.metadata",
  "processor_config.json", "idf.json", "router_config.json",
] as const;
