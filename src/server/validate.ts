// Request checks that schemas cannot express (counts, lengths, emptiness), in one place for every route.
import { InvalidInput, PayloadTooLarge } from "../errors";
import type { ServerConfig } from "../config";

/** A list of texts from a string-or-array field, checked against the server's limits. */
export function checkTexts(value: string | string[], field: string, cfg: ServerConfig): string[] {
  const texts = typeof value === "string" ? [value] : value;
  if (texts.length === 0) throw new InvalidInput(`\`${field}\` must not be an empty list`, field);
  checkCount(texts.length, field, cfg);
  texts.forEach((text, i) => checkText(text, typeof value === "string" ? field : `${field}[${i}]`, cfg));
  return texts;
}

export function checkCount(n: number, field: string, cfg: ServerConfig): void {
  if (n > cfg.maxInputsPerRequest) {
    throw new PayloadTooLarge(`\`${field}\` has ${n} items; at most ${cfg.maxInputsPerRequest} are accepted per request (--max-inputs-per-request)`, field);
  }
}

export function checkText(text: string, field: string, cfg: ServerConfig): void {
  if (text.length === 0) throw new InvalidInput(`\`${field}\` is an empty string`, field);
  if (text.length > cfg.maxInputChars) {
    throw new PayloadTooLarge(`\`${field}\` has ${text.length} characters; at most ${cfg.maxInputChars} are accepted (--max-input-chars)`, field);
  }
}
