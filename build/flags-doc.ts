#!/usr/bin/env bun
// Writes the flag reference into docs/operations.md, between <!-- flags:start --> and <!-- flags:end -->, from
// the option table in src/config.ts (the one --help prints). `npx bun build/flags-doc.ts` rewrites the section;
// `--check` only says whether it is current (exit 1 when not). test/docs.test.ts runs the same comparison.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { flagReferenceMarkdown } from "../src/config";

export const OPERATIONS_MD = join(import.meta.dir, "..", "docs", "operations.md");
export const START = "<!-- flags:start -->";
export const END = "<!-- flags:end -->";

/** The document with its flags section replaced by the reference rendered from the option table. */
export function withFlagReference(doc: string): string {
  const start = doc.indexOf(START);
  const end = doc.indexOf(END);
  if (start < 0 || end < start) throw new Error(`docs/operations.md needs the markers ${START} and ${END}, in that order`);
  return `${doc.slice(0, start + START.length)}\n${flagReferenceMarkdown()}\n${doc.slice(end)}`;
}

if (import.meta.main) {
  const doc = readFileSync(OPERATIONS_MD, "utf8");
  const next = withFlagReference(doc);
  if (process.argv.includes("--check")) {
    if (next !== doc) {
      process.stderr.write("docs/operations.md: the flag reference is out of date; run npx bun build/flags-doc.ts\n");
      process.exit(1);
    }
  } else if (next !== doc) {
    writeFileSync(OPERATIONS_MD, next);
    process.stdout.write("docs/operations.md: flag reference rewritten\n");
  } else {
    process.stdout.write("docs/operations.md: flag reference already current\n");
  }
}
