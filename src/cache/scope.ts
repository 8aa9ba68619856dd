// A model's cache scope: the identity of the weights and every load setting that changes the model's raw output.
import { existsSync, readdirSync, realpathSync, statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import type { ModelLayout } from "../model/layout";
import type { ResolvedModel } from "../model/resolve";
import { cacheScope } from "./cache";

/**
 * Hub models are named by repository and commit (the snapshot folder), so replicas with their own download caches
 * share entries; local folders by their real path and the size and modification time of every weights file (ONNX
 * graphs, Dense modules), so a re-exported model never reads the old model's results.
 */
export function modelCacheScope(modelId: string, resolved: Pick<ResolvedModel, "dir" | "source">, layout: ModelLayout): string {
  let weights: string;
  if (resolved.source === "local") {
    // Every file weights are read from: the ONNX graphs and the Dense modules' folders.
    const files = [layout.onnxFile, ...(layout.media ? [layout.media.mediaFile] : [])];
    for (const d of layout.dense ?? []) {
      const dir = join(resolved.dir, d.path);
      if (existsSync(dir)) for (const f of readdirSync(dir).sort()) files.push(join(d.path, f));
    }
    weights = realpathSync(resolved.dir);
    for (const f of files) {
      const st = statSync(resolve(resolved.dir, f));
      weights += `|${f}:${st.size}:${Math.round(st.mtimeMs)}`;
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
    padding_side: layout.paddingSide,
    // Modules and templates the server applies around the graph; their weights live in the same repository commit
    // (hub) or folder (local), whose identity is above.
    dense: JSON.stringify(layout.dense ?? []),
    rerank_template: JSON.stringify(layout.rerankTemplate ?? null),
  });
}
