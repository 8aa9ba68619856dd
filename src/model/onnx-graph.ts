// Reads the names of an ONNX file's graph outputs without onnxruntime: the layout needs them before a session exists
// (bge-m3 exports are told apart by their outputs); and the external data files its tensors name, which the hub
// download must fetch beside it. Walks the protobuf framing and reads only the small records it needs; the weights
// (initializers, often hundreds of MB) are skipped by seeking, never read.
import { closeSync, openSync, fstatSync } from "node:fs";
import { ModelLoadError } from "../errors";
import { FileReader, eachField, fieldsOf, stringsOf } from "./protobuf";

/** ModelProto.graph = 7; GraphProto.output = 12; ValueInfoProto.name = 1 (onnx.proto3). */
const MODEL_GRAPH = 7;
const GRAPH_OUTPUT = 12;
const VALUE_INFO_NAME = 1;
/** GraphProto.node = 1, .initializer = 5; NodeProto.attribute = 5; AttributeProto.t = 5, .g = 6, .tensors = 8, .graphs = 11. */
const GRAPH_NODE = 1;
const GRAPH_INITIALIZER = 5;
const NODE_ATTRIBUTE = 5;
const ATTRIBUTE = { tensor: 5, graph: 6, tensors: 8, graphs: 11 } as const;
/** TensorProto.external_data = 13: StringStringEntryProto { key = 1, value = 2 }. */
const TENSOR_EXTERNAL_DATA = 13;

/** Calls visit(reader, graphStart, graphEnd) on the main graph of an ONNX file, with errors naming the file. */
function readGraph<T>(path: string, visit: (r: FileReader, from: number, to: number) => T): T {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    throw new ModelLoadError(`cannot open ${path}: ${(e as Error).message}`);
  }
  try {
    const r = new FileReader(fd);
    let result: T | undefined;
    eachField(r, 0, fstatSync(fd).size, (field, from, to) => {
      if (field === MODEL_GRAPH) result = visit(r, from, to);
    });
    return result === undefined ? visit(r, 0, 0) : result;
  } catch (e) {
    throw new ModelLoadError(`${path} is not a readable ONNX model: ${(e as Error).message}`);
  } finally {
    closeSync(fd);
  }
}

/** Names of the graph outputs of an ONNX file, in order. */
export function onnxOutputNames(path: string): string[] {
  return readGraph(path, (r, from, to) => {
    const names: string[] = [];
    eachField(r, from, to, (gField, gFrom, gTo) => {
      if (gField !== GRAPH_OUTPUT) return;
      // A ValueInfoProto is small (name, type, doc string): read it whole.
      names.push(fieldString(r.bytes(gFrom, gTo - gFrom), VALUE_INFO_NAME));
    });
    return names;
  });
}

/**
 * The external data files (paths relative to the ONNX file's folder) that the tensors of an ONNX file name:
 * initializers and node attributes (Constant values: BAAI/bge-m3's onnx/Constant_7_attr__value), subgraphs included.
 */
export function onnxExternalDataFiles(path: string): string[] {
  return readGraph(path, (r, from, to) => {
    const files = new Set<string>();
    const tensor = (tFrom: number, tTo: number) =>
      eachField(r, tFrom, tTo, (f, eFrom, eTo) => {
        if (f !== TENSOR_EXTERNAL_DATA) return;
        const entry = r.bytes(eFrom, eTo - eFrom);
        if (fieldString(entry, 1) === "location") files.add(fieldString(entry, 2));
      });
    const graph = (gFrom: number, gTo: number): void =>
      eachField(r, gFrom, gTo, (f, nFrom, nTo) => {
        if (f === GRAPH_INITIALIZER) tensor(nFrom, nTo);
        else if (f === GRAPH_NODE) {
          eachField(r, nFrom, nTo, (nf, aFrom, aTo) => {
            if (nf !== NODE_ATTRIBUTE) return;
            eachField(r, aFrom, aTo, (af, vFrom, vTo) => {
              if (af === ATTRIBUTE.tensor || af === ATTRIBUTE.tensors) tensor(vFrom, vTo);
              else if (af === ATTRIBUTE.graph || af === ATTRIBUTE.graphs) graph(vFrom, vTo);
            });
          });
        }
      });
    graph(from, to);
    return [...files];
  });
}

/** The first string (length-delimited) field with this number of an encoded message, or "". */
function fieldString(buf: Uint8Array, wanted: number): string {
  return stringsOf(fieldsOf(buf), wanted)[0] ?? "";
}

/** Output names of per-token states in embedder exports (optimum: last_hidden_state; sentence-transformers: token_embeddings). */
export const TOKEN_STATE_OUTPUTS = ["last_hidden_state", "token_embeddings"] as const;

/** The export's per-token output, or null when it has none (an export with only pooled sentence_embedding). */
export function tokenStatesOutput(names: readonly string[]): string | null {
  return TOKEN_STATE_OUTPUTS.find((n) => names.includes(n)) ?? null;
}
