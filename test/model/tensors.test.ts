import { describe, expect, test } from "bun:test";
import { buildTensors, rowExtents } from "../../src/model/tensors";
import type { Encoded } from "../../src/tokenize/encode";

const enc = (...ids: number[]): Encoded => ({ ids: Int32Array.from(ids), typeIds: null });

describe("buildTensors", () => {
  test("pads with the pad id, masks padding, carries type ids", () => {
    const t = buildTensors([enc(5, 6, 7), { ids: Int32Array.from([8]), typeIds: Int32Array.from([1]) }], 1);
    expect(t.seqLen).toBe(3);
    expect(Array.from(t.inputIds)).toEqual([5, 6, 7, 8, 1, 1]);
    expect(Array.from(t.attentionMask)).toEqual([1, 1, 1, 1, 0, 0]);
    expect(Array.from(t.tokenTypeIds!)).toEqual([0, 0, 0, 1, 0, 0]);
  });

  test("left padding (decoder models): real tokens end at the last position; extents found from the mask", () => {
    const t = buildTensors([enc(5, 6, 7), { ids: Int32Array.from([8]), typeIds: Int32Array.from([1]) }], 9, "left");
    expect(Array.from(t.inputIds)).toEqual([5, 6, 7, 9, 9, 8]);
    expect(Array.from(t.attentionMask)).toEqual([1, 1, 1, 0, 0, 1]);
    expect(Array.from(t.tokenTypeIds!)).toEqual([0, 0, 0, 0, 0, 1]);
    const { lengths, starts } = rowExtents(t);
    expect(Array.from(lengths)).toEqual([3, 1]);
    expect(Array.from(starts)).toEqual([0, 2]);
    const right = rowExtents(buildTensors([enc(5), enc(6, 7)], 0));
    expect(Array.from(right.lengths)).toEqual([1, 2]);
    expect(Array.from(right.starts)).toEqual([0, 0]);
  });
});
