// A pool of tokenizer worker threads. Every worker holds every model's tokenizer; a request's texts are cut into
// chunks spread over the least-busy workers, so one large request does not hold up small ones.
import type { EncodeOptions, Encoded } from "./encode";
import type { WorkerRequest, WorkerResponse } from "./protocol";
import { WorkerPool } from "../workers";

/** Texts per worker message: small enough to spread, large enough that messaging stays cheap. */
const CHUNK = 64;

export class TokenizerPool {
  private readonly workers: WorkerPool<WorkerRequest, WorkerResponse>;
  private readonly loadedKeys = new Set<string>();

  constructor(readonly size: number) {
    this.workers = new WorkerPool(new URL("./worker.ts", import.meta.url), size, "tokenizer");
    this.workers.start();
  }

  /** Loads a model's tokenizer into every worker. */
  async load(key: string, tokenizerJson: unknown, tokenizerConfig: Record<string, unknown>, maxLength: number): Promise<void> {
    const answers = await this.workers.broadcast({ type: "load", id: this.workers.id(), key, tokenizerJson, tokenizerConfig, maxLength });
    for (const a of answers) if (!a.ok) throw new Error(`tokenizer for ${key} failed to load: ${a.error}`);
    this.loadedKeys.add(key);
  }

  /** Drops a model's tokenizer from every worker (the model was unloaded; a later load sends it again). */
  async unload(key: string): Promise<void> {
    this.loadedKeys.delete(key);
    if (this.workers.isClosed) return;
    await this.workers.broadcast({ type: "unload", id: this.workers.id(), key });
  }

  /** Encodes texts (or pairs: firsts[i] with texts[i]); results in input order. */
  async encode(key: string, texts: string[], firsts?: string[], options?: EncodeOptions): Promise<Encoded[]> {
    if (this.workers.isClosed) throw new Error("tokenizer pool is closed");
    // Checked here rather than answered by a worker: under `bun test`, Bun 1.4.5 was seen to drop a worker's
    // small error reply that follows transferred replies, which hung the caller.
    if (!this.loadedKeys.has(key)) throw new Error(`tokenizer ${key} is not loaded`);
    const chunks: Promise<Encoded[]>[] = [];
    for (let start = 0; start < texts.length; start += CHUNK) {
      const end = Math.min(texts.length, start + CHUNK);
      const msg: WorkerRequest = {
        type: "encode",
        id: this.workers.id(),
        key,
        texts: texts.slice(start, end),
        pairs: firsts?.slice(start, end),
        ...(options ? { options } : {}),
      };
      chunks.push(
        this.workers.sendToLeastBusy(msg, end - start).then((r) => {
          if (!r.ok) throw new Error(r.error);
          if (!r.ids) throw new Error("tokenizer worker answered without ids");
          return unpack(r.ids, r.typeIds, r.offsets, r.fullLengths, r.atLeast);
        }),
      );
    }
    return (await Promise.all(chunks)).flat();
  }

  close(): void {
    this.workers.close();
  }
}

function unpack(ids: Int32Array, typeIds: Int32Array | null, offsets: Int32Array, fullLengths: Int32Array, atLeast: Uint8Array): Encoded[] {
  const out: Encoded[] = new Array(offsets.length - 1);
  for (let i = 0; i < out.length; i++) {
    const a = offsets[i]!;
    const b = offsets[i + 1]!;
    out[i] = { ids: ids.subarray(a, b), typeIds: typeIds ? typeIds.subarray(a, b) : null };
    if (fullLengths[i]! > b - a) out[i]!.fullLength = fullLengths[i]!;
    if (fullLengths[i]! > b - a && atLeast[i] === 1) out[i]!.fullLengthAtLeast = true;
  }
  return out;
}
