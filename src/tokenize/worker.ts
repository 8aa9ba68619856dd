// Tokenizer worker entry: holds one Encoder per model and encodes batches of texts off the HTTP event loop.
import { Encoder } from "./encode";
import type { WorkerRequest, WorkerResponse } from "./protocol";
import { collect } from "../model/trim";

declare const self: Worker;

const encoders = new Map<string, Encoder>();

async function handle(msg: WorkerRequest): Promise<WorkerResponse> {
  if (msg.type === "load") {
    encoders.set(msg.key, await Encoder.create(msg.tokenizerJson, msg.tokenizerConfig, msg.maxLength));
    return { id: msg.id, ok: true };
  }
  if (msg.type === "unload") {
    // The model was unloaded: its native tokenizer is freed once collected.
    encoders.delete(msg.key);
    Bun.gc(true);
    return { id: msg.id, ok: true };
  }
  const encoder = encoders.get(msg.key);
  if (!encoder) return { id: msg.id, ok: false, error: `tokenizer ${msg.key} is not loaded in this worker` };
  const n = msg.texts.length;
  const parts = await encoder.encodeBatch(msg.texts, msg.pairs, msg.options);
  let total = 0;
  let anyTypes = false;
  for (const e of parts) {
    total += e.ids.length;
    if (e.typeIds) anyTypes = true;
  }
  // One flat buffer per batch, transferred rather than copied.
  const ids = new Int32Array(total);
  const typeIds = anyTypes ? new Int32Array(total) : null;
  const offsets = new Int32Array(n + 1);
  const fullLengths = new Int32Array(n);
  const atLeast = new Uint8Array(n);
  let o = 0;
  for (let i = 0; i < n; i++) {
    const e = parts[i]!;
    fullLengths[i] = e.fullLength ?? e.ids.length;
    if (e.fullLengthAtLeast) atLeast[i] = 1;
    ids.set(e.ids, o);
    if (typeIds && e.typeIds) typeIds.set(e.typeIds, o);
    o += e.ids.length;
    offsets[i + 1] = o;
  }
  return { id: msg.id, ok: true, ids, typeIds, offsets, fullLengths, atLeast };
}

self.onmessage = async (event: MessageEvent<WorkerRequest>) => {
  const msg = event.data;
  try {
    const res = await handle(msg);
    const transfer: ArrayBuffer[] = [];
    if (res.ok && res.ids) {
      transfer.push(res.ids.buffer as ArrayBuffer, res.offsets!.buffer as ArrayBuffer, res.fullLengths!.buffer as ArrayBuffer, res.atLeast!.buffer as ArrayBuffer);
      if (res.typeIds) transfer.push(res.typeIds.buffer as ArrayBuffer);
    }
    self.postMessage(res, transfer);
  } catch (e) {
    self.postMessage({ id: msg.id, ok: false, error: (e as Error).message } satisfies WorkerResponse);
  }
  // After the reply: a batch of long texts leaves the binding's encodings (freed only when their wrappers are
  // collected) and what they took in glibc's per-thread arenas behind (the binding encodes on libuv's pool threads);
  // both are handed back here. A server of the qwen3-embed fixture, given three rounds of four concurrent requests
  // of texts of up to 1,000,000 characters that are tokenized whole, stayed at 768-803 MiB without this and reads
  // 280-414 MiB with it (bench/long-input-memory.ts).
  if (msg.type === "encode" && batchChars(msg) >= COLLECT_AFTER_CHARS) collect();
};

/** Characters in one batch after which the worker collects and trims: below it the arenas' own reuse suffices. */
const COLLECT_AFTER_CHARS = 200_000;

function batchChars(msg: Extract<WorkerRequest, { type: "encode" }>): number {
  let n = 0;
  for (const t of msg.texts) n += t.length;
  for (const t of msg.pairs ?? []) n += t.length;
  return n;
}
