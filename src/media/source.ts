// Turns an image/audio input string into file bytes: a data: URI (base64) or an http(s) URL, each within
// --max-media-bytes. URLs: the host is resolved first and every address checked (address.ts); the connection
// then goes to a checked address, so a second lookup cannot point it elsewhere (DNS rebinding). Redirects are
// followed by hand, each hop checked the same way.
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { InvalidMedia } from "../errors";
import { addressRefusal, hostRefusal, type AddressPolicy } from "./address";

export interface SourceSettings extends AddressPolicy {
  maxBytes: number;
  allowUrls: boolean;
  timeoutMs: number;
}

const MAX_REDIRECTS = 3;

/** Content types accepted per modality; octet-stream (and none) is accepted and sniffed by the decoder. */
export function contentTypeAccepted(contentType: string | null, modality: "image" | "audio"): boolean {
  const t = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  return t === "" || t === "application/octet-stream" || t.startsWith(`${modality}/`);
}

const tooLarge = (where: string, bytes: number | string, max: number) =>
  new InvalidMedia(`${where}: the file is ${bytes} bytes; at most ${max} are accepted (--max-media-bytes)`, null, "media_too_large");

/** Decodes a data: URI. */
export function decodeDataUri(uri: string, modality: "image" | "audio", maxBytes: number, where: string): Uint8Array {
  const comma = uri.indexOf(",");
  if (comma < 0) throw new InvalidMedia(`${where}: malformed data: URI (no comma before the data)`);
  const meta = uri.slice(5, comma).split(";").map((s) => s.trim());
  const mediaType = meta[0] ?? "";
  if (!contentTypeAccepted(mediaType, modality)) {
    throw new InvalidMedia(`${where}: data: URI of type ${mediaType} given for modality ${modality}; send ${modality}/* (or application/octet-stream)`, null, "unsupported_media_type");
  }
  const payload = uri.slice(comma + 1);
  if (!meta.includes("base64")) {
    throw new InvalidMedia(`${where}: the data: URI must be base64 (data:${mediaType || `${modality}/...`};base64,...)`);
  }
  const clean = payload.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(clean) || clean.length % 4 === 1) throw new InvalidMedia(`${where}: the data: URI's base64 is invalid`);
  const size = Math.floor((clean.length * 3) / 4);
  if (size > maxBytes) throw tooLarge(where, `about ${size}`, maxBytes);
  const bytes = Buffer.from(clean, clean.includes("-") || clean.includes("_") ? "base64url" : "base64");
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The first allowed address of a host, or an error naming why none is. Every resolved address must pass. */
async function checkedAddress(host: string, policy: AddressPolicy, where: string): Promise<string> {
  const bare = host.replace(/^\[|\]$/g, "");
  const refusedHost = hostRefusal(bare);
  if (refusedHost) throw new InvalidMedia(`${where}: refused to fetch from ${refusedHost}`, null, "media_url_refused");
  let addresses: string[];
  if (isIP(bare)) addresses = [bare];
  else {
    try {
      addresses = (await lookup(bare, { all: true, verbatim: true })).map((a) => a.address);
    } catch (e) {
      throw new InvalidMedia(`${where}: cannot resolve host ${bare} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`, null, "media_fetch_failed");
    }
  }
  if (addresses.length === 0) throw new InvalidMedia(`${where}: host ${bare} has no addresses`, null, "media_fetch_failed");
  // All, not some: a host answering both a public and a metadata address must not get a second chance.
  for (const a of addresses) {
    const why = addressRefusal(a, policy);
    if (why) throw new InvalidMedia(`${where}: refused to fetch from ${bare}: ${why}`, null, "media_url_refused");
  }
  return addresses[0]!;
}

/** Reads a response body up to maxBytes. */
async function readCapped(res: Response, maxBytes: number, where: string): Promise<Uint8Array> {
  const declared = Number(res.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(where, declared, maxBytes);
  const reader = res.body?.getReader();
  if (!reader) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      throw tooLarge(where, `more than ${maxBytes}`, maxBytes);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let o = 0;
  for (const c of chunks) { out.set(c, o); o += c.byteLength; }
  return out;
}

export async function fetchMedia(url: string, modality: "image" | "audio", s: SourceSettings, where: string, signal?: AbortSignal): Promise<Uint8Array> {
  if (!s.allowUrls) throw new InvalidMedia(`${where}: fetching URLs is turned off on this server (--no-allow-media-urls); send the file as a data: URI`, null, "media_url_refused");
  const timeout = AbortSignal.timeout(s.timeoutMs);
  const abort = signal ? AbortSignal.any([signal, timeout]) : timeout;
  let current = url;
  try {
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      let u: URL;
      try {
        u = new URL(current);
      } catch {
        throw new InvalidMedia(`${where}: not a valid URL`);
      }
      if (u.protocol !== "http:" && u.protocol !== "https:") throw new InvalidMedia(`${where}: only http(s) URLs and data: URIs are accepted, got ${u.protocol}`);
      if (u.username || u.password) throw new InvalidMedia(`${where}: URLs with credentials are not accepted`);
      const address = await checkedAddress(u.hostname, s, where);
      // Plain http connects to the checked address itself (Host header kept). For https the name must stay in
      // the URL for certificate checks: that connection re-resolves it, a rebinding window documented in the README.
      let target = u.href;
      const headers: Record<string, string> = { accept: `${modality}/*, application/octet-stream;q=0.5` };
      if (u.protocol === "http:") {
        const pinned = new URL(u.href);
        pinned.hostname = address.includes(":") ? `[${address}]` : address;
        target = pinned.href;
        headers.host = u.host;
      }
      const res = await fetch(target, { redirect: "manual", signal: abort, headers });
      if (res.status >= 300 && res.status < 400 && res.headers.get("location")) {
        await res.body?.cancel().catch(() => {});
        current = new URL(res.headers.get("location")!, u).href;
        continue;
      }
      if (!res.ok) {
        await res.body?.cancel().catch(() => {});
        throw new InvalidMedia(`${where}: fetching the URL failed with HTTP ${res.status}`, null, "media_fetch_failed");
      }
      const type = res.headers.get("content-type");
      if (!contentTypeAccepted(type, modality)) {
        await res.body?.cancel().catch(() => {});
        throw new InvalidMedia(`${where}: the URL answered content type ${type}; ${modality}/* (or application/octet-stream) is needed`, null, "unsupported_media_type");
      }
      return await readCapped(res, s.maxBytes, where);
    }
    throw new InvalidMedia(`${where}: more than ${MAX_REDIRECTS} redirects`, null, "media_fetch_failed");
  } catch (e) {
    if (e instanceof InvalidMedia) throw e;
    if (timeout.aborted) throw new InvalidMedia(`${where}: fetching the URL took longer than ${s.timeoutMs / 1000} s (--media-url-timeout)`, null, "media_fetch_failed");
    if (signal?.aborted) throw e;
    throw new InvalidMedia(`${where}: fetching the URL failed: ${(e as Error).message}`, null, "media_fetch_failed");
  }
}

/** One input string -> file bytes. */
export function mediaBytes(input: string, modality: "image" | "audio", s: SourceSettings, where: string, signal?: AbortSignal): Promise<Uint8Array> {
  const head = input.slice(0, 8).toLowerCase();
  if (head.startsWith("data:")) return Promise.resolve().then(() => decodeDataUri(input, modality, s.maxBytes, where));
  if (head.startsWith("http://") || head.startsWith("https://")) return fetchMedia(input, modality, s, where, signal);
  return Promise.reject(new InvalidMedia(`${where}: ${modality} inputs must be data: URIs (data:${modality}/...;base64,...) or http(s) URLs`));
}
