// LLM rerankers score from the logits at the last position only, but a causal-LM export without a
// num_logits_to_keep input (onnx-community's Qwen3-Reranker) computes the full-vocabulary logits of every position:
// [batch, seq, vocab] float32, 606,676 bytes per token for Qwen3's 151,669 tokens (4.97 GB for one 8,192-token
// input) and as many lm_head products. At load the graph is rewritten so the lm_head reads only the last position:
// a Slice of the hidden state [batch, seq, hidden] -> [batch, 1, hidden] goes in front of the lm_head MatMul, and the
// output becomes [batch, 1, vocab] whatever the length; for a MatMul lm_head, a Gather of the weight's columns for the
// tokens read (no, yes) makes it [batch, 1, 2], and onnxruntime folds the Gather into a [hidden, 2] constant at load,
// so the vocab x hidden weight is dropped (measured on a 151,669 x 64 model: session 103 -> 66 MB RSS). Decoder
// rerankers pad on the left, so the last position is every row's last real token. The rewrite is made only where the graph has the expected shape (a MatMul /
// MatMulNBits of the hidden state with a constant weight, then only Cast / Identity up to the output); anything else
// keeps the graph as it is, with the reason returned for the load log. Only the small records are read and
// re-encoded: the weights are copied byte for byte into a temporary file, and external data (model.onnx_data) is
// read from the source folder (SessionSettings.externalDataDir).
import { closeSync, fstatSync, openSync, writeSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { FileReader, ONNX, Writer, copyRange, eachField, fieldsOf, stringsOf, varintBytes, type Field } from "./protobuf";
import { scratchFolder, type Removable } from "./scratch";

const { MODEL, GRAPH, NODE, TENSOR, OPSET, ATTRIBUTE } = ONNX;

/** Inputs through which a decoder export returns only the last positions' logits (the server feeds 1). */
export const KEEP_LOGITS_INPUTS: readonly string[] = ["num_logits_to_keep", "logits_to_keep"];

/** The nodes a constant weight may pass through on its way to the lm_head (tied embeddings are transposed). */
const WEIGHT_OPS = new Set(["Transpose", "Identity", "Cast", "DequantizeLinear", "Constant"]);
/** Ops between the lm_head and the logits output that act on each position alone. */
const POSITIONWISE_OPS = new Set(["Cast", "Identity"]);

export interface GraphNode {
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
  /** Byte range of each graph output's ValueInfoProto field (tag included). */
  outputRecords: Map<string, { start: number; end: number }>;
  /** Byte range of the ModelProto.graph field: [tagStart, from) is its tag and length, [from, to) its body. */
  graph: { tagStart: number; from: number; to: number };
  size: number;
}

export function readSummary(r: FileReader, size: number): GraphSummary {
  const summary: GraphSummary = { opset: 0, nodes: [], initializers: new Set(), inputs: [], outputs: [], outputRecords: new Map(), graph: { tagStart: -1, from: 0, to: 0 }, size };
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
        if (g === GRAPH.output) summary.outputRecords.set(name, { start: gTag, end: gTo });
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
  /** A MatMul's weight input (its columns can be gathered); null for MatMulNBits (packed). */
  weight: string | null;
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
    return { head: node, hidden: node.inputs[0], weight: matmul ? node.inputs[1] : null };
  }
}

/** Names the rewrite adds; made unique against the graph's own. */
const NEW_NAMES = ["starts", "ends", "axes", "hidden", "columns", "weight"] as const;

function freshNames(g: GraphSummary): Record<(typeof NEW_NAMES)[number], string> {
  const taken = new Set<string>([...g.initializers, ...g.inputs, ...g.outputs, ...g.nodes.flatMap((n) => [...n.inputs, ...n.outputs])]);
  let prefix = "infinity/last_position";
  for (let i = 2; NEW_NAMES.some((s) => taken.has(`${prefix}/${s}`)); i++) prefix = `infinity/last_position_${i}`;
  return Object.fromEntries(NEW_NAMES.map((n) => [n, `${prefix}/${n}`])) as Record<(typeof NEW_NAMES)[number], string>;
}

/** A 1-D int64 initializer, written raw (little-endian). */
function int64Initializer(w: Writer, name: string, values: readonly bigint[]): void {
  const raw = new Uint8Array(8 * values.length);
  values.forEach((v, i) => new DataView(raw.buffer).setBigInt64(8 * i, v, true));
  w.msg(GRAPH.initializer, (t) => t.int(TENSOR.dims, values.length).int(TENSOR.dataType, ONNX.DATA_TYPE.int64).str(TENSOR.name, name).raw(TENSOR.rawData, raw));
}

/** The head node's record with inputs renamed by position; every other field as it was. */
function renamedInputs(record: Uint8Array, renames: ReadonlyMap<number, string>): Uint8Array {
  const body = fieldsOf(fieldsOf(record)[0]!.bytes);
  const w = new Writer();
  let input = 0;
  for (const f of body as Field[]) {
    const rename = f.field === NODE.input && f.wire === 2 ? renames.get(input++) : undefined;
    if (rename !== undefined) w.str(NODE.input, rename);
    else w.append(f.raw);
  }
  return Uint8Array.from(new Writer().raw(GRAPH.node, w.bytes).bytes);
}

/** The output's ValueInfoProto with its last axis declared `size` long (the gathered columns); the rest as it was. */
function withLastDim(record: Uint8Array, size: number): Uint8Array {
  // ValueInfoProto.type (2) { TypeProto.tensor_type (1) { shape (2) { dim (1) { dim_value (1) } } } }
  const rewrite = (bytes: Uint8Array, path: readonly number[]): Writer => {
    const w = new Writer();
    const fields = fieldsOf(bytes);
    const last = path.length ? -1 : fields.map((f) => f.field).lastIndexOf(1);
    fields.forEach((f, i) => {
      if (path.length && f.field === path[0] && f.wire === 2) w.raw(f.field, rewrite(f.bytes, path.slice(1)).bytes);
      else if (!path.length && i === last) w.msg(1, (d) => d.int(1, size));
      else w.append(f.raw);
    });
    return w;
  };
  return Uint8Array.from(new Writer().raw(GRAPH.output, rewrite(fieldsOf(record)[0]!.bytes, [2, 1, 2]).bytes).bytes);
}

/** A graph record (tag included) replaced by other bytes: a node by the nodes that take its place. */
export interface Replacement {
  start: number;
  end: number;
  bytes: Uint8Array;
}

/**
 * Writes the model of `fd` (summarised by `g`) to `path` with the records `replaced` (sorted by start, not
 * overlapping) swapped for their bytes and `appended` (encoded graph fields: initializers) added at the end of the
 * graph; every other byte is copied as it was, in chunks.
 */
export function writeRewrittenGraph(fd: number, g: GraphSummary, replaced: readonly Replacement[], appended: ArrayLike<number>, path: string): void {
  const { tagStart, from, to } = g.graph;
  const bodyLength = to - from + appended.length + replaced.reduce((n, x) => n + x.bytes.length - (x.end - x.start), 0);
  const out = openSync(path, "w");
  try {
    copyRange(fd, out, 0, tagStart);
    writeSync(out, Uint8Array.from([...varintBytes(MODEL.graph * 8 + 2), ...varintBytes(bodyLength)]));
    let pos = from;
    for (const x of replaced) {
      copyRange(fd, out, pos, x.start);
      writeSync(out, x.bytes);
      pos = x.end;
    }
    copyRange(fd, out, pos, to);
    writeSync(out, Uint8Array.from(appended));
    copyRange(fd, out, to, g.size);
  } finally {
    closeSync(out);
  }
}

/** What a rewrite is given: the open file, its summary, and a way to write the rewritten graph. */
export interface GraphRewrite {
  r: FileReader;
  fd: number;
  g: GraphSummary;
  /** Writes the rewritten graph (writeRewrittenGraph) into a new temporary folder, removed if the rewrite fails. */
  write(prefix: string, replaced: readonly Replacement[], appended: ArrayLike<number>): { path: string; remove(): void };
}

/**
 * Opens `source`, reads its summary and runs `rewrite`; a file that cannot be opened or an error on the way (its
 * temporary folder removed) comes back as the reason.
 */
export function rewriteGraphFile<T>(source: string, rewrite: (x: GraphRewrite) => T): T | { reason: string } {
  let fd: number;
  try {
    fd = openSync(source, "r");
  } catch (e) {
    return { reason: `cannot open ${source}: ${(e as Error).message}` };
  }
  let folder: Removable | null = null;
  try {
    const r = new FileReader(fd);
    const g = readSummary(r, fstatSync(fd).size);
    return rewrite({
      r,
      fd,
      g,
      write: (prefix, replaced, appended) => {
        const scratch = scratchFolder(prefix);
        folder = scratch;
        const path = join(scratch.dir, basename(source));
        writeRewrittenGraph(fd, g, replaced, appended, path);
        return { path, remove: scratch.remove };
      },
    });
  } catch (e) {
    (folder as Removable | null)?.remove();
    return { reason: `${source} could not be rewritten: ${(e as Error).message}` };
  } finally {
    closeSync(fd);
  }
}

/** The rewritten graph: a file in a temporary folder. */
export interface LastPositionGraph {
  path: string;
  /**
   * The vocabulary ids of the output's last axis, in order, when only those columns of the lm_head are computed
   * ([batch, 1, columns.length]); null: the whole vocabulary ([batch, 1, vocab]).
   */
  columns: number[] | null;
  /** The source graph's folder, where its external data files are (SessionSettings.externalDataDir). */
  externalDataDir: string;
  /** The lm_head node the Slice was put in front of. */
  head: string;
  /** Removes the temporary folder (the session has read the graph; a replacement worker needs it until then). */
  remove(): void;
}

/**
 * Writes `source` with the hidden state sliced to the last position before the lm_head that computes `output`,
 * into a new temporary folder, or returns why the graph was left as it is. With `columns` (vocabulary ids), a MatMul
 * lm_head multiplies by those columns of its weight only (a Gather onnxruntime folds into a small constant at load,
 * so the full weight is not kept when nothing else reads it).
 */
export function lastPositionGraph(source: string, output = "logits", columns?: readonly number[]): LastPositionGraph | { reason: string } | { kept: string } {
  return rewriteGraphFile<LastPositionGraph | { reason: string } | { kept: string }>(source, ({ r, g, write }) => {
    // Such an export is fed 1 and already computes one position.
    const keep = g.inputs.find((i) => KEEP_LOGITS_INPUTS.includes(i));
    if (keep) return { kept: keep };
    const plan = planLastPosition(g, output);
    if (typeof plan === "string") return { reason: plan };
    const names = freshNames(g);
    const gather = columns?.length && plan.weight ? plan.weight : null;
    const added = new Writer().msg(GRAPH.node, (n) => {
      for (const i of [plan.hidden, names.starts, names.ends, names.axes]) n.str(NODE.input, i);
      n.str(NODE.output, names.hidden).str(NODE.name, `${names.hidden}/Slice`).str(NODE.opType, "Slice");
    });
    if (gather) {
      added.msg(GRAPH.node, (n) => {
        n.str(NODE.input, gather).str(NODE.input, names.columns).str(NODE.output, names.weight).str(NODE.name, `${names.weight}/Gather`).str(NODE.opType, "Gather");
        // axis -1 (the vocabulary): a negative int64 is ten varint bytes
        n.msg(NODE.attribute, (a) => a.str(ATTRIBUTE.name, "axis").varint(ATTRIBUTE.i * 8).append([255, 255, 255, 255, 255, 255, 255, 255, 255, 1]).int(ATTRIBUTE.type, ONNX.ATTRIBUTE_TYPE.int));
      });
    }
    const renames = new Map<number, string>([[0, names.hidden], ...(gather ? [[1, names.weight] as [number, string]] : [])]);
    const head = renamedInputs(r.bytes(plan.head.start, plan.head.end - plan.head.start), renames);
    const inits = new Writer();
    int64Initializer(inits, names.starts, [-1n]);
    int64Initializer(inits, names.ends, [9223372036854775807n]);
    int64Initializer(inits, names.axes, [1n]);
    if (gather) int64Initializer(inits, names.columns, columns!.map((c) => BigInt(c)));
    // The records replaced, in file order: the head node (the new nodes go in front of it), the output's shape.
    const out0 = g.outputRecords.get(output)!;
    const replaced = [
      { start: plan.head.start, end: plan.head.end, bytes: Uint8Array.from([...added.bytes, ...head]) },
      ...(gather ? [{ start: out0.start, end: out0.end, bytes: withLastDim(r.bytes(out0.start, out0.end - out0.start), columns!.length) }] : []),
    ].sort((a, b) => a.start - b.start);
    const { path, remove } = write("infinity-logits-", replaced, inits.bytes);
    return {
      path,
      externalDataDir: dirname(resolve(source)),
      columns: gather ? [...columns!] : null,
      head: plan.head.name || plan.head.outputs[0]!,
      remove,
    };
  });
}
