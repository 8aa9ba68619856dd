// Bearer API keys, compared in constant time.
import { createHash, timingSafeEqual } from "node:crypto";
import { Unauthorized } from "../errors";

function digest(s: string): Buffer {
  // Hashing first makes the comparison independent of the keys' lengths.
  return createHash("sha256").update(s).digest();
}

/**
 * Throws Unauthorized unless the header carries one of the keys, as `Bearer <key>` or the bare key (llama-index's
 * async TEI client sends the token without the scheme). Every key is compared, always.
 */
export function checkApiKey(header: string | null, keys: readonly string[]): void {
  const value = header?.trim() ?? "";
  if (!value) throw new Unauthorized("missing API key: send `Authorization: Bearer <key>`");
  const match = /^Bearer\s+(.+)$/i.exec(value);
  const given = digest((match ? match[1]! : value).trim());
  let ok = false;
  for (const key of keys) ok = timingSafeEqual(given, digest(key)) || ok;
  if (!ok) throw new Unauthorized("invalid API key");
}
