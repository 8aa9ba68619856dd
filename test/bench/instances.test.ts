// Which limit each server configuration is held to, the decision's ratios and the N-session limit's combination of
// its children's rounds (pure; no model is loaded, no timing asserted).
import { describe, expect, test } from "bun:test";
import { decisionMarkdown, decisionRows, flagValue, instancesArgs, limitFor, withoutFlags, type DecisionCellInput } from "../../bench/instances";
import { combineRound } from "../../bench/limit-sessions";

describe("server flags", () => {
  test("flag values in both forms, the last one given", () => {
    expect(flagValue(["--instances", "2", "--num-threads=1"], "--instances")).toBe("2");
    expect(flagValue(["--instances", "2", "--num-threads=1"], "--num-threads")).toBe("1");
    expect(flagValue(["--instances=2", "--instances", "3"], "--instances")).toBe("3");
    expect(flagValue(["--instances-x", "2"], "--instances")).toBeNull();
  });

  test("the throughput configuration replaces the server's own --instances and --num-threads", () => {
    expect(withoutFlags(["--a", "--instances", "4", "--num-threads=2", "--b", "x"], ["--instances", "--num-threads"])).toEqual(["--a", "--b", "x"]);
    expect(instancesArgs(["--max-batch-tokens", "1024", "--instances", "4"], 2)).toEqual(["--max-batch-tokens", "1024", "--instances", "2", "--num-threads", "1"]);
  });

  test("defaults are held to one session at the benchmark's threads; --instances N to N sessions of the server's threads", () => {
    expect(limitFor([], 2)).toEqual({ sessions: 1, threads: 2, batchTokens: 512 });
    expect(limitFor(["--num-threads", "1"], 2).sessions).toBe(1);
    expect(limitFor(["--instances", "1"], 2).sessions).toBe(1);
    expect(limitFor(["--instances", "2", "--num-threads", "1"], 2)).toEqual({ sessions: 2, threads: 1, batchTokens: 512 });
    // Without --num-threads the harness passes its own thread count to each instance.
    expect(limitFor(["--instances=3"], 2)).toEqual({ sessions: 3, threads: 2, batchTokens: 512 });
    expect(limitFor(["--instances", "2", "--num-threads", "1", "--max-batch-tokens", "1056"], 2).batchTokens).toBe(1056);
  });
});

describe("decision rows", () => {
  const cell = (system: string, size: number, concurrency: number, tokensPerSec: number, limitNearby: number | null, peakRssMb = 300): DecisionCellInput =>
    ({ system, size, concurrency, tokensPerSec, limitNearby, peakRssMb });
  const configs = [
    { system: "server", label: "defaults", limitLabel: "1 session x 2 threads", limitAtStart: 3000, limitPeakRssMb: 240 },
    { system: "instances", label: "--instances 2 --num-threads 1", limitLabel: "2 sessions x 1 thread", limitAtStart: 3600, limitPeakRssMb: 480 },
  ];

  test("each configuration over its own limit, in the two cells the decision names", () => {
    const cells = [
      cell("server", 1, 32, 2700, 3000, 280), cell("server", 32, 16, 2600, 3100, 290), cell("server", 1, 16, 9999, 1),
      cell("instances", 1, 32, 3300, 3500, 400), cell("instances", 32, 16, 3000, 3600, 430),
      cell("naive", 1, 32, 1000, 3000),
    ];
    const rows = decisionRows(cells, configs);
    expect(rows.map((r) => [r.system, r.cell])).toEqual([
      ["server", "1-input requests, concurrency 32"], ["server", "32-input requests, concurrency 16"],
      ["instances", "1-input requests, concurrency 32"], ["instances", "32-input requests, concurrency 16"],
    ]);
    expect(rows.map((r) => r.ratio)).toEqual([0.9, 2600 / 3100, 3300 / 3500, 3000 / 3600]);
    // 0.90 exactly meets the target.
    expect(rows.map((r) => r.verdict)).toEqual(["met", "MISSED", "met", "MISSED"]);
    expect(rows.map((r) => r.serverPeakRssMb)).toEqual([300, 300, 430, 430]);
    expect(rows.map((r) => r.limitPeakRssMb)).toEqual([240, 240, 480, 480]);
  });

  test("a cell without a bracket uses the limit's first measurement; a missing cell is not measured", () => {
    const rows = decisionRows([cell("instances", 1, 32, 3240, null)], configs);
    expect(rows[2]!.limit).toBe(3600);
    expect(rows[2]!.ratio).toBe(0.9);
    expect(rows[3]!.verdict).toBe("not measured");
    expect(rows[0]!.verdict).toBe("not measured");
    const md = decisionMarkdown(rows).join("\n");
    expect(md).toContain("| --instances 2 --num-threads 1 | 2 sessions x 1 thread | 1-input requests, concurrency 32 | 3240 | 3600 | 0.90 | >= 0.9 | met |");
    expect(md).toContain("| defaults | 1 session x 2 threads | 32-input requests, concurrency 16 | - | - | - | >= 0.9 | not measured |");
  });
});

describe("N sessions at once", () => {
  const o = { sessions: 2, threads: 1, batching: { batchSize: 0, batchTokens: 512 } };

  test("total tokens over the wall time from release to the last child done, not the sum of each child's rate", () => {
    // One child finishes its share in 2 s, the other in 4 s: together 8000 tokens in 4 s, not 4000/2 + 4000/4.
    const p = combineRound([
      { tokens: 4000, padded: 4100, inputs: 40, batches: 10, seconds: 2 },
      { tokens: 4000, padded: 4100, inputs: 40, batches: 10, seconds: 4 },
    ], 4.05, o);
    expect(p.tokensPerSec).toBeCloseTo(8000 / 4.05, 6);
    expect(p.tokensPerSec).toBeLessThan(4000 / 2 + 4000 / 4);
    expect(p.inputsPerSec).toBeCloseTo(80 / 4.05, 6);
    expect(p.meanBatch).toBe(4);
    expect(p.paddedFraction).toBeCloseTo(1 - 8000 / 8200, 9);
    expect(p.childSeconds).toEqual({ min: 2, max: 4 });
    expect(p.sessions).toBe(2);
  });
});
