// Shared test helpers: fixture paths, reference files, and an in-process server on a free loopback port.
import { describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Tokenizer } from "tokenizers";
import { buildConfig } from "../src/config";
import { writeSafetensors } from "../src/model/safetensors";
import { gcsSettingsFromEnv } from "../src/model/gcs";
import { configureLog } from "../src/log";
import type { HubSettings } from "../src/model/resolve";
import { startServer, type RunningServer } from "../src/server/serve";
import { Encoder, longestFirst } from "../src/tokenize/encode";

export const ROOT = join(import.meta.dir, "..");
export const FIXTURES = join(ROOT, "test", "fixtures", "models");
export const REFERENCE = join(ROOT, "test", "fixtures", "reference");
export const fixture = (name: string) => join(FIXTURES, name);
export const reference = async (name: string) => Bun.file(join(REFERENCE, `${name}.json`)).json();
/** The published tokenizers beside the checkout (tests that read them skip without it). */
export const SHARED_TOKENIZERS = join(ROOT, "..", "shared", "tokenizers");

/** tokenizer.json text of a name: models/<fixture> or shared/<file> (gzip when .gz), or null when absent. */
export function tokenizerText(name: string): string | null {
  const [where, file] = name.split("/", 2) as [string, string];
  const path = where === "models" ? join(FIXTURES, file, "tokenizer.json") : join(SHARED_TOKENIZERS, file);
  if (!existsSync(path)) return null;
  const raw = readFileSync(path);
  return (path.endsWith(".gz") ? gunzipSync(raw) : raw).toString("utf8");
}

/** bert-mean-norm's tokenizer with another normaliser or more added tokens. */
export function bertVariant(normalizer: unknown, added: Array<{ content: string; normalized: boolean }> = []): string {
  const tj = JSON.parse(tokenizerText("models/bert-mean-norm")!);
  if (normalizer !== undefined) tj.normalizer = normalizer;
  const next = Math.max(...Object.values(tj.model.vocab as Record<string, number>)) + 1;
  for (const [k, t] of added.entries()) {
    tj.added_tokens.push({ id: next + k, content: t.content, single_word: false, lstrip: false, rstrip: false, normalized: t.normalized, special: false });
  }
  return JSON.stringify(tj);
}

/** A text of `pieces` drawn by a seeded generator (the same text for the same seed) until it has `chars` UTF-16 units. */
export function textOfPieces(pieces: readonly string[], seed: number, chars: number): string {
  let state = seed;
  const parts: string[] = [];
  for (let n = 0; n < chars; ) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    const p = pieces[state % pieces.length]!;
    parts.push(p);
    n += p.length;
  }
  return parts.join("");
}

/** The Rust library's own truncation of a text (or pair) encoded whole: ids and type ids, special tokens added. */
export async function libraryTruncated(rust: Tokenizer, maxLength: number, a: string, b: string | null, direction: "right" | "left" = "right") {
  if (b !== null) return libraryPairTruncated(rust, maxLength, a, b, direction);
  rust.setTruncation(maxLength, { strategy: "LongestFirst" as never, direction: direction as never });
  const e = await rust.encode(a, b, { addSpecialTokens: true });
  return { ids: e.getIds(), types: e.getTypeIds() };
}

/**
 * A pair: the library's encoding of the whole pair (special tokens added, no truncation), cut as its longest-first
 * truncation cuts each member (tokenizers/src/utils/truncation.rs, `TruncationStrategy::LongestFirst`, which
 * src/tokenize/encode.ts longestFirst implements: the shorter member keeps its length when the longer one can take
 * the rest, else both get half the budget, the odd token to the longer; the budget is the max length less the pair's
 * special tokens; this reference is checked against the library's own truncation in pairs.test.ts, so a wrong rule
 * fails there). The lengths it compares are what version
 * 0.23 tokenized of each member before truncating: a member over the max length is counted up to the end of the word
 * holding its max-th token (checked against the library on a grid of lengths in pairs.test.ts). Not the library's
 * `encode` with truncation on: that builds every overflowing piece of both members and then every combination of
 * the two (Encoding::merge_with), thousands x thousands of encodings for two long members (a 200,000-character
 * document with a 3,700-character query: 3,282 pieces and +770 MB; one test of such pairs took this process to
 * 21 GB). The kept tokens are the same.
 */
export async function libraryPairTruncated(rust: Tokenizer, maxLength: number, a: string, b: string, direction: "right" | "left" = "right") {
  rust.disableTruncation();
  const e = await rust.encode(a, b, { addSpecialTokens: true });
  const ids = e.getIds();
  const types = e.getTypeIds();
  const sequence = e.getSequenceIds();
  const words = e.getWordIds();
  const member = [0, 1].map((s) => ids.map((_, i) => i).filter((i) => sequence[i] === s));
  const n = member.map((m) => m.length) as [number, number];
  const counted = member.map((m) => {
    if (m.length <= maxLength) return m.length;
    let k = maxLength - 1;
    while (k + 1 < m.length && words[m[k + 1]!] != null && words[m[k + 1]!] === words[m[k]!]) k++;
    return k + 1;
  }) as [number, number];
  const budget = maxLength - (ids.length - n[0] - n[1]);
  // the rule itself is the server's (a member counted up to its max length is over the budget, so the sum is too)
  const rule = longestFirst(counted[0], counted[1], budget);
  const keep = [Math.min(n[0], rule[0]), Math.min(n[1], rule[1])];
  // member s keeps its first keep[s] tokens (right) or its last (left)
  const dropped = new Set<number>();
  for (const s of [0, 1] as const) {
    const m = member[s]!;
    const drop = direction === "right" ? m.slice(keep[s]) : m.slice(0, m.length - keep[s]);
    for (const i of drop) dropped.add(i);
  }
  const kept = ids.map((_, i) => i).filter((i) => !dropped.has(i));
  return { ids: kept.map((i) => ids[i]!), types: kept.map((i) => types[i]!) };
}

/**
 * Each input through an Encoder of `json`, cut on the right and on the left, against the library encoding it whole and
 * truncating it; returns the Encoder (for its counters).
 */
export async function expectLibraryIds(label: string, json: string, maxLength: number, inputs: Record<string, string>): Promise<Encoder> {
  const encoder = await Encoder.create(JSON.parse(json), {}, maxLength);
  const rust = Tokenizer.fromString(json);
  rust.disablePadding();
  for (const direction of ["right", "left"] as const) {
    const got = await encoder.encodeBatch(Object.values(inputs), undefined, { direction });
    for (const [i, [kind, input]] of Object.entries(inputs).entries()) {
      const want = await libraryTruncated(rust, maxLength, input, null, direction);
      expect([label, direction, kind, Array.from(got[i]!.ids)]).toEqual([label, direction, kind, want.ids]);
    }
  }
  return encoder;
}

/**
 * Pairs (firsts[i] with seconds[i]) through an Encoder of `json` against the library's truncation of the whole pair
 * (libraryPairTruncated): ids and type ids.
 */
export async function expectLibraryPairIds(label: string, json: string, maxLength: number, firsts: readonly string[], seconds: readonly string[]): Promise<void> {
  const encoder = await Encoder.create(JSON.parse(json), {}, maxLength);
  const rust = Tokenizer.fromString(json);
  rust.disablePadding();
  const got = await encoder.encodeBatch(seconds, firsts);
  for (let j = 0; j < seconds.length; j++) {
    const want = await libraryTruncated(rust, maxLength, firsts[j]!, seconds[j]!);
    expect([label, j, Array.from(got[j]!.ids), Array.from(got[j]!.typeIds ?? got[j]!.ids.map(() => 0))]).toEqual([label, j, want.ids, want.types]);
  }
}

/**
 * Tests, per tokenizer name, that texts of `inputs(seed)` come out of an Encoder as the library's whole text truncated:
 * single texts at max length 64 and 512, right and left (expectLibraryIds), and as pair members at 128 after a short
 * query and after each other (expectLibraryPairIds).
 */
export function describeLikeLibrary(title: string, names: readonly string[], inputs: (seed: number) => Record<string, string>): void {
  describe(`${title}: ids identical to the library's whole text, truncated`, () => {
    for (const [i, name] of names.entries()) {
      test(name, async () => {
        const json = tokenizerText(name)!;
        for (const maxLength of [64, 512]) await expectLibraryIds(`${name} ${maxLength}`, json, maxLength, inputs(i + maxLength));
      }, 120_000);
    }
  });
  describe(`${title} in pairs`, () => {
    for (const [i, name] of names.entries()) {
      test(name, async () => {
        const long = Object.values(inputs(3 * i + 1));
        // each of the first three long texts before another (the 4th to 6th), where there are that many
        const others = long.slice(3, 6);
        const firsts = [...long.map(() => "what is this?"), ...long.slice(0, others.length)];
        await expectLibraryPairIds(name, tokenizerText(name)!, 128, firsts, [...long, ...others]);
      }, 120_000);
    }
  });
}

configureLog((process.env.TEST_LOG_LEVEL as "debug" | undefined) ?? "error", "text");

let sharedCacheDir: string | null = null;
/** The cache dir test servers use unless told one: empty at first, shared by this process's servers. */
export function testCacheDir(): string {
  if (sharedCacheDir === null) {
    const dir = mkdtempSync(join(tmpdir(), "infinity-test-cache-"));
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
    sharedCacheDir = dir;
  }
  return sharedCacheDir;
}

export const offlineHub: HubSettings = {
  endpoint: "http://127.0.0.1:9",
  token: null,
  offline: true,
  // Empty: nothing is cached for the offline hub; graphs the tests build are written here.
  cacheDir: testCacheDir(),
  progress: () => {},
};

/** Starts a server in this process on 127.0.0.1 and a free port, with flags as the CLI takes them. */
export async function startTestServer(flags: Record<string, string | string[]>, env: Record<string, string> = {}): Promise<RunningServer> {
  const map = new Map<string, string[]>();
  for (const [k, v] of Object.entries(flags)) map.set(k, Array.isArray(v) ? v : [v]);
  if (!map.has("host")) map.set("host", ["127.0.0.1"]);
  if (!map.has("port")) map.set("port", ["0"]);
  if (!map.has("tokenizer-workers")) map.set("tokenizer-workers", ["1"]);
  if (!map.has("num-threads")) map.set("num-threads", ["1"]);
  const config = buildConfig({ flags: map, env, file: null, cpuCount: 2 });
  const server = startServer(config, { ...offlineHub, ...(config.cacheDir ? { cacheDir: config.cacheDir } : {}), gcs: gcsSettingsFromEnv(env) });
  await server.loaded;
  return server;
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: any; headers: Headers }> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  let json: any = null;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: res.status, json, headers: res.headers };
}

export function l2(v: number[]): number[] {
  const n = Math.hypot(...v);
  return v.map((x) => x / Math.max(n, 1e-12));
}

/** Cosine similarity of two vectors (each L2-normalised first). */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const x = l2(Array.from(a));
  const y = l2(Array.from(b));
  return x.reduce((s, v, i) => s + v * y[i]!, 0);
}

/** Bytes of a file under test/fixtures/ (media/landscape.png, ...). */
export const fixtureBytes = (file: string): Promise<Uint8Array<ArrayBuffer>> =>
  Bun.file(join(ROOT, "test", "fixtures", file)).arrayBuffer().then((b) => new Uint8Array(b));

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Multi-vector answers: as many vectors as the reference, each within 1e-4 per value. */
export function expectVectorsClose(got: number[][], want: number[][]): void {
  expect(got.length).toBe(want.length);
  got.forEach((row, i) => expect(maxAbsDiff(row, want[i]!)).toBeLessThanOrEqual(1e-4));
}

/** A 1x1 PNG whose header claims width x height (CRC fixed), as a decompression bomb presents itself. */
export function hugeHeaderPng(width: number, height: number): Uint8Array {
  const png = new Uint8Array(Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC", "base64"));
  const view = new DataView(png.buffer);
  view.setUint32(16, width);
  view.setUint32(20, height);
  view.setUint32(29, Bun.hash.crc32(png.subarray(12, 29)) >>> 0);
  return png;
}

/** Sparse vectors compared as dicts: the largest difference over every id of either side, a missing id weighing 0. */
export function sparseDiff(got: { indices: number[]; values: number[] }, want: { indices: number[]; values: number[] }): number {
  const a = new Map(got.indices.map((i, k) => [i, got.values[k]!]));
  const b = new Map(want.indices.map((i, k) => [i, want.values[k]!]));
  let d = 0;
  for (const i of new Set([...a.keys(), ...b.keys()])) d = Math.max(d, Math.abs((a.get(i) ?? 0) - (b.get(i) ?? 0)));
  return d;
}

/**
 * A copy of a model folder whose model.safetensors is split into `shards` files named by model.safetensors.index.json,
 * as transformers saves large models (tensors in file order, dealt out in runs).
 */
export function shardedCopy(source: string, dest: string, shards: number): void {
  cpSync(source, dest, { recursive: true });
  const bytes = readFileSync(join(dest, "model.safetensors"));
  const length = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + length).toString("utf8")) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  delete (header as Record<string, unknown>).__metadata__;
  const names = Object.keys(header);
  const per = Math.ceil(names.length / shards);
  const weightMap: Record<string, string> = {};
  for (let s = 0; s < shards; s++) {
    const file = `model-${String(s + 1).padStart(5, "0")}-of-${String(shards).padStart(5, "0")}.safetensors`;
    const part: Record<string, { dtype: string; shape: number[]; bytes: Uint8Array }> = {};
    for (const n of names.slice(s * per, (s + 1) * per)) {
      const t = header[n]!;
      part[n] = { dtype: t.dtype, shape: t.shape, bytes: bytes.subarray(8 + length + t.data_offsets[0], 8 + length + t.data_offsets[1]) };
      weightMap[n] = file;
    }
    writeSafetensors(join(dest, file), part);
  }
  rmSync(join(dest, "model.safetensors"));
  writeFileSync(join(dest, "model.safetensors.index.json"), JSON.stringify({ metadata: { total_size: bytes.length }, weight_map: weightMap }));
}
