// Extraction of the onnxruntime native libraries embedded in the compiled binary. A compiled Bun executable cannot
// dlopen a library from its in-memory file system, and the addon finds libonnxruntime next to itself (RUNPATH
// $ORIGIN / @loader_path), so both are written once to a folder named by their content hash and loaded from there.
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";

export interface EmbeddedLibrary {
  /**
   * Path the library must carry on disk, relative to the extraction folder: a file name (what the addon's NEEDED
   * entry or @rpath asks for), or a relative path where the addon's RUNPATH expects it (sharp's libvips).
   */
  name: string;
  /** Where the bytes are readable now: a /$bunfs/ path inside the binary, or a plain path in tests. */
  source: string;
  size: number;
}

export interface NativeBundle {
  /** Content hash of all libraries together, computed at build time. */
  hash: string;
  /** Name (relative path) of the Node-API addon among `files`. */
  addon: string;
  files: EmbeddedLibrary[];
}

/** Candidate parent folders, most specific first. INFINITY_NATIVE_DIR, when set, is the only candidate. */
export function nativeDirCandidates(env: Record<string, string | undefined>): { dirs: string[]; explicit: boolean } {
  if (env.INFINITY_NATIVE_DIR) return { dirs: [env.INFINITY_NATIVE_DIR], explicit: true };
  const dirs: string[] = [];
  if (env.XDG_CACHE_HOME) dirs.push(join(env.XDG_CACHE_HOME, "infinity", "native"));
  const home = env.HOME || safeHomedir();
  if (home) dirs.push(join(home, ".cache", "infinity", "native"));
  dirs.push(join(tmpdir(), `infinity-native-${process.getuid?.() ?? "user"}`));
  return { dirs, explicit: false };
}

function safeHomedir(): string | null {
  try {
    return homedir();
  } catch {
    return null;
  }
}

/** Whether `dir` already holds every library with the expected size. */
function complete(dir: string, bundle: NativeBundle): boolean {
  for (const f of bundle.files) {
    const p = join(dir, f.name);
    if (!existsSync(p) || statSync(p).size !== f.size) return false;
  }
  return true;
}

/**
 * Makes sure `<parent>/<hash>/` holds the libraries and returns that folder. Extraction goes to a private temporary
 * folder that is renamed into place in one step, so concurrent starts (several pods on one volume, or replicas on
 * one host) never see a half-written library: the first rename wins and the others discard their copy.
 */
export function extractTo(parent: string, bundle: NativeBundle): { dir: string; extracted: boolean } {
  const dir = join(parent, bundle.hash);
  if (complete(dir, bundle)) return { dir, extracted: false };
  mkdirSync(parent, { recursive: true });
  const temp = join(parent, `.${bundle.hash}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`);
  mkdirSync(temp);
  try {
    for (const f of bundle.files) {
      const target = join(temp, f.name);
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, readFileSync(f.source));
      chmodSync(target, 0o755);
    }
    try {
      renameSync(temp, dir);
    } catch (e) {
      // Another process got there first (ENOTEMPTY / EEXIST), or a stale incomplete folder is in the way.
      if (complete(dir, bundle)) return { dir, extracted: false };
      rmSync(dir, { recursive: true, force: true });
      renameSync(temp, dir);
      void e;
    }
    return { dir, extracted: true };
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
}

/** Extracts into the first usable candidate folder; returns the addon's path there. */
export function prepareNative(
  bundle: NativeBundle,
  env: Record<string, string | undefined>,
  what = "onnxruntime native libraries",
): { addonPath: string; dir: string; extracted: boolean } {
  const { dirs, explicit } = nativeDirCandidates(env);
  const failures: string[] = [];
  for (const parent of dirs) {
    try {
      const { dir, extracted } = extractTo(parent, bundle);
      return { addonPath: join(dir, bundle.addon), dir, extracted };
    } catch (e) {
      failures.push(`${parent}: ${(e as Error).message}`);
    }
  }
  const hint = explicit ? "" : " (set INFINITY_NATIVE_DIR to a writable folder)";
  throw new Error(`cannot extract the ${what}${hint}: ${failures.join("; ")}`);
}
