// Reads the names of an ONNX file's graph outputs without onnxruntime: the layout needs them before a session exists
// (bge-m3 exports are told apart by their outputs). Walks the protobuf framing and reads only the small records it
// needs; the weights (initializers, often hundreds of MB) are skipped by seeking, never read.
import { closeSync, openSync, readSync, fstatSync } from "node:fs";
import { ModelLoadError } from "../errors";

/** ModelProto.graph = 7; GraphProto.output = 12; ValueInfoProto.name = 1 (onnx.proto3). */
const MODEL_GRAPH = 7;
const GRAPH_OUTPUT = 12;
const VALUE_INFO_NAME = 1;

class FileReader {
  private readonly buf = Buffer.alloc(10);
  constructor(private readonly fd: number) {}

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

/** Calls visit(field, start, end) for each length-delimited field in [start, end); skips the other wire types. */
function eachField(r: FileReader, start: number, end: number, visit: (field: number, from: number, to: number) => void): void {
  let pos = start;
  while (pos < end) {
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
      visit(field, from, to);
      pos = to;
    } else throw new Error(`unsupported protobuf wire type ${wire} at byte ${pos}`);
  }
}

/** Names of the graph outputs of an ONNX file, in order. */
export function onnxOutputNames(path: string): string[] {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    throw new ModelLoadError(`cannot open ${path}: ${(e as Error).message}`);
  }
  try {
    const r = new FileReader(fd);
    const names: string[] = [];
    eachField(r, 0, fstatSync(fd).size, (field, from, to) => {
      if (field !== MODEL_GRAPH) return;
      eachField(r, from, to, (gField, gFrom, gTo) => {
        if (gField !== GRAPH_OUTPUT) return;
        // A ValueInfoProto is small (name, type, doc string): read it whole.
        names.push(valueInfoName(r.bytes(gFrom, gTo - gFrom)));
      });
    });
    return names;
  } catch (e) {
    throw new ModelLoadError(`${path} is not a readable ONNX model: ${(e as Error).message}`);
  } finally {
    closeSync(fd);
  }
}

/** The name field of an encoded ValueInfoProto. */
function valueInfoName(buf: Buffer): string {
  let pos = 0;
  const varint = () => {
    let value = 0;
    let scale = 1;
    for (;;) {
      if (pos >= buf.length) throw new Error("truncated value info");
      const b = buf[pos++]!;
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 128;
    }
  };
  while (pos < buf.length) {
    const tag = varint();
    const wire = tag % 8;
    if (wire === 0) varint();
    else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      const len = varint();
      if (Math.floor(tag / 8) === VALUE_INFO_NAME) return buf.toString("utf8", pos, pos + len);
      pos += len;
    } else throw new Error(`unsupported protobuf wire type ${wire} in value info`);
  }
  return "";
}
