// Dynamically quantized exports (onnxruntime quantize_dynamic, optimum, Xenova's model_quantized.onnx) quantize each
// activation with a DynamicQuantizeLinear: ONE scale and zero point from the min and max of the whole tensor,
// [batch, seq, hidden], padding included, which then feed MatMulInteger. So an input's vector depends on the other
// inputs of its batch (measured on the bench int8 model: a query alone vs batched with a longer passage, cosine
// 0.99927). At load the graph is rewritten so each DynamicQuantizeLinear -> MatMulInteger computes its parameters per
// batch row, over that row's real tokens (the attention mask), exactly as the original graph does for that input
// alone:
//   x3 = Reshape(x, [B, T, -1]) (the batch-major layouts [B, T, H] and [B*T, H] alike) * mask[B, T, 1]; padding
//   becomes 0, which is always inside the range (min(0, xmin), max(0, xmax)), so the row's range is its real tokens';
//   min, max = ReduceMin/ReduceMax(x3, axes [1, 2]) -> [B, 1, 1], then min(0, .), max(0, .);
//   scale = (max - min) / 255 (1 when max == min); zp = round_half_even(clamp(0 - min / scale, 0, 255));
//   y = QuantizeLinear(x3, scale[B], zp[B], axis 0), reshaped back to x's shape;
//   each MatMulInteger(y, W, zp, w_zp) becomes MatMulInteger(y, W, -, w_zp) - zp_token * colsum(W - w_zp) (onnxruntime
//   takes only a scalar activation zero point; colsum is an int32 constant computed here), and the scale output becomes
//   per token ([.., 1] in x's layout), so the downstream Mul(scale * w_scale) broadcasts per row.
// These are onnxruntime's DynamicQuantizeLinear formulas (GetQuantizationParameter, MlasQuantizeLinear); the tests
// check every row of a mixed-length batch against the original graph run on that input alone. A graph with any other
// use of DynamicQuantizeLinear keeps its graph, with the reason for the load log: never different numbers.
import { closeSync, openSync, readSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { ONNX, Writer, eachField, fieldsOf, stringsOf, type Field, type FileReader } from "./protobuf";
import { rewriteGraphFile, type GraphNode, type GraphSummary, type Replacement } from "./logits-graph";
import type { Removable } from "./scratch";

const { GRAPH, NODE, TENSOR, ATTRIBUTE, ATTRIBUTE_TYPE, DATA_TYPE } = ONNX;
const MASK_INPUT = "attention_mask";

/** A constant tensor read from the file (small: weights of one MatMul, a zero point). */
interface ConstTensor {
  dims: number[];
  dataType: number;
  data: Uint8Array;
}

function isDefault(n: GraphNode): boolean {
  return n.domain === "" || n.domain === "ai.onnx";
}

/** One DynamicQuantizeLinear and what it feeds. */
interface QuantPlan {
  dql: GraphNode;
  matmuls: GraphNode[];
}

/** Decides whether every DynamicQuantizeLinear of the graph can be made per row; a string is the reason it cannot. */
export function planRowwise(g: GraphSummary): QuantPlan[] | string {
  const dqls = g.nodes.filter((n) => n.opType === "DynamicQuantizeLinear" && isDefault(n));
  if (!dqls.length) return [];
  if (!g.inputs.includes(MASK_INPUT)) return `the graph has no ${MASK_INPUT} input to tell the real tokens of each row`;
  if (g.opset < 13) return `the graph's opset ${g.opset} has no per-axis QuantizeLinear (opset 13+)`;
  const consumers = new Map<string, GraphNode[]>();
  for (const n of g.nodes) for (const i of n.inputs) if (i) consumers.set(i, [...(consumers.get(i) ?? []), n]);
  const plans: QuantPlan[] = [];
  for (const dql of dqls) {
    const label = `DynamicQuantizeLinear ${JSON.stringify(dql.name || dql.outputs[0])}`;
    const [y, scale, zp] = dql.outputs;
    if (!dql.inputs[0] || !y || !scale || !zp) return `${label} lacks an input or output`;
    if ([y, scale, zp].some((o) => g.outputs.includes(o))) return `${label} feeds a graph output`;
    const matmuls = consumers.get(y) ?? [];
    if (!matmuls.length) return `${label} feeds no MatMulInteger`;
    for (const m of matmuls) {
      if (m.opType !== "MatMulInteger" || !isDefault(m)) return `${label} feeds a ${m.opType}, not a MatMulInteger`;
      if (m.inputs[0] !== y || m.inputs[1] === y || m.inputs[2] !== zp || m.inputs[3] === y) return `${label} feeds MatMulInteger ${JSON.stringify(m.name)} other than as its quantized activation`;
      if (!m.inputs[1] || !g.initializers.has(m.inputs[1])) return `MatMulInteger ${JSON.stringify(m.name)} does not multiply by a constant weight`;
      if (m.inputs[3] && !g.initializers.has(m.inputs[3])) return `MatMulInteger ${JSON.stringify(m.name)} has a weight zero point that is not constant`;
    }
    for (const c of consumers.get(zp) ?? []) if (!matmuls.includes(c)) return `the zero point of ${label} feeds a ${c.opType}`;
    // The scale becomes per token ([.., 1]): only element-wise products that end in element-wise products may read it.
    for (const c of consumers.get(scale) ?? []) {
      const other = c.inputs.find((i) => i !== scale);
      if (c.opType !== "Mul" || !isDefault(c) || c.inputs.length !== 2 || !other || !g.initializers.has(other)) {
        return `the scale of ${label} feeds a ${c.opType} other than a product with a constant weight scale`;
      }
      for (const d of consumers.get(c.outputs[0]!) ?? []) if (d.opType !== "Mul" || !isDefault(d)) return `the scale product of ${label} feeds a ${d.opType}, not a Mul`;
      if (g.outputs.includes(c.outputs[0]!)) return `the scale product of ${label} is a graph output`;
    }
    plans.push({ dql, matmuls });
  }
  return plans;
}

/** The tensors named `names` among the graph's initializers (raw, int32_data or external data). */
function readInitializers(r: FileReader, g: GraphSummary, names: ReadonlySet<string>, dir: string): Map<string, ConstTensor> {
  const found = new Map<string, ConstTensor>();
  eachField(r, g.graph.from, g.graph.to, (field, from, to) => {
    if (field !== GRAPH.initializer) return;
    let name = "";
    eachField(r, from, to, (t, tFrom, tTo) => {
      if (t === TENSOR.name) name = r.bytes(tFrom, tTo - tFrom).toString("utf8");
    });
    if (!names.has(name)) return;
    found.set(name, decodeTensor(fieldsOf(r.bytes(from, to - from)), dir, name));
  });
  for (const n of names) if (!found.has(n)) throw new Error(`initializer ${n} not found`);
  return found;
}

/** Values of a repeated int field, packed or not. */
function repeatedInts(fields: readonly Field[], field: number): number[] {
  const out: number[] = [];
  for (const f of fields) {
    if (f.field !== field) continue;
    if (f.wire === 0) out.push(f.value);
    else if (f.wire === 2) {
      let pos = 0;
      while (pos < f.bytes.length) {
        let value = 0;
        let scale = 1;
        for (;;) {
          const b = f.bytes[pos++]!;
          value += (b & 0x7f) * scale;
          if (b < 0x80) break;
          scale *= 128;
        }
        out.push(value);
      }
    }
  }
  return out;
}

function decodeTensor(fields: readonly Field[], dir: string, name: string): ConstTensor {
  const dims = repeatedInts(fields, TENSOR.dims);
  const dataType = fields.find((f) => f.field === TENSOR.dataType)?.value ?? 0;
  if (dataType !== DATA_TYPE.int8 && dataType !== DATA_TYPE.uint8) throw new Error(`initializer ${name} is not int8 or uint8 (data type ${dataType})`);
  const count = dims.reduce((a, b) => a * b, 1);
  const raw = fields.find((f) => f.field === TENSOR.rawData && f.wire === 2);
  let data: Uint8Array;
  if ((fields.find((f) => f.field === TENSOR.dataLocation)?.value ?? 0) === 1) {
    const entry = new Map<string, string>();
    for (const f of fields) {
      if (f.field !== TENSOR.externalData || f.wire !== 2) continue;
      const kv = fieldsOf(f.bytes);
      entry.set(stringsOf(kv, 1)[0] ?? "", stringsOf(kv, 2)[0] ?? "");
    }
    const location = entry.get("location");
    if (!location) throw new Error(`initializer ${name} has external data without a location`);
    const offset = Number(entry.get("offset") ?? 0);
    data = new Uint8Array(count);
    const fd = openSync(join(dir, location), "r");
    try {
      if (readSync(fd, data, 0, count, offset) !== count) throw new Error(`initializer ${name}: short external data`);
    } finally {
      closeSync(fd);
    }
  } else if (raw) data = Uint8Array.from(raw.bytes);
  else data = Uint8Array.from(repeatedInts(fields, TENSOR.int32Data).map((v) => v & 0xff));
  if (data.length !== count) throw new Error(`initializer ${name} holds ${data.length} values for ${count}`);
  return { dims, dataType, data };
}

/** colsum[n] = sum over k of (W[k, n] - w_zp[n or 0]), as int32 little-endian bytes. */
export function weightColumnSums(w: ConstTensor, zp: ConstTensor | null): Uint8Array {
  if (w.dims.length !== 2) throw new Error(`a ${w.dims.length}-D weight (2-D expected)`);
  const [k, n] = w.dims as [number, number];
  const value = (t: ConstTensor, i: number) => (t.dataType === DATA_TYPE.int8 ? (t.data[i]! << 24) >> 24 : t.data[i]!);
  const zpCount = zp ? zp.data.length : 0;
  if (zp && zpCount !== 1 && zpCount !== n) throw new Error(`a weight zero point of ${zpCount} values for ${n} columns`);
  const sums = new Int32Array(n);
  for (let col = 0; col < n; col++) {
    const z = zp ? value(zp, zpCount === 1 ? 0 : col) : 0;
    let s = 0;
    for (let row = 0; row < k; row++) s += value(w, row * n + col) - z;
    sums[col] = s;
  }
  return new Uint8Array(sums.buffer);
}

/** Builds the encoded node and initializer fields. */
class Emitter {
  readonly nodes = new Writer();
  readonly inits = new Writer();
  private count = 0;
  constructor(private readonly prefix: string, private readonly opset: number) {}
  name(s: string): string {
    return `${this.prefix}/${s}`;
  }
  node(opType: string, inputs: readonly string[], outputs: readonly string[], attrs: (w: Writer) => void = () => {}): void {
    this.nodes.msg(GRAPH.node, (n) => {
      for (const i of inputs) n.str(NODE.input, i);
      for (const o of outputs) n.str(NODE.output, o);
      n.str(NODE.name, this.name(`${opType}_${this.count++}`)).str(NODE.opType, opType);
      attrs(n);
    });
  }
  intAttr(w: Writer, name: string, v: number): void {
    w.msg(NODE.attribute, (a) => a.str(ATTRIBUTE.name, name).int(ATTRIBUTE.i, v).int(ATTRIBUTE.type, ATTRIBUTE_TYPE.int));
  }
  /** ReduceMin / ReduceMax over axes 1 and 2, dims kept (axes an input from opset 18). */
  reduce(op: "ReduceMin" | "ReduceMax", input: string, output: string): void {
    if (this.opset >= 18) this.node(op, [input, this.name("axes12")], [output], (w) => this.intAttr(w, "keepdims", 1));
    else this.node(op, [input], [output], (w) => {
      w.msg(NODE.attribute, (a) => a.str(ATTRIBUTE.name, "axes").int(ATTRIBUTE.ints, 1).int(ATTRIBUTE.ints, 2).int(ATTRIBUTE.type, ATTRIBUTE_TYPE.ints));
      this.intAttr(w, "keepdims", 1);
    });
  }
  tensor(name: string, dataType: number, dims: readonly number[], raw: Uint8Array): void {
    this.inits.msg(GRAPH.initializer, (t) => {
      for (const d of dims) t.int(TENSOR.dims, d);
      t.int(TENSOR.dataType, dataType).str(TENSOR.name, name).raw(TENSOR.rawData, raw);
    });
  }
  int64s(name: string, values: readonly number[]): void {
    const raw = new Uint8Array(8 * values.length);
    values.forEach((v, i) => new DataView(raw.buffer).setBigInt64(8 * i, BigInt(v), true));
    this.tensor(name, DATA_TYPE.int64, [values.length], raw);
  }
  float(name: string, value: number): void {
    this.tensor(name, DATA_TYPE.float, [], new Uint8Array(Float32Array.of(value).buffer));
  }
}

function freshPrefix(g: GraphSummary): string {
  const taken = [...g.initializers, ...g.inputs, ...g.outputs, ...g.nodes.flatMap((n) => [...n.inputs, ...n.outputs])];
  let prefix = "infinity/rowwise";
  for (let i = 2; taken.some((t) => t.startsWith(`${prefix}/`)); i++) prefix = `infinity/rowwise_${i}`;
  return prefix;
}

/** The rewritten graph: a file in a temporary folder. */
export interface RowwiseGraph extends Removable {
  path: string;
  /** The source graph's folder, where its external data files are (SessionSettings.externalDataDir). */
  externalDataDir: string;
  /** How many DynamicQuantizeLinear nodes were made per row. */
  quantizers: number;
}

/**
 * Model types (config.json model_type) whose quantized MatMuls all multiply token-major activations ([B, T, H] or
 * [B*T, H]) by a weight: the layout the rewrite reshapes to [B, T, -1] and masks by row. Checked on BERT and Qwen3
 * exports; the others here have the same Linear layers on the same token states. Any other type keeps its graph with
 * the reason logged: DeBERTa, for one, runs its relative position embeddings ([2k, H], no batch or token axis) through
 * the query/key Linear layers, which the reshape would either refuse at run time or mask wrongly.
 */
export const ROWWISE_MODEL_TYPES: ReadonlySet<string> = new Set([
  "bert", "roberta", "xlm-roberta", "camembert", "distilbert", "electra", "nomic_bert", "modernbert",
  "qwen2", "qwen3", "llama", "mistral", "gemma", "gemma2", "gemma3", "gemma3_text",
]);

/**
 * Writes `source` with every DynamicQuantizeLinear -> MatMulInteger made per batch row into a new temporary folder;
 * null when the graph has no DynamicQuantizeLinear; the reason when it has some but is left as it is. External data
 * is read from `externalDataDir` (default: the source's folder). `modelType` (config.json's), when given, must be one
 * of ROWWISE_MODEL_TYPES.
 */
export function rowwiseQuantGraph(source: string, externalDataDir?: string, modelType?: string): RowwiseGraph | { reason: string } | null {
  return rewriteGraphFile<RowwiseGraph | { reason: string } | null>(source, ({ r, g, write }) => {
    const plans = planRowwise(g);
    if (typeof plans === "string") return { reason: plans };
    if (!plans.length) return null;
    if (modelType !== undefined && !ROWWISE_MODEL_TYPES.has(modelType)) {
      return { reason: `model_type ${JSON.stringify(modelType)} is not one whose quantized MatMuls are known to act on token-major activations only` };
    }
    const dir = externalDataDir ?? dirname(resolve(source));
    const constants = new Set(plans.flatMap((p) => p.matmuls.flatMap((m) => [m.inputs[1]!, ...(m.inputs[3] ? [m.inputs[3]] : [])])));
    const tensors = readInitializers(r, g, constants, dir);
    const e = new Emitter(freshPrefix(g), g.opset);
    const n = (s: string) => e.name(s);
    // Shared: the mask as [B, T, 1] floats, the shapes [B, T, -1] and [B, T, 1].
    e.int64s(n("minus_one"), [-1]);
    e.int64s(n("one"), [1]);
    e.int64s(n("zero"), [0]);
    if (g.opset >= 18) e.int64s(n("axes12"), [1, 2]);
    e.float(n("f0"), 0);
    e.float(n("f1"), 1);
    e.float(n("f255"), 255);
    e.node("Shape", [MASK_INPUT], [n("mask_shape")]);
    e.node("Concat", [n("mask_shape"), n("minus_one")], [n("shape_bt_")], (w) => e.intAttr(w, "axis", 0));
    e.node("Concat", [n("mask_shape"), n("one")], [n("shape_bt1")], (w) => e.intAttr(w, "axis", 0));
    e.node("Cast", [MASK_INPUT], [n("mask_float")], (w) => e.intAttr(w, "to", DATA_TYPE.float));
    e.node("Reshape", [n("mask_float"), n("shape_bt1")], [n("mask")]);
    const shared = e.nodes.bytes.splice(0);
    const replaced: Replacement[] = [];
    plans.forEach((p, i) => {
      const q = (s: string) => n(`${i}/${s}`);
      const [x] = p.dql.inputs as [string];
      const [y, scale] = p.dql.outputs as [string, string];
      e.node("Reshape", [x, n("shape_bt_")], [q("x3")]);
      e.node("Mul", [q("x3"), n("mask")], [q("masked")]);
      e.reduce("ReduceMin", q("masked"), q("min_row"));
      e.reduce("ReduceMax", q("masked"), q("max_row"));
      e.node("Min", [q("min_row"), n("f0")], [q("min")]);
      e.node("Max", [q("max_row"), n("f0")], [q("max")]);
      e.node("Sub", [q("max"), q("min")], [q("range")]);
      e.node("Div", [q("range"), n("f255")], [q("range_scale")]);
      e.node("Equal", [q("max"), q("min")], [q("flat")]);
      e.node("Where", [q("flat"), n("f1"), q("range_scale")], [q("scale")]);
      e.node("Div", [q("min"), q("scale")], [q("min_scaled")]);
      e.node("Sub", [n("f0"), q("min_scaled")], [q("zp_initial")]);
      e.node("Min", [q("zp_initial"), n("f255")], [q("zp_below")]);
      e.node("Max", [q("zp_below"), n("f0")], [q("zp_clamped")]);
      e.node("Round", [q("zp_clamped")], [q("zp_float")]);
      e.node("Cast", [q("zp_float")], [q("zp_u8")], (w) => e.intAttr(w, "to", DATA_TYPE.uint8));
      e.node("Reshape", [q("scale"), n("minus_one")], [q("scale_b")]);
      e.node("Reshape", [q("zp_u8"), n("minus_one")], [q("zp_b")]);
      e.node("QuantizeLinear", [q("x3"), q("scale_b"), q("zp_b")], [q("y3")], (w) => e.intAttr(w, "axis", 0));
      e.node("Shape", [x], [q("x_shape")]);
      e.node("Reshape", [q("y3"), q("x_shape")], [y]);
      // Per token in x's layout: [..leading dims of x.., 1].
      e.node("Slice", [q("x_shape"), n("zero"), n("minus_one")], [q("lead")]);
      e.node("Concat", [q("lead"), n("one")], [q("lead1")], (w) => e.intAttr(w, "axis", 0));
      e.node("Expand", [q("scale"), n("shape_bt1")], [q("scale_bt1")]);
      e.node("Reshape", [q("scale_bt1"), q("lead1")], [scale]);
      e.node("Cast", [q("zp_float")], [q("zp_i32")], (w) => e.intAttr(w, "to", DATA_TYPE.int32));
      replaced.push({ start: p.dql.start, end: p.dql.end, bytes: Uint8Array.from(e.nodes.bytes.splice(0)) });
      p.matmuls.forEach((m, j) => {
        const o = (s: string) => q(`${j}/${s}`);
        const w = tensors.get(m.inputs[1]!)!;
        const wzp = m.inputs[3] ? tensors.get(m.inputs[3])! : null;
        const sums = weightColumnSums(w, wzp);
        e.tensor(o("colsum"), DATA_TYPE.int32, [w.dims[1]!], sums);
        // zp[B, 1, 1] * colsum is [B, 1, N]: subtracted from the product seen as [B, T, N] (Reshape aliases the buffer).
        e.node("MatMulInteger", [y, m.inputs[1]!, "", ...(m.inputs[3] ? [m.inputs[3]] : [])], [o("product")]);
        e.node("Mul", [q("zp_i32"), o("colsum")], [o("zp_product")]);
        e.node("Reshape", [o("product"), n("shape_bt_")], [o("product3")]);
        e.node("Sub", [o("product3"), o("zp_product")], [o("corrected3")]);
        e.node("Shape", [o("product")], [o("product_shape")]);
        e.node("Reshape", [o("corrected3"), o("product_shape")], [m.outputs[0]!]);
        replaced.push({ start: m.start, end: m.end, bytes: Uint8Array.from(e.nodes.bytes.splice(0)) });
      });
    });
    replaced.sort((a, b) => a.start - b.start);
    // The shared nodes read only the mask: they go in front of the first replaced node.
    replaced[0] = { ...replaced[0]!, bytes: Uint8Array.from([...shared, ...replaced[0]!.bytes]) };
    const { path, remove } = write("infinity-rowwise-", replaced, e.inits.bytes);
    return { path, externalDataDir: dir, quantizers: plans.length, remove };
  });
}
