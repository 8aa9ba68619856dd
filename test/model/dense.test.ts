import { describe, expect, test } from "bun:test";
import { readLayout } from "../../src/model/layout";
import { readDenseLayers } from "../../src/model/dense";
import { applyDense } from "../../src/tasks/embed";
import { fixture } from "../helpers";
import { listFolder } from "../../src/model/resolve";

describe("model families: decoders, Dense modules, unknown modules", () => {
  test("bert-dense: Dense weights from safetensors; dimension is the last Dense's", () => {
    const l = readLayout(fixture("bert-dense"), listFolder(fixture("bert-dense")), "auto", "auto");
    expect(l.dense.map((d) => [d.inFeatures, d.outFeatures, d.bias, d.activation])).toEqual([[32, 24, true, "tanh"], [24, 16, false, "identity"]]);
    expect(l.hiddenSize).toBe(16);
    const layers = readDenseLayers(l.dir, l.dense);
    expect(layers[0]!.weight.length).toBe(24 * 32);
    expect(layers[0]!.bias!.length).toBe(24);
    expect(applyDense(new Float32Array(32).fill(0.1), layers).length).toBe(16);
  });
});
