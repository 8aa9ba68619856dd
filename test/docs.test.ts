// The user docs against the code: the flag reference in docs/operations.md is what build/flags-doc.ts renders from
// the option table (the one --help prints), every flag --help lists is documented and every flag the page names
// exists, relative links lead to files that exist, and the front docs stay short.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { findOption, helpText } from "../src/config";
import { OPERATIONS_MD, withFlagReference } from "../build/flags-doc";
import { ROOT } from "./helpers";

const read = (p: string) => readFileSync(join(ROOT, p), "utf8");
const operations = readFileSync(OPERATIONS_MD, "utf8");

/** Flag names (without dashes) in a text: --name, --[no-]name and --no-name of a bool option count as name. */
function flagsIn(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(/(?<![\w-])--(\[no-\])?([a-z][a-z0-9-]*)/g)) {
    let name = m[2]!;
    if (!m[1] && name.startsWith("no-") && findOption(name.slice(3))?.kind === "bool") name = name.slice(3);
    names.add(name);
  }
  return names;
}

describe("docs/operations.md flag reference", () => {
  test("the section between the flags markers is what `npx bun build/flags-doc.ts` renders from src/config.ts", () => {
    expect(operations).toBe(withFlagReference(operations));
  });

  test("every flag of `infinity --help` is in docs/operations.md, and every flag docs/operations.md names is in --help", () => {
    const help = flagsIn(helpText());
    const doc = flagsIn(operations);
    expect(help.size).toBeGreaterThan(40);
    expect([...help].filter((f) => !doc.has(f)).sort()).toEqual([]);
    expect([...doc].filter((f) => !help.has(f)).sort()).toEqual([]);
  });
});

describe("README.md and docs/", () => {
  const pages = ["README.md", "bench/README.md", ...readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

  test("relative links and images point to files that exist", () => {
    const broken: string[] = [];
    for (const page of pages) {
      for (const m of read(page).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!.split("#")[0]!;
        if (!target || /^[a-z]+:/i.test(target)) continue;
        if (!existsSync(join(ROOT, dirname(page), target))) broken.push(`${page}: ${m[1]}`);
      }
    }
    expect(broken).toEqual([]);
  });

  test("the front docs stay short: README.md <= 200 lines, docs/benchmarks.md <= 250, bench/README.md <= 100", () => {
    const lines = (p: string) => read(p).split("\n").length - 1;
    expect(lines("README.md")).toBeLessThanOrEqual(200);
    expect(lines("docs/benchmarks.md")).toBeLessThanOrEqual(250);
    expect(lines("bench/README.md")).toBeLessThanOrEqual(100);
  });
});
