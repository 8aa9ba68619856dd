// Messages between the tokenizer pool and its workers.
export type WorkerRequest =
  | { type: "load"; id: number; key: string; tokenizerJson: unknown; tokenizerConfig: Record<string, unknown>; maxLength: number }
  | { type: "unload"; id: number; key: string }
  | {
      type: "encode";
      id: number;
      key: string;
      /** Texts to encode; with `pairs`, the second sequence of each pair (documents). */
      texts: string[];
      /** First sequences of pairs (queries), same length as texts. */
      pairs?: string[];
      options?: import("./encode").EncodeOptions;
    };

export type WorkerResponse =
  | { id: number; ok: true; ids?: undefined; typeIds?: undefined; offsets?: undefined; fullLengths?: undefined; atLeast?: undefined }
  /**
   * fullLengths[i]: input i's length before truncation (equal to its length when it was not cut); atLeast[i] 1 when
   * that is a lower bound (Encoded.fullLengthAtLeast).
   */
  | { id: number; ok: true; ids: Int32Array; typeIds: Int32Array | null; offsets: Int32Array; fullLengths: Int32Array; atLeast: Uint8Array }
  | { id: number; ok: false; error: string };
