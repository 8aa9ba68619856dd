// What runs one batch for an engine: the Runner interface every task's runner offers, and the plain one that feeds
// a session and reads one output with the task's reader.
import type { BatchTensors, ModelSession } from "../model/session";
import { rowExtents } from "../model/tensors";
import type { TaskReader } from "./task";

/** The runner side of an engine: a session (or a fake in tests) and how to read its outputs. */
export interface Runner<R, T = BatchTensors> {
  run(t: T): Promise<R[]>;
}

export function sessionRunner<R>(session: ModelSession, reader: TaskReader<R>): Runner<R> {
  const output = reader.outputName(session.outputNames);
  return {
    async run(t) {
      const out = await session.run(t, output);
      const { lengths, starts } = rowExtents(t);
      return reader.read(out, lengths, starts);
    },
  };
}
