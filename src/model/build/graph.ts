// An ONNX graph under construction: nodes, inputs, outputs and weights. Weights go to an external data file as they
// are added (so a model over 2 GB, protobuf's limit, builds, and the builder never holds all weights at once); the
// graph itself is encoded with onnx-proto (onnx.proto compiled for protobufjs).
import { closeSync, openSync, writeFileSync, writeSync } from "node:fs";
import { basename } from "node:path";
import { onnx } from "onnx-proto";

export type Dim = number | string;
/** Attribute values: a number is an int; floats are written f(x). */
type AttrValue = number | string | number[] | { f: number } | { floats: number[] } | { tensor: onnx.ITensorProto };

const FLOAT = onnx.TensorProto.DataType.FLOAT;
const INT64 = onnx.TensorProto.DataType.INT64;
const INT32 = onnx.TensorProto.DataType.INT32;
const INT8 = onnx.TensorProto.DataType.INT8;
const UINT8 = onnx.TensorProto.DataType.UINT8;
const FLOAT16 = onnx.TensorProto.DataType.FLOAT16;
export const ElemType = { float: FLOAT, int64: INT64, int32: INT32, int8: INT8, uint8: UINT8, float16: FLOAT16 } as const;

/** Tensors at least this large go to the data file page-aligned, so onnxruntime can map them. */
const ALIGN_LARGE = 4096;
const ALIGN = 64;
const MS_DOMAIN = "com.microsoft";

export class Graph {
  private readonly nodes: onnx.INodeProto[] = [];
  private readonly initializers: onnx.ITensorProto[] = [];
  private readonly inputs: onnx.IValueInfoProto[] = [];
  private readonly outputs: onnx.IValueInfoProto[] = [];
  private readonly names = new Map<string, number>();
  private readonly fd: number;
  private offset = 0;
  private usesMs = false;

  /** `dataPath`: the external data file, written beside the graph file. */
  constructor(private readonly dataPath: string) {
    this.fd = openSync(dataPath, "w");
  }

  /** A fresh tensor name from a stem. */
  name(stem: string): string {
    const n = this.names.get(stem) ?? 0;
    this.names.set(stem, n + 1);
    return n ? `${stem}_${n}` : stem;
  }

  input(name: string, elem: number, dims: Dim[]): string {
    this.inputs.push(valueInfo(name, elem, dims));
    return name;
  }

  /** Declares `value` a graph output named `name` (an Identity when the names differ). */
  output(value: string, name: string, elem: number, dims: Dim[]): void {
    if (value !== name) this.nodes.push({ opType: "Identity", input: [value], output: [name], name: this.name(`out_${name}`) });
    this.outputs.push(valueInfo(name, elem, dims));
  }

  /** One node with one output; `domain` "ms" for onnxruntime's contrib operators. Returns the output's name. */
  op(opType: string, inputs: string[], attrs: Record<string, AttrValue> = {}, domain: "" | "ms" = ""): string {
    return this.opN(opType, inputs, 1, attrs, domain)[0]!;
  }

  /** One node with `outputs` outputs. */
  opN(opType: string, inputs: string[], outputs: number, attrs: Record<string, AttrValue> = {}, domain: "" | "ms" = ""): string[] {
    const name = this.name(opType);
    const out = Array.from({ length: outputs }, (_, i) => (i ? `${name}_out${i}` : `${name}_out`));
    if (domain === "ms") this.usesMs = true;
    this.nodes.push({ opType, input: inputs, output: out, name, domain: domain === "ms" ? MS_DOMAIN : "", attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)) });
    return out;
  }

  /** A weight, written to the data file now. */
  weight(stem: string, data: Float32Array | Int8Array | Uint8Array | Uint16Array, dims: number[], elem: number = FLOAT): string {
    const name = this.name(stem);
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const align = bytes.byteLength >= ALIGN_LARGE ? ALIGN_LARGE : ALIGN;
    const pad = (align - (this.offset % align)) % align;
    if (pad) writeSync(this.fd, new Uint8Array(pad));
    this.offset += pad;
    let done = 0;
    while (done < bytes.byteLength) done += writeSync(this.fd, bytes, done, bytes.byteLength - done);
    this.initializers.push({
      name,
      dims,
      dataType: elem,
      dataLocation: onnx.TensorProto.DataLocation.EXTERNAL,
      externalData: [
        { key: "location", value: basename(this.dataPath) },
        { key: "offset", value: String(this.offset) },
        { key: "length", value: String(bytes.byteLength) },
      ],
    });
    this.offset += bytes.byteLength;
    return name;
  }

  /** A small constant held in the graph file. */
  constFloat(values: number[] | number, dims?: number[]): string {
    const v = typeof values === "number" ? [values] : values;
    const name = this.name("c");
    this.initializers.push({ name, dims: dims ?? (typeof values === "number" ? [] : [v.length]), dataType: FLOAT, floatData: v });
    return name;
  }

  constInt(values: number[] | number, dims?: number[]): string {
    const v = typeof values === "number" ? [values] : values;
    const name = this.name("i");
    this.initializers.push({ name, dims: dims ?? (typeof values === "number" ? [] : [v.length]), dataType: INT64, int64Data: v });
    return name;
  }

  /** Closes the data file and writes the graph file. */
  write(path: string, producer: string): void {
    closeSync(this.fd);
    const opsets: onnx.IOperatorSetIdProto[] = [{ domain: "", version: 21 }];
    if (this.usesMs) opsets.push({ domain: MS_DOMAIN, version: 1 });
    const model = onnx.ModelProto.create({
      irVersion: 8,
      producerName: producer,
      opsetImport: opsets,
      graph: { name: "main", node: this.nodes, initializer: this.initializers, input: this.inputs, output: this.outputs },
    });
    writeFileSync(path, onnx.ModelProto.encode(model).finish());
  }

  /** Closes the data file without writing a graph (a failed build). */
  abandon(): void {
    try {
      closeSync(this.fd);
    } catch {
      /* already closed */
    }
  }
}

function valueInfo(name: string, elem: number, dims: Dim[]): onnx.IValueInfoProto {
  return {
    name,
    type: { tensorType: { elemType: elem, shape: { dim: dims.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d })) } } },
  };
}

function attribute(name: string, v: AttrValue): onnx.IAttributeProto {
  const T = onnx.AttributeProto.AttributeType;
  if (typeof v === "number") return { name, type: T.INT, i: v };
  if (typeof v === "string") return { name, type: T.STRING, s: new TextEncoder().encode(v) };
  if (Array.isArray(v)) return { name, type: T.INTS, ints: v };
  if ("f" in v) return { name, type: T.FLOAT, f: v.f };
  if ("floats" in v) return { name, type: T.FLOATS, floats: v.floats };
  return { name, type: T.TENSOR, t: v.tensor };
}

/** A float attribute (a bare number is an int attribute). */
export function f(v: number): { f: number } {
  return { f: v };
}
