// Folders the server writes rewritten ONNX graphs to (logits-graph.ts, split.ts): in the system's temporary folder,
// removed when the model that reads them is released or its load fails, and at process exit whatever happened.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Something written for a model that goes away with it. */
export interface Removable {
  remove(): void;
}

const made = new Set<string>();
let exitHook = false;

/** A new folder in the system's temporary folder; remove() deletes it (the exit hook does otherwise). */
export function scratchFolder(prefix: string): Removable & { dir: string } {
  // TMPDIR may name a folder on a volume that starts empty (the container image points it under /data, the only
  // writable place of a read-only root file system), so it is created when missing.
  const parent = tmpdir();
  mkdirSync(parent, { recursive: true });
  const dir = mkdtempSync(join(parent, prefix));
  made.add(dir);
  if (!exitHook) {
    exitHook = true;
    process.once("exit", () => {
      for (const d of made) rmSync(d, { recursive: true, force: true });
    });
  }
  return {
    dir,
    remove: () => {
      made.delete(dir);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
