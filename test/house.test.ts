// The shape of the house (docs: DESIGN.md): every file under src/ sits on a floor, and imports only go down or
// stay on their floor: cli -> server/ -> engine/ -> tasks/ -> model/, tokenize/, media/, cache/ -> the leaves. A lower
// room that needs something from a higher one means that piece belongs lower; move it, don't import up. Also: no
// import circles among src/ and bench/ files.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");

/** Floors, top to bottom; a file's floor is the first whose test matches its path under the project root. */
const FLOORS: ReadonlyArray<{ floor: number; name: string; holds: (path: string) => boolean }> = [
  { floor: 6, name: "cli", holds: (p) => p === "src/cli.ts" },
  { floor: 5, name: "server/", holds: (p) => p.startsWith("src/server/") },
  { floor: 4, name: "engine/", holds: (p) => p.startsWith("src/engine/") },
  { floor: 3, name: "tasks/", holds: (p) => p.startsWith("src/tasks/") },
  { floor: 2, name: "model/ tokenize/ media/ cache/", holds: (p) => /^src\/(model|tokenize|media|cache)\//.test(p) },
  // Leaves import nothing of the project but each other (log.ts names config.ts's LogLevel, config.ts errors.ts and
  // platform.ts, which reads the managed platforms' variables; tracing.ts reads version.ts).
  { floor: 1, name: "leaves", holds: (p) => /^src\/(errors|log|config|workers|metrics|version|platform|tracing)\.ts$/.test(p) },
];

function floorOf(path: string): { floor: number; name: string } | null {
  return FLOORS.find((f) => f.holds(path)) ?? null;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    if (!existsSync(d)) return;
    for (const e of readdirSync(d)) {
      const p = join(d, e);
      if (e === "node_modules" || e.startsWith(".")) continue;
      if (statSync(p).isDirectory()) walk(p);
      else if (/\.tsx?$/.test(e) && !e.endsWith(".d.ts")) out.push(relative(ROOT, p));
    }
  };
  walk(join(ROOT, dir));
  return out;
}

/** The project files a file imports: static `import`/`export ... from "./x"` (over several lines too) and `import("./x")`. */
function importsOf(path: string, known: ReadonlySet<string>): Array<{ target: string; line: string }> {
  const text = readFileSync(join(ROOT, path), "utf8");
  const out: Array<{ target: string; line: string }> = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s*["']([^"']+)["']|(?:^|\n)\s*import\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)) {
    const spec = m[1] ?? m[2] ?? m[3]!;
    if (!spec.startsWith(".")) continue;
    const base = relative(ROOT, resolve(ROOT, dirname(path), spec));
    const target = [base, `${base}.ts`, `${base}.tsx`, join(base, "index.ts"), base.replace(/\.js$/, ".ts")].find((c) => known.has(c));
    if (target) out.push({ target, line: m[0].trim().replace(/\s+/g, " ") });
  }
  return out;
}

describe("house", () => {
  const src = sourceFiles("src");
  const known = new Set([...src, ...sourceFiles("bench"), ...sourceFiles("build")]);

  test("every file under src/ has a floor", () => {
    expect(src.length).toBeGreaterThan(50);
    expect(src.filter((p) => !floorOf(p))).toEqual([]);
  });

  test("no import goes up a floor", () => {
    let seen = 0;
    const up: string[] = [];
    for (const p of src) {
      const from = floorOf(p)!;
      for (const { target, line } of importsOf(p, known)) {
        seen++;
        const to = floorOf(target);
        if (!to) up.push(`${p} imports ${target}, outside src/: ${line}`);
        else if (to.floor > from.floor) up.push(`${p} (${from.name}) imports ${target} (${to.name}): ${line}`);
      }
    }
    // The parser found the house's imports (a broken pattern would pass with none).
    expect(seen).toBeGreaterThan(300);
    expect(up).toEqual([]);
  });

  test("the rule catches an import up a floor", () => {
    expect(floorOf("src/tasks/embed.ts")!.floor).toBeLessThan(floorOf("src/engine/engine.ts")!.floor);
    expect(floorOf("src/model/session.ts")!.floor).toBeLessThan(floorOf("src/tasks/task.ts")!.floor);
    expect(floorOf("src/engine/registry.ts")!.floor).toBeLessThan(floorOf("src/server/app.ts")!.floor);
    expect(floorOf("src/metrics.ts")!.floor).toBeLessThan(floorOf("src/cache/cache.ts")!.floor);
  });

  test("no import circles among src/ and bench/ files", () => {
    const files = [...known].filter((p) => p.startsWith("src/") || p.startsWith("bench/"));
    const graph = new Map(files.map((p) => [p, importsOf(p, known).map((i) => i.target).filter((t) => t.startsWith("src/") || t.startsWith("bench/"))]));
    // Tarjan's strongly connected components: any of more than one file is a circle.
    let next = 0;
    const index = new Map<string, number>(), low = new Map<string, number>(), stack: string[] = [], onStack = new Set<string>();
    const circles: string[] = [];
    const visit = (v: string) => {
      index.set(v, next);
      low.set(v, next++);
      stack.push(v);
      onStack.add(v);
      for (const w of graph.get(v) ?? []) {
        if (!index.has(w)) {
          visit(w);
          low.set(v, Math.min(low.get(v)!, low.get(w)!));
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
      if (low.get(v) === index.get(v)) {
        const component: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          component.push(w);
        } while (w !== v);
        if (component.length > 1) circles.push(component.sort().join(" <-> "));
      }
    };
    for (const f of files) if (!index.has(f)) visit(f);
    expect(circles).toEqual([]);
  });
});
