// Per-tower graphs of a combined multimodal export (jina-clip-v2's onnx/model.onnx: input_ids + pixel_values ->
// text_embeddings, image_embeddings and their l2norm_ variants), so that each tower runs alone: onnxruntime runs
// every node of a graph whatever outputs are asked for, and through the combined graph each text batch would also
// run the vision tower on a dummy image (EVA02-L on 512x512 for jina-clip-v2). pruneOnnxGraph keeps what the wanted
// outputs need (nodes, including names their If/Loop subgraphs read from around them, initializers, graph inputs,
// value infos) and copies every other record byte for byte; weights are copied in chunks, never held whole, and
// external data is read from the export's folder (SessionSettings.externalDataDir).
import { closeSync, fstatSync, openSync, writeSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { FileReader, ONNX, copyRange, eachField, fieldsOf, stringsOf, varintBytes, type Field } from "./protobuf";
import { scratchFolder, type Removable } from "./scratch";

// onnx.proto3 field numbers.
const { MODEL, GRAPH, NODE, ATTRIBUTE, TENSOR, VALUE_INFO } = ONNX;

/** A record of the graph: its field, byte range (tag included), the names it makes or is, the names it reads. */
interface GraphRecord { field: number; start: number; end: number; names: string[]; reads: string[] }

/** The names a node reads: its inputs, and those its subgraph attributes read (a subgraph may read outer names). */
function nodeReads(node: readonly Field[], into: string[]): void {
  into.push(...stringsOf(node, NODE.input));
  for (const a of node) {
    if (a.field !== NODE.attribute || a.wire !== 2) continue;
    for (const g of fieldsOf(a.bytes)) {
      if ((g.field !== ATTRIBUTE.graph && g.field !== ATTRIBUTE.graphs) || g.wire !== 2) continue;
      for (const n of fieldsOf(g.bytes)) if (n.field === GRAPH.node && n.wire === 2) nodeReads(fieldsOf(n.bytes), into);
    }
  }
}

/**
 * Writes to `outPath` the graph of `path` cut down to what `outputs` need: the nodes they depend on, the
 * initializers, graph inputs and value infos those nodes read, and only `outputs` as graph outputs. Returns the graph
 * inputs kept. Throws on what it does not handle (sparse initializers, an output no node or input makes).
 */
export function pruneOnnxGraph(path: string, outputs: readonly string[], outPath: string): string[] {
  const fd = openSync(path, "r");
  try {
    const r = new FileReader(fd);
    const size = fstatSync(fd).size;
    let graph: { tagStart: number; from: number; to: number } | null = null;
    eachField(r, 0, size, (field, from, to, tagStart) => {
      if (field === MODEL.graph) graph = { tagStart, from, to };
    });
    if (!graph) throw new Error("no graph");
    const { tagStart, from, to } = graph as { tagStart: number; from: number; to: number };
    const records: GraphRecord[] = [];
    let covered = from;
    eachField(r, from, to, (field, fFrom, fTo, fTag) => {
      if (fTag !== covered) throw new Error(`graph field ${field}: only length-delimited fields expected`);
      covered = fTo;
      const rec: GraphRecord = { field, start: fTag, end: fTo, names: [], reads: [] };
      if (field === GRAPH.sparseInitializer) throw new Error("sparse initializers are not handled");
      if (field === GRAPH.node) {
        // A node's attributes may hold a Constant's tensor: read whole, nodes are small next to initializers.
        const node = fieldsOf(r.bytes(fFrom, fTo - fFrom));
        rec.names = stringsOf(node, NODE.output);
        nodeReads(node, rec.reads);
      } else if (field === GRAPH.initializer) {
        // Inline weights: read only the name.
        eachField(r, fFrom, fTo, (t, tFrom, tTo) => {
          if (t === TENSOR.name) rec.names = [r.bytes(tFrom, tTo - tFrom).toString("utf8")];
        });
      } else if (field === GRAPH.input || field === GRAPH.output || field === GRAPH.valueInfo) {
        rec.names = stringsOf(fieldsOf(r.bytes(fFrom, fTo - fFrom)), VALUE_INFO.name).slice(0, 1);
      }
      records.push(rec);
    });
    if (covered !== to) throw new Error("only length-delimited graph fields expected");

    const producer = new Map<string, GraphRecord>();
    for (const rec of records) if (rec.field === GRAPH.node) for (const n of rec.names) producer.set(n, rec);
    const sources = new Set(records.filter((x) => x.field === GRAPH.initializer || x.field === GRAPH.input).flatMap((x) => x.names));
    const needed = new Set<string>();
    const nodes = new Set<GraphRecord>();
    const todo = [...outputs];
    for (const o of outputs) if (!producer.has(o) && !sources.has(o)) throw new Error(`no node or input makes the output ${o}`);
    while (todo.length) {
      const name = todo.pop()!;
      if (!name || needed.has(name)) continue;
      needed.add(name);
      const node = producer.get(name);
      if (node && !nodes.has(node)) {
        nodes.add(node);
        todo.push(...node.reads);
      }
    }
    const kept = records.filter((x) => {
      switch (x.field) {
        case GRAPH.node: return nodes.has(x);
        case GRAPH.initializer: case GRAPH.input: case GRAPH.valueInfo: return needed.has(x.names[0] ?? "");
        case GRAPH.output: return outputs.includes(x.names[0] ?? "");
        default: return true; // name, doc string, quantization annotations, metadata
      }
    });
    const bodyLength = kept.reduce((n, x) => n + x.end - x.start, 0);
    const out = openSync(outPath, "w");
    try {
      copyRange(fd, out, 0, tagStart);
      writeSync(out, Uint8Array.from([...varintBytes(MODEL.graph * 8 + 2), ...varintBytes(bodyLength)]));
      for (const x of kept) copyRange(fd, out, x.start, x.end);
      copyRange(fd, out, to, size);
    } finally {
      closeSync(out);
    }
    return kept.filter((x) => x.field === GRAPH.input).map((x) => x.names[0]!);
  } finally {
    closeSync(fd);
  }
}

/** The towers of a combined export as graphs of their own, in a temporary folder (removed with the model). */
export interface SplitTowers extends Removable {
  /** Graph of the text tower: its inputs and the text output only. */
  text: string;
  /** Graph of the media tower: its input and the media output only. */
  media: string;
  /** The export's folder, where its external data files are (SessionSettings.externalDataDir). */
  externalDataDir: string;
}

/** Writes the two towers of `onnxPath` as graphs of their own; throws when the graph cannot be split. */
export function splitCombinedExport(onnxPath: string, textOutput: string, mediaOutput: string): SplitTowers {
  const folder = scratchFolder("infinity-towers-");
  try {
    const stem = basename(onnxPath, ".onnx");
    const text = join(folder.dir, `${stem}.text.onnx`);
    const media = join(folder.dir, `${stem}.media.onnx`);
    pruneOnnxGraph(onnxPath, [textOutput], text);
    pruneOnnxGraph(onnxPath, [mediaOutput], media);
    return { text, media, externalDataDir: dirname(resolve(onnxPath)), remove: folder.remove };
  } catch (e) {
    folder.remove();
    throw e;
  }
}
