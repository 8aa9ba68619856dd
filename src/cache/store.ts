// The interface every result-cache backend offers (memory, sqlite, redis). Backends may throw or reject on any
// call; ResultCache (cache.ts) turns every failure into "no cache" for that call, so a backend stays simple.

export interface ResultStore {
  /** Backend name for logs: "memory", "sqlite", "redis". */
  readonly kind: string;
  /** One value (or null for a miss) per key, in order. */
  get(keys: readonly string[]): Promise<(Uint8Array | null)[]> | (Uint8Array | null)[];
  set(entries: ReadonlyArray<readonly [string, Uint8Array]>): Promise<void> | void;
  /** Bytes held, where the backend knows them (memory, sqlite); null for shared stores. */
  storedBytes(): number | null;
  /** Called before a call after a failure: a chance to reconnect or reopen. */
  recover?(): Promise<void> | void;
  close(): Promise<void> | void;
}

/** Hooks a backend calls when it evicts entries to stay within its size. */
export interface StoreEvents {
  evicted(count: number): void;
}
