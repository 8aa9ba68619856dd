// Runners for the towers of multimodal models. A media tower's batch is a stack of preprocessed tensors fed to
// its input (pixel_values / input_features); with a combined export (one onnx/model.onnx taking both towers'
// inputs), the tower not asked for gets a one-row dummy input and only the wanted output is read.
import { textFeeds, type BatchTensors, type Feed, type ModelSession } from "../model/session";
import type { TaskReader } from "../tasks/task";
import type { FeatureBatch } from "../tasks/batch-input";
import type { Runner } from "../tasks/runner";

export function mediaRunner(session: ModelSession, reader: TaskReader<Float32Array>, inputName: string, dummies: Record<string, Feed> = {}): Runner<Float32Array, FeatureBatch> {
  const output = reader.outputName(session.outputNames);
  return {
    async run(t) {
      const out = await session.runFeeds({ ...dummies, [inputName]: t }, output);
      return reader.read(out, new Int32Array(t.dims[0]!));
    },
  };
}

/** The text tower of a combined export: token tensors plus a dummy media input. */
export function combinedTextRunner(session: ModelSession, reader: TaskReader<Float32Array>, dummies: Record<string, Feed>): Runner<Float32Array, BatchTensors> {
  const output = reader.outputName(session.outputNames);
  return {
    async run(t) {
      const out = await session.runFeeds({ ...dummies, ...textFeeds(t, session.inputNames, session.inputSpecs) }, output);
      return reader.read(out, new Int32Array(t.batch));
    },
  };
}

/** Dummy inputs of a combined export: one row of text (the pad token) or one zero media tensor. */
export function textDummy(padId: number): Record<string, Feed> {
  return {
    input_ids: { data: Int32Array.of(padId), dims: [1, 1] },
    attention_mask: { data: Int32Array.of(1), dims: [1, 1] },
    token_type_ids: { data: Int32Array.of(0), dims: [1, 1] },
  };
}

export function mediaDummy(inputName: string, shape: readonly number[]): Record<string, Feed> {
  return { [inputName]: { data: new Float32Array(shape.reduce((a, b) => a * b, 1)), dims: [1, ...shape] } };
}
