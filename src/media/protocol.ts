// Messages between the media pool and its workers. Replies are copied, never transferred: Bun 1.4.5 was seen to
// drop a small worker reply that follows transferred ones (see tokenize/pool.ts).
export type MediaModality = "image" | "audio";

export type MediaRequest =
  | { type: "load"; id: number; key: string; modality: MediaModality; preprocessor: Record<string, unknown>; imageSize: number | null; maxPixels: number }
  | { type: "process"; id: number; key: string; bytes: Uint8Array };

export type MediaResponse =
  | { id: number; ok: true; data?: Float32Array; grid?: [number, number] }
  | { id: number; ok: false; error: string; code: string; invalidInput: boolean };
