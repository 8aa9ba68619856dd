// LLM rerankers score from the logits at the last position only, but a causal-LM export without a
// num_logits_to_keep input (onnx-community's Qwen3-Reranker) computes the full-vocabulary logits of every position:
// [batch, seq, vocab] float32, 606,676 bytes per token for Qwen3's 151,669 tokens (4.97 GB for one 8,192-token
// input) and as many lm_head products. At load the graph is rewritten so the lm_head reads only the last position:
// a Slice of the hidden state [batch, seq, hidden] -> [batch, 1, hidden] goes in front of the lm_head MatMul, and the
// output becomes [batch, 1, vocab] whatever the length. Decoder rerankers pad on the left, so the last position is
// every row's last real token. The rewrite is made only where the graph has the expected shape (a MatMul /
// MatMulNBits of the hidden state with a constant weight, then only Cast / Identity up to the output); anything else
// keeps the graph as it is, with the reason returned for the load log. Only the small records are read and
// re-encoded: the weights are copied byte for byte into a temporary file, and external data (model.onnx_data) is
// read from the source folder (SessionSettings.externalDataDir).
import { closeSync, fstatSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { FileReader, Writer, eachField, fieldsOf, stringsOf, type Field } from "./protobuf";

// onnx.proto3 field numbers.
const MODEL = { graph: 7, opsetImport: 8 } as const;
const GRAPH = { node: 1, initializer: 5, input: 11, output: 12 } as const;
const NODE = { input: 1, output: 2, name: 3, opType: 4, domain: 7 } as const;
const TENSOR = { dims: 1, dataType: 2, name: 8, rawData: 9 } as const;
const OPSET = { domain: 1, version: 2 } as const;
const INT64 = 7;

/** Inputs through which a decoder export returns only the last positions' logits (the server feeds 1). */
export const KEEP_LOGITS_INPUTS: readonly string[] = ["num_logits_to_keep", "logits_to_keep"];

/** The nodes a constant weight may pass through on its way to the lm_head (tied embeddings are transposed). */
const WEIGHT_OPS = new Set(["Transpose", "Identity", "Cast", "DequantizeLinear", "Constant"]);
/** Ops between the lm_head and the logits output that act on each position alone. */
const POSITIONWISE_OPS = new Set(["Cast", "Identity"]);

interface GraphNode {
  index: number;
  opType: string;
  domain: string;
  name: string;
  inputs: string[];
  outputs: string[];
  /** Byte range of the whole field (tag included) in the file. */
  start: number;
  end: number;
}

/** What the rewrite needs to know of a model, read from its small records. */
export interface GraphSummary {
  /** Version of the default (ai.onnx) opset; 0 when none is declared. */
  opset: number;
  nodes: GraphNode[];
  initializers: Set<string>;
  inputs: string[];
  outputs: string[];
  /** Byte range of the ModelProto.graph field: [tagStart, from) is its tag and length, [from, to) its body. */
  graph: { tagStart: number; from: number; to: number };
  size: number;
}

function readSummary(r: FileReader, size: number): GraphSummary {
  const summary: GraphSummary = { opset: 0, nodes: [], initializers: new Set(), inputs: [], outputs: [], graph: { tagStart: -1, from: 0, to: 0 }, size };
  eachField(r, 0, size, (field, from, to, tagStart) => {
    if (field === MODEL.opsetImport) {
      const f = fieldsOf(r.bytes(from, to - from));
      const domain = stringsOf(f, OPSET.domain)[0] ?? "";
      if (domain === "" || domain === "ai.onnx") summary.opset = f.find((x) => x.field === OPSET.version)?.value ?? 0;
      return;
    }
    if (field !== MODEL.graph) return;
    summary.graph = { tagStart, from, to };
    eachField(r, from, to, (g, gFrom, gTo, gTag) => {
      if (g === GRAPH.node) {
        // A node's attributes can hold a tensor (Constant) or a subgraph: only the names are read.
        const strings = new Map<number, string[]>();
        eachField(r, gFrom, gTo, (n, nFrom, nTo) => {
          if (n === NODE.input || n === NODE.output || n === NODE.name || n === NODE.opType || n === NODE.domain) {
            const list = strings.get(n) ?? [];
            list.push(r.bytes(nFrom, nTo - nFrom).toString("utf8"));
            strings.set(n, list);
          }
        });
        summary.nodes.push({
          index: summary.nodes.length,
          opType: strings.get(NODE.opType)?.[0] ?? "",
          domain: strings.get(NODE.domain)?.[0] ?? "",
          name: strings.get(NODE.name)?.[0] ?? "",
          inputs: strings.get(NODE.input) ?? [],
          outputs: strings.get(NODE.output) ?? [],
          start: gTag,
          end: gTo,
        });
      } else if (g === GRAPH.initializer) {
        eachField(r, gFrom, gTo, (t, tFrom, tTo) => {
          if (t === TENSOR.name) summary.initializers.add(r.bytes(tFrom, tTo - tFrom).toString("utf8"));
        });
      } else if (g === GRAPH.input || g === GRAPH.output) {
        let name = "";
        eachField(r, gFrom, gTo, (v, vFrom, vTo) => {
          if (v === 1 && !name) name = r.bytes(vFrom, vTo - vFrom).toString("utf8");
        });
        (g === GRAPH.input ? summary.inputs : summary.outputs).push(name);
      }
    });
  });
  if (summary.graph.tagStart < 0) throw new Error("no graph");
  return summary;
}

/** Where the Slice goes: the lm_head node, whose first input is the hidden state. */
export interface LastPositionPlan {
  head: GraphNode;
  hidden: string;
}

/** Decides whether and where the graph can be cut to the last position; a string is the reason it cannot. */
export function planLastPosition(g: GraphSummary, output: string): LastPositionPlan | string {
  if (!g.outputs.includes(output)) return `the graph has no ${output} output`;
  if (g.opset < 10) return `the graph's opset ${g.opset} has no Slice with tensor inputs (opset 10+)`;
  const producer = new Map<string, GraphNode>();
  const consumers = new Map<string, GraphNode[]>();
  for (const n of g.nodes) {
    for (const o of n.outputs) producer.set(o, n);
    for (const i of n.inputs) if (i) consumers.set(i, [...(consumers.get(i) ?? []), n]);
  }
  const constant = (name: string, depth = 0): boolean => {
    if (g.initializers.has(name)) return true;
    const p = producer.get(name);
    return !!p && depth < 8 && WEIGHT_OPS.has(p.opType) && p.inputs.every((i) => !i || constant(i, depth + 1));
  };
  // Walk back from the output through per-position ops; each value on the way feeds only the next node.
  let value = output;
  for (let steps = 0; ; steps++) {
    const node = producer.get(value);
    if (!node) return `${value} is not computed by a node`;
    const label = `${node.opType} node ${JSON.stringify(node.name || node.outputs[0])}`;
    if (node.outputs.length !== 1) return `${label} has ${node.outputs.length} outputs`;
    if (value !== output && (g.outputs.includes(value) || (consumers.get(value) ?? []).length !== 1)) {
      return `${value} (before ${output}) is used elsewhere too`;
    }
    if (POSITIONWISE_OPS.has(node.opType) && (node.domain === "" || node.domain === "ai.onnx") && steps < 8) {
      value = node.inputs[0]!;
      continue;
    }
    const matmul = node.opType === "MatMul" && (node.domain === "" || node.domain === "ai.onnx");
    const nbits = node.opType === "MatMulNBits" && node.domain === "com.microsoft";
    if (!matmul && !nbits) return `${output} comes from a ${label}, not from an lm_head MatMul`;
    if (!node.inputs[1] || !constant(node.inputs[1])) return `the ${label} before ${output} does not multiply by a constant weight`;
    if (!node.inputs[0] || constant(node.inputs[0])) return `the ${label} before ${output} has no hidden-state input`;
    return { head: node, hidden: node.inputs[0] };
  }
}

/** Names the rewrite adds; made unique against the graph's own. */
function freshNames(g: GraphSummary): { starts: string; ends: string; axes: string; sliced: string } {
  const taken = new Set<string>([...g.initializers, ...g.inputs, ...g.outputs, ...g.nodes.flatMap((n) => [...n.inputs, ...n.outputs])]);
  let prefix = "infinity/last_position";
  for (let i = 2; ["starts", "ends", "axes", "hidden"].some((s) => taken.has(`${prefix}/${s}`)); i++) prefix = `infinity/last_position_${i}`;
  return { starts: `${prefix}/starts`, ends: `${prefix}/ends`, axes: `${prefix}/axes`, sliced: `${prefix}/hidden` };
}

/** A 1-D int64 initializer of one value, written raw (little-endian). */
function int64Initializer(w: Writer, name: string, value: bigint): void {
  const raw = new Uint8Array(8);
  new DataView(raw.buffer).setBigInt64(0, value, true);
  w.msg(GRAPH.initializer, (t) => t.int(TENSOR.dims, 1).int(TENSOR.dataType, INT64).str(TENSOR.name, name).raw(TENSOR.rawData, raw));
}

/** The head node's record with its first input renamed; every other field as it was. */
function renamedFirstInput(record: Uint8Array, input: string): Uint8Array {
  const body = fieldsOf(fieldsOf(record)[0]!.bytes);
  const w = new Writer();
  let renamed = false;
  for (const f of body as Field[]) {
    if (!renamed && f.field === NODE.input && f.wire === 2) {
      w.str(NODE.input, input);
      renamed = true;
    } else w.append(f.raw);
  }
  return Uint8Array.from(new Writer().raw(GRAPH.node, w.bytes).bytes);
}

function copyRange(from: number, to: number, start: number, end: number): void {
  const chunk = Buffer.alloc(Math.min(16 * 1048576, Math.max(1, end - start)));
  for (let pos = start; pos < end; ) {
    const n = readSync(from, chunk, 0, Math.min(chunk.length, end - pos), pos);
    if (n <= 0) throw new Error(`short read at byte ${pos}`);
    writeSync(to, chunk, 0, n);
    pos += n;
  }
}

function varintBytes(v: number): number[] {
  return new Writer().varint(v).bytes;
}

/** The rewritten graph: a file in a temporary folder. */
export interface LastPositionGraph {
  path: string;
  /** The source graph's folder, where its external data files are (SessionSettings.externalDataDir). */
  externalDataDir: string;
  /** The lm_head node the Slice was put in front of. */
  head: string;
  /** Removes the temporary folder (the session has read the graph; a replacement worker needs it until then). */
  remove(): void;
}

const made = new Set<string>();
let exitHook = false;

/**
 * Writes `source` with the hidden state sliced to the last position before the lm_head that computes `output`,
 * into a new temporary folder, or returns why the graph was left as it is.
 */
export function lastPositionGraph(source: string, output = "logits"): LastPositionGraph | { reason: string } | { kept: string } {
  let fd: number;
  try {
    fd = openSync(source, "r");
  } catch (e) {
    return { reason: `cannot open ${source}: ${(e as Error).message}` };
  }
  let dir: string | null = null;
  try {
    const r = new FileReader(fd);
    const g = readSummary(r, fstatSync(fd).size);
    // Such an export is fed 1 and already computes one position.
    const keep = g.inputs.find((i) => KEEP_LOGITS_INPUTS.includes(i));
    if (keep) return { kept: keep };
    const plan = planLastPosition(g, output);
    if (typeof plan === "string") return { reason: plan };
    const names = freshNames(g);
    const slice = new Writer().msg(GRAPH.node, (n) => {
      for (const i of [plan.hidden, names.starts, names.ends, names.axes]) n.str(NODE.input, i);
      n.str(NODE.output, names.sliced).str(NODE.name, `${names.sliced}/Slice`).str(NODE.opType, "Slice");
    }).bytes;
    const head = renamedFirstInput(r.bytes(plan.head.start, plan.head.end - plan.head.start), names.sliced);
    const inits = new Writer();
    int64Initializer(inits, names.starts, -1n);
    int64Initializer(inits, names.ends, 9223372036854775807n);
    int64Initializer(inits, names.axes, 1n);
    const { tagStart, from, to } = g.graph;
    const bodyLength = to - from - (plan.head.end - plan.head.start) + slice.length + head.length + inits.bytes.length;

    dir = mkdtempSync(join(tmpdir(), "infinity-logits-"));
    const path = join(dir, basename(source));
    const out = openSync(path, "w");
    try {
      copyRange(fd, out, 0, tagStart);
      writeSync(out, Uint8Array.from([...varintBytes(MODEL.graph * 8 + 2), ...varintBytes(bodyLength)]));
      copyRange(fd, out, from, plan.head.start);
      writeSync(out, Uint8Array.from(slice));
      writeSync(out, head);
      copyRange(fd, out, plan.head.end, to);
      writeSync(out, Uint8Array.from(inits.bytes));
      copyRange(fd, out, to, g.size);
    } finally {
      closeSync(out);
    }
    const folder = dir;
    made.add(folder);
    if (!exitHook) {
      exitHook = true;
      process.once("exit", () => {
        for (const d of made) rmSync(d, { recursive: true, force: true });
      });
    }
    return {
      path,
      externalDataDir: dirname(resolve(source)),
      head: plan.head.name || plan.head.outputs[0]!,
      remove: () => {
        made.delete(folder);
        rmSync(folder, { recursive: true, force: true });
      },
    };
  } catch (e) {
    if (dir) rmSync(dir, { recursive: true, force: true });
    return { reason: `${source} could not be rewritten: ${(e as Error).message}` };
  } finally {
    closeSync(fd);
  }
}
