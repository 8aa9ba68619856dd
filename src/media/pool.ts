// A pool of media worker threads: decoding and preprocessing (resize, mel spectrogram) are CPU work that must
// not hold up the HTTP event loop. Every worker holds every media tower's preprocessor; each input goes to the
// least-busy worker, so one request's inputs are preprocessed in parallel.
import { InvalidMedia } from "../errors";
import type { MediaModality, MediaRequest, MediaResponse } from "./protocol";
import { WorkerPool } from "../workers";

export interface MediaTowerSpec {
  key: string;
  modality: MediaModality;
  preprocessor: Record<string, unknown>;
  imageSize: number | null;
  maxPixels: number;
}

/** An image's tiles ([tiles, 3, tile, tile] float32) and its grid (0 x 0: one tile, not split). */
export interface TiledPixels {
  data: Float32Array;
  rows: number;
  cols: number;
}

export class MediaPool {
  private readonly workers: WorkerPool<MediaRequest, MediaResponse>;
  private readonly loadedKeys = new Set<string>();

  constructor(readonly size: number) {
    // Workers start with the first media model: text-only servers never spawn them.
    this.workers = new WorkerPool(new URL("./media-worker.ts", import.meta.url), size, "media");
  }

  /** Loads a tower's preprocessor into every worker; workers start with the first media model. */
  async load(spec: MediaTowerSpec): Promise<void> {
    const answers = await this.workers.broadcast({ type: "load", id: this.workers.id(), ...spec });
    for (const a of answers) if (!a.ok) throw new Error(`media preprocessor for ${spec.key} failed to load: ${a.error}`);
    this.loadedKeys.add(spec.key);
  }

  /** Preprocesses each input; a bad input fails the whole call with an error naming it (`input[i]`). */
  async process(key: string, inputs: readonly Uint8Array[], param = "input", firstIndex = 0): Promise<Float32Array[]> {
    return (await this.answers(key, inputs, param, firstIndex)).map((r) => r.data!);
  }

  /** Images split into tiles (Idefics3): each one's tiles and its grid of rows x cols (0 x 0: not split). */
  async processTiled(key: string, inputs: readonly Uint8Array[], param = "input", firstIndex = 0): Promise<TiledPixels[]> {
    return (await this.answers(key, inputs, param, firstIndex)).map((r) => {
      if (!r.grid) throw new Error(`media preprocessor ${key} does not split images into tiles`);
      return { data: r.data!, rows: r.grid[0], cols: r.grid[1] };
    });
  }

  /** `firstIndex`: where these inputs start in the request's list (errors name `param[firstIndex + i]`). */
  private async answers(key: string, inputs: readonly Uint8Array[], param: string, firstIndex: number): Promise<Array<Extract<MediaResponse, { ok: true }>>> {
    if (this.workers.isClosed) throw new Error("media pool is closed");
    if (!this.loadedKeys.has(key)) throw new Error(`media preprocessor ${key} is not loaded`);
    const one = inputs.length === 1 && firstIndex === 0;
    return Promise.all(
      inputs.map(async (bytes, i) => {
        const r = await this.workers.sendToLeastBusy({ type: "process", id: this.workers.id(), key, bytes }, 1);
        const where = one && param === "input" ? "`input`" : `\`${param}[${firstIndex + i}]\``;
        if (!r.ok) {
          if (r.invalidInput) throw new InvalidMedia(`${where}: ${r.error}`, one ? param : `${param}[${firstIndex + i}]`, r.code);
          throw new Error(r.error);
        }
        return r;
      }),
    );
  }

  close(): void {
    this.workers.close();
  }
}
