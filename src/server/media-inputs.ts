// Image and audio inputs of a request: data: URIs or http(s) URLs, fetched and decoded into file bytes (in input
// order), with errors naming the field they came from (`input[2]`, `documents[0]`). Used by /embeddings (media
// towers, ColPali images) and by /rerank with ColPali (documents are images).
import { InvalidInput, InvalidMedia } from "../errors";
import { mediaBytes, type SourceSettings } from "../media/source";
import type { ServerContext } from "./context";
import { checkCount } from "./validate";

export async function mediaFiles(input: unknown, modality: "image" | "audio", ctx: ServerContext, signal: AbortSignal, field = "input"): Promise<Uint8Array[]> {
  const list = typeof input === "string" ? [input] : input;
  if (!Array.isArray(list) || list.some((x) => typeof x !== "string")) {
    throw new InvalidInput(`\`${field}\` must be a ${modality} (data: URI or http(s) URL) or a list of them`, field);
  }
  if (list.length === 0) throw new InvalidInput(`\`${field}\` must not be an empty list`, field);
  checkCount(list.length, field, ctx.config);
  const m = ctx.config.media;
  const settings: SourceSettings = { maxBytes: m.maxBytes, allowUrls: m.allowUrls, timeoutMs: m.urlTimeoutSeconds * 1000, publicOnly: m.urlPublicOnly };
  return Promise.all(
    (list as string[]).map((s, i) => {
      const param = typeof input === "string" ? field : `${field}[${i}]`;
      if (s.length === 0) throw new InvalidInput(`\`${param}\` is an empty string`, param);
      return mediaBytes(s, modality, settings, `\`${param}\``, signal).catch((e) => {
        throw e instanceof InvalidMedia && e.param === null ? new InvalidMedia(e.message, param, e.code) : e;
      });
    }),
  );
}
