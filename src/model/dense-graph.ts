// sentence-transformers Dense modules as a small ONNX graph of their own, so that onnxruntime applies them to every
// token vector of a ColBERT export whose graph stops at the token states (PyLate's 1_Dense): the inference worker
// runs it on that output right after the model (session.ts, SessionHead). In JavaScript the 384 -> 128 projection of
// a 2 x 180-token batch took ~10-15 ms of the main thread; onnxruntime's MatMul takes ~1 ms in the worker
// (bench/projection.ts, bench/README.md). The graph is written here with a few lines of protobuf encoding
// (onnx.proto3 field numbers), as prime.ts's identity graph is, instead of a build-time dependency.
import type { DenseLayer } from "./dense";
import { Writer } from "./protobuf";

// onnx.proto3 field numbers.
const MODEL = { irVersion: 1, opsetImport: 8, graph: 7 } as const;
const GRAPH = { node: 1, name: 2, initializer: 5, input: 11, output: 12 } as const;
const NODE = { input: 1, output: 2, opType: 4 } as const;
const TENSOR = { dims: 1, dataType: 2, name: 8, rawData: 9 } as const;
const FLOAT = 1;
const OPSET = 17;
const IR_VERSION = 8;

/** ValueInfoProto of a float tensor: TypeProto.tensor_type (1) { elem_type (1), shape (2) { dim (1) { value (1) | param (2) } } }. */
function floatValue(w: Writer, field: number, name: string, shape: readonly (number | string)[]): void {
  w.msg(field, (v) => {
    v.str(1, name);
    v.msg(2, (t) => t.msg(1, (tt) => {
      tt.int(1, FLOAT);
      tt.msg(2, (s) => shape.forEach((d) => s.msg(1, (dim) => (typeof d === "number" ? dim.int(1, d) : dim.str(2, d)))));
    }));
  });
}

function initializer(w: Writer, name: string, dims: readonly number[], data: Float32Array): void {
  w.msg(GRAPH.initializer, (t) => {
    for (const d of dims) t.int(TENSOR.dims, d);
    t.int(TENSOR.dataType, FLOAT).str(TENSOR.name, name);
    // raw_data is little-endian float32, which is how a Float32Array lies in memory on the platforms onnxruntime ships for.
    t.raw(TENSOR.rawData, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  });
}

function node(w: Writer, op: string, inputs: readonly string[], output: string): void {
  w.msg(GRAPH.node, (n) => {
    for (const i of inputs) n.str(NODE.input, i);
    n.str(NODE.output, output).str(NODE.opType, op);
  });
}

/** torch's [out, in] weight as the [in, out] right operand of MatMul. */
function transposed(weight: Float32Array, outs: number, ins: number): Float32Array {
  const t = new Float32Array(weight.length);
  for (let j = 0; j < outs; j++) for (let c = 0; c < ins; c++) t[c * outs + j] = weight[j * ins + c]!;
  return t;
}

const ACTIVATION_OPS = { tanh: "Tanh", relu: "Relu", sigmoid: "Sigmoid" } as const;

/**
 * The graph y = Dense_n(...Dense_1(x)) over the last axis of x [batch, tokens, in]: per layer MatMul with the
 * transposed weight, Add of the bias, the activation, and the residual (the layer's input, or its projection)
 * added, as sentence-transformers' Dense.forward computes it.
 */
export function denseGraph(layers: readonly DenseLayer[]): Uint8Array {
  if (!layers.length) throw new Error("denseGraph needs at least one Dense layer");
  return headGraph([{ name: "y", layers }]);
}

/**
 * One graph with several outputs, each its own chain of Dense layers over the same x [batch, tokens, in] (bge-m3's
 * sparse and ColBERT heads over the token states: one run of the head session gives whichever are fetched).
 */
export function headGraph(outputs: ReadonlyArray<{ name: string; layers: readonly DenseLayer[] }>): Uint8Array {
  if (!outputs.length || outputs.some((o) => !o.layers.length)) throw new Error("headGraph needs at least one output of at least one layer");
  const inFeatures = outputs[0]!.layers[0]!.inFeatures;
  if (outputs.some((o) => o.layers[0]!.inFeatures !== inFeatures)) throw new Error("headGraph: the outputs read inputs of different sizes");
  const graph = new Writer();
  for (const { name, layers } of outputs) {
    let x = "x";
    layers.forEach((l, i) => {
      const p = `${name}.${i}`;
      initializer(graph, `${p}.w`, [l.inFeatures, l.outFeatures], transposed(l.weight, l.outFeatures, l.inFeatures));
      let y = `${p}.matmul`;
      node(graph, "MatMul", [x, `${p}.w`], y);
      if (l.bias) {
        initializer(graph, `${p}.b`, [l.outFeatures], l.bias);
        node(graph, "Add", [y, `${p}.b`], `${p}.bias`);
        y = `${p}.bias`;
      }
      if (l.activation !== "identity") {
        node(graph, ACTIVATION_OPS[l.activation], [y], `${p}.act`);
        y = `${p}.act`;
      }
      if (l.residual) {
        let r = x;
        if (l.residual !== "identity") {
          initializer(graph, `${p}.r`, [l.inFeatures, l.outFeatures], transposed(l.residual, l.outFeatures, l.inFeatures));
          node(graph, "MatMul", [x, `${p}.r`], `${p}.residual`);
          r = `${p}.residual`;
        }
        node(graph, "Add", [y, r], `${p}.out`);
        y = `${p}.out`;
      }
      x = y;
    });
    node(graph, "Identity", [x], name);
  }
  graph.str(GRAPH.name, "head");
  floatValue(graph, GRAPH.input, "x", ["batch", "tokens", inFeatures]);
  for (const { name, layers } of outputs) floatValue(graph, GRAPH.output, name, ["batch", "tokens", layers[layers.length - 1]!.outFeatures]);
  const model = new Writer().int(MODEL.irVersion, IR_VERSION);
  model.msg(MODEL.opsetImport, (o) => o.int(2, OPSET));
  model.raw(MODEL.graph, graph.bytes);
  return Uint8Array.from(model.bytes);
}
