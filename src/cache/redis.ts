// Result cache in Redis (Bun's built-in client), shared by replicas. Its size is Redis's business: run it with
// maxmemory and an allkeys-lru policy. Commands fail fast while disconnected (no offline queue); ResultCache
// calls recover() before trying again after a failure, which reconnects.
import { RedisClient } from "bun";
import type { ResultStore } from "./store";

export class RedisStore implements ResultStore {
  readonly kind = "redis";
  private readonly client: RedisClient;

  constructor(
    private readonly url: string,
    connectTimeoutMs: number,
  ) {
    this.client = new RedisClient(url, {
      connectionTimeout: connectTimeoutMs,
      enableOfflineQueue: false,
      autoReconnect: true,
      maxRetries: 3,
      enableAutoPipelining: true,
    });
  }

  async get(keys: readonly string[]): Promise<(Uint8Array | null)[]> {
    await this.connected();
    // Auto-pipelining sends these as one round trip; getBuffer keeps the bytes (MGET replies as strings).
    return Promise.all(keys.map((k) => this.client.getBuffer(k)));
  }

  async set(entries: ReadonlyArray<readonly [string, Uint8Array]>): Promise<void> {
    await this.connected();
    await Promise.all(entries.map(([k, v]) => this.client.set(k, v)));
  }

  private async connected(): Promise<void> {
    if (!this.client.connected) await this.client.connect();
  }

  recover(): Promise<void> {
    return this.connected();
  }

  storedBytes(): null {
    return null;
  }

  close(): void {
    this.client.close();
  }
}
