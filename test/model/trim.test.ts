import { describe, expect, test } from "bun:test";
import "../helpers";
import { IdleTrim, returnFreedMemory } from "../../src/model/trim";

test("glibc's malloc_trim is reachable on Linux (the unloaded models' memory is handed back)", () => {
  // The test machines and the container image are glibc Linux; elsewhere the call is a no-op that says so.
  expect(returnFreedMemory()).toBe(process.platform === "linux");
});

describe("IdleTrim (inference workers hand freed memory back after a burst)", () => {
  test("trims once after enough tokens and a quiet delay; a run meanwhile postpones it; small runs never trim", async () => {
    let trims = 0;
    const t = new IdleTrim(40, 1000, () => (trims++, true));
    t.busy();
    t.ran(600);
    await Bun.sleep(80);
    expect(trims).toBe(0); // 600 < 1000 tokens
    t.busy();
    t.ran(600);
    // A run starts before the delay passes: nothing while it runs, however long.
    await Bun.sleep(20);
    t.busy();
    await Bun.sleep(80);
    expect(trims).toBe(0);
    t.ran(10);
    await Bun.sleep(80);
    expect(trims).toBe(1);
    // The count starts again after a trim.
    t.busy();
    t.ran(900);
    await Bun.sleep(80);
    expect(trims).toBe(1);
    t.ran(200);
    t.stop();
    await Bun.sleep(80);
    expect(trims).toBe(1);
  });
});
