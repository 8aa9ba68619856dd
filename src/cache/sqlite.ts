// Result cache in an SQLite file (bun:sqlite): survives restarts, bounded by bytes with least-recently-used
// eviction. A file that is not a usable database is moved aside and a fresh one is started.
import { Database } from "bun:sqlite";
import { existsSync, renameSync } from "node:fs";
import { log } from "../log";
import type { ResultStore, StoreEvents } from "./store";

/** Row bookkeeping beyond key and value bytes (SQLite page and index overhead), estimated. */
const ROW_OVERHEAD = 48;
/** Eviction frees down to this share of the limit, so it does not run on every insert at the limit. */
const EVICT_TO = 0.9;

export class SqliteStore implements ResultStore {
  readonly kind = "sqlite";
  private db: Database;
  private bytes = 0;
  /** Recency: a counter, so order is exact within a process; starts past the file's highest value. */
  private clock = 0;

  constructor(
    private readonly path: string,
    private readonly maxBytes: number,
    private readonly events: StoreEvents,
  ) {
    try {
      this.db = this.open();
    } catch (e) {
      if (!existsSync(path)) throw e;
      const aside = `${path}.corrupt-${Date.now()}`;
      log.error("result cache file is not a usable SQLite database; moved aside, starting empty", { path, moved_to: aside, error: (e as Error).message });
      renameSync(path, aside);
      for (const suffix of ["-wal", "-shm"]) if (existsSync(path + suffix)) renameSync(path + suffix, aside + suffix);
      this.db = this.open();
    }
  }

  private open(): Database {
    const db = new Database(this.path, { create: true, strict: true });
    try {
      db.run("PRAGMA journal_mode = WAL");
      db.run("PRAGMA synchronous = NORMAL");
      const check = db.query<{ quick_check: string }, []>("PRAGMA quick_check").get();
      if (check && check.quick_check !== "ok") throw new Error(`quick_check: ${check.quick_check}`);
      db.run("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value BLOB NOT NULL, used INTEGER NOT NULL) WITHOUT ROWID");
      db.run("CREATE INDEX IF NOT EXISTS results_used ON results (used)");
      const row = db.query<{ bytes: number | null; used: number | null; n: number }, []>(
        "SELECT SUM(length(key) + length(value)) AS bytes, MAX(used) AS used, COUNT(*) AS n FROM results",
      ).get();
      this.bytes = (row?.bytes ?? 0) + (row?.n ?? 0) * ROW_OVERHEAD;
      this.clock = row?.used ?? 0;
    } catch (e) {
      db.close();
      throw e;
    }
    return db;
  }

  get(keys: readonly string[]): (Uint8Array | null)[] {
    const select = this.db.query<{ value: Uint8Array }, [string]>("SELECT value FROM results WHERE key = ?");
    const touch = this.db.query("UPDATE results SET used = ? WHERE key = ?");
    const out: (Uint8Array | null)[] = new Array(keys.length);
    this.db.transaction(() => {
      keys.forEach((k, i) => {
        const row = select.get(k);
        out[i] = row ? row.value : null;
        if (row) touch.run(++this.clock, k);
      });
    })();
    return out;
  }

  set(entries: ReadonlyArray<readonly [string, Uint8Array]>): void {
    const old = this.db.query<{ size: number }, [string]>("SELECT length(key) + length(value) AS size FROM results WHERE key = ?");
    const put = this.db.query("INSERT OR REPLACE INTO results (key, value, used) VALUES (?, ?, ?)");
    this.db.transaction(() => {
      for (const [k, v] of entries) {
        const prev = old.get(k);
        if (prev) this.bytes -= prev.size + ROW_OVERHEAD;
        put.run(k, v, ++this.clock);
        this.bytes += k.length + v.byteLength + ROW_OVERHEAD;
      }
    })();
    if (this.bytes > this.maxBytes) this.evict();
  }

  private evict(): void {
    const oldest = this.db.query<{ key: string; size: number }, [number]>(
      "SELECT key, length(key) + length(value) AS size FROM results ORDER BY used LIMIT ?",
    );
    const remove = this.db.query("DELETE FROM results WHERE key = ?");
    let evicted = 0;
    this.db.transaction(() => {
      while (this.bytes > this.maxBytes * EVICT_TO) {
        const rows = oldest.all(256);
        if (rows.length === 0) break;
        for (const r of rows) {
          remove.run(r.key);
          this.bytes -= r.size + ROW_OVERHEAD;
          evicted++;
          if (this.bytes <= this.maxBytes * EVICT_TO) break;
        }
      }
    })();
    if (evicted) this.events.evicted(evicted);
  }

  storedBytes(): number {
    return this.bytes;
  }

  close(): void {
    this.db.close();
  }
}
