// A model's cache scope: the identity of the weights and every load setting that changes the model's raw output.
import { realpathSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import type { ModelLayout } from "../model/layout";
import type { ResolvedModel } from "../model/resolve";
import { cacheScope } from "./cache";

/**
 * Hub models are named by repository and commit (the snapshot folder), so replicas with their own download caches
 * share entries; local folders by their real path and the ONNX file's size and modification time, so a re-exported
 * model never reads the old model's results.
 */
export function modelCacheScope(modelId: string, resolved: Pick<ResolvedModel, "dir" | "source">, layout: ModelLayout): string {
  let weights: string;
  if (resolved.source === "local") {
    const onnx = statSync(join(resolved.dir, layout.onnxFile));
    weights = `${realpathSync(resolved.dir)}|${onnx.size}|${Math.round(onnx.mtimeMs)}`;
    if (layout.media) {
      const media = statSync(join(resolved.dir, layout.media.mediaFile));
      weights += `|${media.size}|${Math.round(media.mtimeMs)}`;
    }
  } else {
    weights = `${modelId}@${basename(resolved.dir)}`;
  }
  return cacheScope({
    weights,
    onnx_file: layout.onnxFile,
    media_file: layout.media?.mediaFile ?? null,
    dtype: layout.dtype,
    task: layout.task,
    pooling: layout.pooling,
    include_prompt: layout.includePrompt,
    max_length: layout.maxLength,
  });
}
