// Process-wide runtime state, set up once before the first model loads so that no model is charged for it.
// The first onnxruntime session a process creates maps and touches onnxruntime's shared library and builds its
// global environment; the first inference worker thread starts Bun's worker runtime. Measured in a bare Bun
// process: +42 MB RSS (of it +32 MB file-backed library pages), and the same after the session is released and
// its worker has ended; a second session, of any model, adds ~1 MB. Before this, the first model loaded was
// measured (and budgeted) with that state and its unload could not return it. (Numbers: bench/README.md.)
import { Encoder } from "../tokenize/encode";
import type { TokenizerPool } from "../tokenize/pool";
import { ModelSession } from "./session";
import { returnFreedMemory } from "./trim";

/**
 * The smallest ONNX graph: y = Identity(x), float[1], opset 13, IR version 7 (71 bytes). Written by the onnx
 * package: helper.make_model(helper.make_graph([make_node("Identity", ["x"], ["y"])], "prime", [x], [y])).
 */
const IDENTITY_GRAPH = "CAcSADo7ChAKAXgSAXkiCElkZW50aXR5EgVwcmltZVoPCgF4EgoKCAgBEgQKAggBYg8KAXkSCgoICAESBAoCCAFCBAoAEA0=";

/** A two-word WordLevel tokenizer: enough for the tokenizer binding to build and run a tokenizer once. */
const TINY_TOKENIZER = {
  version: "1.0",
  truncation: null,
  padding: null,
  added_tokens: [],
  normalizer: null,
  pre_tokenizer: { type: "Whitespace" },
  post_processor: null,
  decoder: null,
  model: { type: "WordLevel", vocab: { "[UNK]": 0, prime: 1 }, unk_token: "[UNK]" },
};

const PRIME_KEY = "\u0000runtime-priming";

let primed: Promise<void> | null = null;

/**
 * Creates and releases one onnxruntime session of a one-node graph in an inference worker, and builds, runs and
 * drops a tiny tokenizer on this thread and in every tokenizer worker. Once per process (later calls share it).
 */
export function primeRuntime(pool: TokenizerPool | null, device: string): Promise<void> {
  primed ??= (async () => {
    const session = await ModelSession.create(Buffer.from(IDENTITY_GRAPH, "base64"), { device, numThreads: 1 }, { label: "runtime priming" });
    await session.release();
    const encoder = await Encoder.create(TINY_TOKENIZER, {}, 8);
    await encoder.encodeBatch(["prime"]);
    if (pool) {
      await pool.load(PRIME_KEY, TINY_TOKENIZER, {}, 8);
      await pool.encode(PRIME_KEY, ["prime"]);
      await pool.unload(PRIME_KEY);
    }
    returnFreedMemory();
  })();
  return primed;
}
