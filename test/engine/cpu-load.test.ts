import { describe, expect, test } from "bun:test";
import { OtherLoad } from "../../src/engine/cpu-load";

describe("OtherLoad", () => {
  test.skipIf(process.platform !== "linux")("counts a busy child process as other load, and this process's own work as not", async () => {
    // Own work only: a busy loop in this process for 400 ms.
    const own = new OtherLoad();
    own.start();
    const until = performance.now() + 400;
    while (performance.now() < until);
    const ownResult = own.stop()!;
    // A busy child for 600 ms, watched as another process.
    const child = Bun.spawn([process.execPath, "-e", "const end = Date.now() + 900; while (Date.now() < end);"], { stdout: "ignore", stderr: "ignore" });
    await Bun.sleep(150);
    const others = new OtherLoad();
    others.start();
    await Bun.sleep(600);
    const otherResult = others.stop()!;
    await child.exited;
    // The child takes about one core; background processes of the machine may add some to both readings.
    expect(otherResult).toBeGreaterThan(0.6);
    expect(otherResult - ownResult).toBeGreaterThan(0.5);
    // The same child watched as one of ours is not "other".
    const child2 = Bun.spawn([process.execPath, "-e", "const end = Date.now() + 900; while (Date.now() < end);"], { stdout: "ignore", stderr: "ignore" });
    await Bun.sleep(150);
    const mine = new OtherLoad(() => [process.pid, child2.pid]);
    mine.start();
    await Bun.sleep(600);
    const mineResult = mine.stop()!;
    await child2.exited;
    expect(otherResult - mineResult).toBeGreaterThan(0.5);
  });

  test("stop() before start() cannot tell", () => {
    expect(new OtherLoad().stop()).toBeNull();
  });
});
