// Per-token hidden states (TEI's /embed_all): the transformer's last_hidden_state for every real token of an input,
// special and prompt tokens included, padding left out; no pooling, projection or normalisation.
import { ModelLoadError } from "../errors";
import type { OutputTensor } from "../model/session";
import type { MultiVector } from "./multivector";
import type { TaskReader } from "./task";
import { TOKEN_STATE_OUTPUTS, tokenStatesOutput } from "../model/onnx-graph";

/** Reads row b's real tokens (from `starts`, `lengths` of them) of a [batch, seq, hidden] output, row-major. */
export const tokenStatesReader: TaskReader<MultiVector> = {
  outputName(names) {
    const found = tokenStatesOutput(names);
    if (!found) throw new ModelLoadError(`per-token states need an output ${TOKEN_STATE_OUTPUTS.join(" or ")}; the ONNX model has ${names.join(", ")}`);
    return found;
  },
  read(out: OutputTensor, lengths, starts) {
    if (out.dims.length !== 3) throw new Error(`per-token states are [batch, tokens, hidden], got [${out.dims.join(", ")}]`);
    const seq = out.dims[1]!;
    const dim = out.dims[2]!;
    const rows: MultiVector[] = new Array(lengths.length);
    for (let b = 0; b < lengths.length; b++) {
      const from = (b * seq + (starts?.[b] ?? 0)) * dim;
      rows[b] = { data: out.data.slice(from, from + lengths[b]! * dim), rows: lengths[b]!, dim };
    }
    return rows;
  },
};
