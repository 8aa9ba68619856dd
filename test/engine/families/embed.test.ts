import { describe, expect, test } from "bun:test";
import { readLayout } from "../../../src/model/layout";
import { denseHead } from "../../../src/engine/families/embed";
import { fixture } from "../../helpers";
import { listFolder } from "../../../src/model/resolve";

describe("model families: decoders, Dense modules, unknown modules", () => {
  test("gemma-embed: sentence_embedding output is read; without it the missing Dense weights refuse the model", () => {
    const l = readLayout(fixture("gemma-embed"), listFolder(fixture("gemma-embed")), "auto", "auto");
    expect(l.dense.length).toBe(2);
    expect(denseHead(l, { outputNames: ["last_hidden_state", "sentence_embedding"] })).toEqual([]);
    expect(() => denseHead(l, { outputNames: ["last_hidden_state"] })).toThrow(/no sentence_embedding output.*2_Dense\/model.safetensors is missing/);
  });
});
