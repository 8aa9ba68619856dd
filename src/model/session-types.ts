// What crosses between a model session (session.ts) and its inference worker (inference-worker.ts): the session's
// settings, the head graph run after the model, the feeds and the outputs. A leaf, so both sides and the protocol
// between them can name these without importing each other.

export interface SessionSettings {
  device: string;
  numThreads: number;
  /**
   * Where the graph's external data (model.onnx_data) lies when the graph file was written elsewhere (an LLM
   * reranker's graph rewritten at load, model/logits-graph.ts); unset: beside the graph file.
   */
  externalDataDir?: string;
}

/**
 * A graph the worker runs on one output of the model right after each run that asks for what it gives: its input x
 * is the model output `input`; each of `outputs` (the name a run asks for -> the graph output that answers it) is
 * computed from it. ColBERT's Dense projection of every token vector answers under the model output's own name
 * (model/dense-graph.ts); bge-m3's pickled sparse and ColBERT heads add outputs the model lacks (tasks/hybrid.ts).
 * The session reports the model's outputs and the head's. Created with the model's settings, in the same worker,
 * again in a replacement worker.
 */
export interface SessionHead {
  input: string;
  outputs: Record<string, string>;
  graph: Uint8Array;
}

export interface OutputTensor {
  name: string;
  data: Float32Array;
  dims: number[];
}

/**
 * One named input as the caller builds it; int32 data is widened where the model declares int64, Uint16Array
 * holds float16 halves.
 */
export type Feed = { data: Float32Array | Int32Array | Uint16Array; dims: number[] };

/** What the model declares about one input: its element type and its shape (symbolic axes are strings). */
export interface InputSpec {
  name: string;
  type: string;
  shape: readonly (number | string)[];
}
