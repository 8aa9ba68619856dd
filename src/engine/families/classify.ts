// Sequence classifiers (several labels): the logits of each input, softmaxed or raw by the request.
import { classifyReader } from "../../tasks/classify";
import type { Family } from "./family";

export const classifyFamily: Family = {
  name: "classify",
  serves: (layout) => layout.task === "classify",
  async build({ base, engine, sessionBytes }) {
    const bytes = sessionBytes();
    return { ...base, memoryBytes: bytes, sessionBytes: bytes, task: "classify", engine: engine(classifyReader) };
  },
};
