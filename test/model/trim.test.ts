import { expect, test } from "bun:test";
import "../helpers";
import { returnFreedMemory } from "../../src/model/trim";

test("glibc's malloc_trim is reachable on Linux (the unloaded models' memory is handed back)", () => {
  // The test machines and the container image are glibc Linux; elsewhere the call is a no-op that says so.
  expect(returnFreedMemory()).toBe(process.platform === "linux");
});
