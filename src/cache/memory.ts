// In-process result cache: an LRU bounded by bytes (keys + values + a per-entry overhead).
import type { ResultStore, StoreEvents } from "./store";

/** Map entry, key string and bookkeeping beyond the value bytes, estimated. */
const ENTRY_OVERHEAD = 96;

export class MemoryStore implements ResultStore {
  readonly kind = "memory";
  // A Map iterates in insertion order: re-inserting on each hit keeps the least recently used first.
  private readonly entries = new Map<string, Uint8Array>();
  private bytes = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly events: StoreEvents,
  ) {}

  private sizeOf(key: string, value: Uint8Array): number {
    return key.length + value.byteLength + ENTRY_OVERHEAD;
  }

  get(keys: readonly string[]): (Uint8Array | null)[] {
    return keys.map((k) => {
      const v = this.entries.get(k);
      if (v === undefined) return null;
      this.entries.delete(k);
      this.entries.set(k, v);
      return v;
    });
  }

  set(entries: ReadonlyArray<readonly [string, Uint8Array]>): void {
    for (const [k, v] of entries) {
      const size = this.sizeOf(k, v);
      if (size > this.maxBytes) continue;
      const old = this.entries.get(k);
      if (old !== undefined) {
        this.bytes -= this.sizeOf(k, old);
        this.entries.delete(k);
      }
      this.entries.set(k, v);
      this.bytes += size;
    }
    let evicted = 0;
    for (const [k, v] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(k);
      this.bytes -= this.sizeOf(k, v);
      evicted++;
    }
    if (evicted) this.events.evicted(evicted);
  }

  storedBytes(): number {
    return this.bytes;
  }

  get size(): number {
    return this.entries.size;
  }

  close(): void {
    this.entries.clear();
    this.bytes = 0;
  }
}
