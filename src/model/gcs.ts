// A model folder in Google Cloud Storage (gs://bucket/prefix: Vertex AI's AIP_STORAGE_URI, or --model-id), copied
// into the cache before it is read like any local folder. Cloud Storage's JSON API: list the objects under the
// prefix, then download each (alt=media); the token comes from the metadata server (the service account Vertex runs
// the container as). STORAGE_EMULATOR_HOST and GCE_METADATA_HOST point both elsewhere, as Google's own libraries do.
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ModelLoadError } from "../errors";

export interface GcsSettings {
  /** Cloud Storage's JSON API base (STORAGE_EMULATOR_HOST, else https://storage.googleapis.com). */
  endpoint: string;
  /** The metadata server that issues access tokens, or null (an emulator needs none). */
  metadataHost: string | null;
}

export function gcsSettingsFromEnv(env: Record<string, string | undefined>): GcsSettings {
  const emulator = env.STORAGE_EMULATOR_HOST?.trim();
  return {
    endpoint: emulator ? (/^https?:\/\//.test(emulator) ? emulator : `http://${emulator}`).replace(/\/+$/, "") : "https://storage.googleapis.com",
    metadataHost: emulator ? null : env.GCE_METADATA_HOST?.trim() || "metadata.google.internal",
  };
}

/** gs://bucket/some/prefix -> its bucket and prefix (no leading or trailing slash). */
export function parseGcsUri(uri: string): { bucket: string; prefix: string } {
  const m = /^gs:\/\/([a-z0-9][a-z0-9._-]{1,220}[a-z0-9])(?:\/(.*))?$/.exec(uri.trim());
  if (!m) throw new ModelLoadError(`"${uri}" is not a Cloud Storage URI (gs://bucket/folder)`);
  return { bucket: m[1]!, prefix: (m[2] ?? "").replace(/^\/+|\/+$/g, "") };
}

async function token(settings: GcsSettings): Promise<string | null> {
  if (!settings.metadataHost) return null;
  const url = `http://${settings.metadataHost}/computeMetadata/v1/instance/service-accounts/default/token`;
  let res: Response;
  try {
    res = await fetch(url, { headers: { "metadata-flavor": "Google" } });
  } catch (e) {
    throw new ModelLoadError(`no access token for Cloud Storage: the metadata server ${settings.metadataHost} is unreachable (${(e as Error).message}); outside Google Cloud, copy the model into a folder and pass that`);
  }
  if (!res.ok) throw new ModelLoadError(`the metadata server answered ${res.status} for an access token`);
  const body = (await res.json()) as { access_token?: string };
  if (!body.access_token) throw new ModelLoadError("the metadata server's token answer has no access_token");
  return body.access_token;
}

/**
 * Copies gs://bucket/prefix/** into `dest` (once: a complete copy is kept and reused; a partial one is replaced)
 * and returns `dest`.
 */
export async function copyGcsFolder(uri: string, dest: string, settings: GcsSettings): Promise<string> {
  if (existsSync(join(dest, ".complete"))) return dest;
  const { bucket, prefix } = parseGcsUri(uri);
  const auth = await token(settings);
  const headers: Record<string, string> = auth ? { authorization: `Bearer ${auth}` } : {};
  const get = async (url: string): Promise<Response> => {
    let res: Response;
    try {
      res = await fetch(url, { headers });
    } catch (e) {
      throw new ModelLoadError(`cannot reach Cloud Storage at ${settings.endpoint}: ${(e as Error).message}`);
    }
    if (res.status === 401 || res.status === 403) throw new ModelLoadError(`Cloud Storage refused ${uri} (${res.status}): does the service account have storage.objects.get and list?`);
    if (!res.ok) throw new ModelLoadError(`Cloud Storage answered ${res.status} for ${url}`);
    return res;
  };
  const names: string[] = [];
  let page: string | undefined;
  do {
    const q = new URLSearchParams({ prefix: prefix ? `${prefix}/` : "", fields: "items(name),nextPageToken" });
    if (page) q.set("pageToken", page);
    const list = (await (await get(`${settings.endpoint}/storage/v1/b/${bucket}/o?${q}`)).json()) as { items?: { name: string }[]; nextPageToken?: string };
    for (const item of list.items ?? []) if (!item.name.endsWith("/")) names.push(item.name);
    page = list.nextPageToken;
  } while (page);
  if (names.length === 0) throw new ModelLoadError(`${uri} holds no files`);
  const tmp = `${dest}.partial-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  try {
    for (const name of names) {
      const relative = prefix ? name.slice(prefix.length + 1) : name;
      if (relative.split("/").some((part) => part === ".." || part === "")) throw new ModelLoadError(`${uri}: object name ${name} cannot be a file path`);
      const res = await get(`${settings.endpoint}/storage/v1/b/${bucket}/o/${encodeURIComponent(name)}?alt=media`);
      const path = join(tmp, relative);
      mkdirSync(dirname(path), { recursive: true });
      // Streamed to the file: weights can be gigabytes.
      const writer = Bun.file(path).writer();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) writer.write(chunk);
      await writer.end();
    }
    writeFileSync(join(tmp, ".complete"), uri);
    rmSync(dest, { recursive: true, force: true });
    mkdirSync(dirname(dest), { recursive: true });
    renameSync(tmp, dest);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  return dest;
}
