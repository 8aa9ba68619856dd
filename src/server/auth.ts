// Bearer API keys, compared in constant time.
import { createHash, timingSafeEqual } from "node:crypto";
import { Unauthorized } from "../errors";

function digest(s: string): Buffer {
  // Hashing first makes the comparison independent of the keys' lengths.
  return createHash("sha256").update(s).digest();
}

/** Throws Unauthorized unless the header carries one of the keys. Every key is compared, always. */
export function checkApiKey(header: string | null, keys: readonly string[]): void {
  const match = /^Bearer\s+(.+)$/i.exec(header?.trim() ?? "");
  if (!match) throw new Unauthorized("missing API key: send `Authorization: Bearer <key>`");
  const given = digest(match[1]!.trim());
  let ok = false;
  for (const key of keys) ok = timingSafeEqual(given, digest(key)) || ok;
  if (!ok) throw new Unauthorized("invalid API key");
}
