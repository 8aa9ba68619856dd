// What an engine's queue holds and how a batch of it becomes tensors. Text engines queue tokenized inputs and pad
// them (tokenBatches); media towers queue preprocessed tensors of one fixed shape and stack them.
// The queue, batcher, prepare-ahead and cancellation logic of Engine is the same for both.
import type { Encoded } from "../tokenize/encode";
import type { BatchTensors } from "../model/session";
import { buildTensors, type PaddingSide } from "../model/tensors";

export interface BatchInput<I, T> {
  /** An input's cost in the batch token budget: its tokens for text, 1 for a fixed-shape media tensor. */
  lengthOf(input: I): number;
  /** One batch's tensors, and the budget it uses (rows x padded length). */
  assemble(inputs: readonly I[]): { tensors: T; padded: number };
  /** Inputs of different groups never share a batch (a Jina v3 run takes one task adapter); absent: one group. */
  groupOf?(input: I): number;
}

/** A stacked batch of fixed-shape float inputs: [batch, ...shape]. */
export interface FeatureBatch {
  data: Float32Array;
  dims: number[];
}

/** Stacks preprocessed media tensors (pixel_values [3, H, W], input_features [1, T, F]) into one batch. */
export function featureBatches(shape: readonly number[]): BatchInput<Float32Array, FeatureBatch> {
  const size = shape.reduce((a, b) => a * b, 1);
  return {
    lengthOf: () => 1,
    assemble(inputs) {
      const data = new Float32Array(inputs.length * size);
      inputs.forEach((x, i) => {
        if (x.length !== size) throw new Error(`media input has ${x.length} values, the tower takes ${size} (${shape.join("x")})`);
        data.set(x, i * size);
      });
      return { tensors: { data, dims: [inputs.length, ...shape] }, padded: inputs.length };
    },
  };
}

/** Text batches: token ids padded with the model's pad id, on the model's padding side. */
export function tokenBatches(padId: number, side: PaddingSide = "right", fixedLength: number | null = null): BatchInput<Encoded, BatchTensors> {
  return {
    lengthOf: (e) => fixedLength ?? e.ids.length,
    groupOf: (e) => e.taskId ?? -1,
    assemble(encs) {
      const tensors = buildTensors(encs, padId, side, fixedLength);
      return { tensors, padded: tensors.batch * tensors.seqLen };
    },
  };
}
