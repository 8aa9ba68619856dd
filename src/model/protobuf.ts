// The few lines of protobuf framing the server needs to read and write ONNX files without a dependency: a reader
// that walks the fields of a message in a file by seeking (weights, often hundreds of MB, are skipped, never read),
// a walker over a small message held in memory, and a writer. Field numbers are onnx.proto3's, at each caller.
import { readSync, writeSync } from "node:fs";

export class FileReader {
  private readonly buf = Buffer.alloc(10);
  constructor(readonly fd: number) {}

  varint(pos: number): { value: number; next: number } {
    const n = readSync(this.fd, this.buf, 0, 10, pos);
    let value = 0;
    let scale = 1;
    for (let i = 0; i < n; i++) {
      const b = this.buf[i]!;
      value += (b & 0x7f) * scale;
      if (b < 0x80) return { value, next: pos + i + 1 };
      scale *= 128;
    }
    throw new Error(`truncated varint at byte ${pos}`);
  }

  bytes(pos: number, length: number): Buffer {
    const out = Buffer.alloc(length);
    if (readSync(this.fd, out, 0, length, pos) !== length) throw new Error(`truncated record at byte ${pos}`);
    return out;
  }
}

/**
 * Calls visit(field, start, end, tagStart) for each length-delimited field in [start, end) of a message in a file;
 * skips the other wire types.
 */
export function eachField(r: FileReader, start: number, end: number, visit: (field: number, from: number, to: number, tagStart: number) => void): void {
  let pos = start;
  while (pos < end) {
    const tagStart = pos;
    const tag = r.varint(pos);
    pos = tag.next;
    const field = Math.floor(tag.value / 8);
    const wire = tag.value % 8;
    if (wire === 0) pos = r.varint(pos).next;
    else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      const len = r.varint(pos);
      const from = len.next;
      const to = from + len.value;
      if (to > end) throw new Error(`field ${field} at byte ${pos} runs past its message`);
      visit(field, from, to, tagStart);
      pos = to;
    } else throw new Error(`unsupported protobuf wire type ${wire} at byte ${pos}`);
  }
}

/** One field of a message held in memory: a varint's value, or a length-delimited field's bytes; `raw` is the whole field, tag included. */
export interface Field {
  field: number;
  wire: number;
  value: number;
  bytes: Uint8Array;
  raw: Uint8Array;
}

/** The fields of a small message held in memory, in order. */
export function fieldsOf(buf: Uint8Array): Field[] {
  const fields: Field[] = [];
  let pos = 0;
  const varint = () => {
    let value = 0;
    let scale = 1;
    for (;;) {
      if (pos >= buf.length) throw new Error("truncated message");
      const b = buf[pos++]!;
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 128;
    }
  };
  while (pos < buf.length) {
    const start = pos;
    const tag = varint();
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    let value = 0;
    let bytes = buf.subarray(0, 0);
    if (wire === 0) value = varint();
    else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      const len = varint();
      if (pos + len > buf.length) throw new Error(`field ${field} runs past its message`);
      bytes = buf.subarray(pos, pos + len);
      pos += len;
    } else throw new Error(`unsupported protobuf wire type ${wire}`);
    fields.push({ field, wire, value, bytes, raw: buf.subarray(start, pos) });
  }
  return fields;
}

/** The strings of one length-delimited field of a small message, in order. */
export function stringsOf(fields: readonly Field[], field: number): string[] {
  return fields.filter((f) => f.field === field && f.wire === 2).map((f) => Buffer.from(f.bytes).toString("utf8"));
}

export class Writer {
  readonly bytes: number[] = [];
  varint(v: number): this {
    for (; v > 127; v = Math.floor(v / 128)) this.bytes.push((v & 127) | 128);
    this.bytes.push(v);
    return this;
  }
  int(field: number, v: number): this {
    return this.varint(field * 8).varint(v);
  }
  raw(field: number, b: ArrayLike<number>): this {
    this.varint(field * 8 + 2).varint(b.length);
    for (let i = 0; i < b.length; i++) this.bytes.push(b[i]!);
    return this;
  }
  str(field: number, s: string): this {
    return this.raw(field, new TextEncoder().encode(s));
  }
  msg(field: number, build: (w: Writer) => void): this {
    const w = new Writer();
    build(w);
    return this.raw(field, w.bytes);
  }
  /** Bytes that are already a whole encoded field (tag included). */
  append(b: ArrayLike<number>): this {
    for (let i = 0; i < b.length; i++) this.bytes.push(b[i]!);
    return this;
  }
}

/** Copies bytes [start, end) of one open file to the end of another, in chunks (weights are never held whole). */
export function copyRange(from: number, to: number, start: number, end: number): void {
  const chunk = Buffer.alloc(Math.min(16 * 1048576, Math.max(1, end - start)));
  for (let pos = start; pos < end; ) {
    const n = readSync(from, chunk, 0, Math.min(chunk.length, end - pos), pos);
    if (n <= 0) throw new Error(`short read at byte ${pos}`);
    writeSync(to, chunk, 0, n);
    pos += n;
  }
}

/** A varint's bytes (lengths past 2^31 too). */
export function varintBytes(v: number): number[] {
  return new Writer().varint(v).bytes;
}

/**
 * Field numbers of onnx.proto's messages that the graph rewriters read and write (logits-graph.ts, rowwise-quant.ts,
 * split.ts), kept in one table; ATTRIBUTE_TYPE and DATA_TYPE are the enums' values.
 */
export const ONNX = {
  MODEL: { graph: 7, opsetImport: 8 },
  OPSET: { domain: 1, version: 2 },
  GRAPH: { node: 1, initializer: 5, input: 11, output: 12, valueInfo: 13, sparseInitializer: 15 },
  NODE: { input: 1, output: 2, name: 3, opType: 4, attribute: 5, domain: 7 },
  ATTRIBUTE: { name: 1, i: 3, graph: 6, ints: 8, graphs: 11, type: 20 },
  TENSOR: { dims: 1, dataType: 2, int32Data: 5, name: 8, rawData: 9, externalData: 13, dataLocation: 14 },
  VALUE_INFO: { name: 1 },
  ATTRIBUTE_TYPE: { int: 2, ints: 7 },
  DATA_TYPE: { float: 1, uint8: 2, int8: 3, int32: 6, int64: 7 },
} as const;
