// Reads the tensors of a state_dict saved by torch.save (BAAI/bge-m3's sparse_linear.pt / colbert_linear.pt) without
// running its pickle. torch's format is a zip archive (entries stored, under one folder): data.pkl, a pickle of the
// dict whose tensors are calls to torch._utils._rebuild_tensor_v2 on "persistent" storages, and data/<key>, each
// storage's raw little-endian bytes. Unpickling in Python can call anything the pickle names; this reader is a
// small pickle machine that knows only the opcodes torch.save writes (protocols 2-4) and builds only a dict, tuples,
// lists, numbers, strings and tensors of float32 / float16 / bfloat16 storages, contiguous. Any other opcode or
// global is refused, naming the file, before anything is built from it.
import { readFileSync } from "node:fs";
import { ModelLoadError } from "../errors";
import { bf16ToFloat, halfToFloat } from "./half";
import type { WeightTensor } from "./safetensors";

/** Storage classes torch names in a tensor's persistent id, with their element size. */
const STORAGES: Record<string, { bytes: number; read: (raw: ArrayBuffer) => Float32Array }> = {
  FloatStorage: { bytes: 4, read: (raw) => new Float32Array(raw) },
  HalfStorage: { bytes: 2, read: (raw) => halfToFloat(new Uint16Array(raw)) },
  BFloat16Storage: { bytes: 2, read: (raw) => bf16ToFloat(new Uint16Array(raw)) },
};

/** A global the pickle names (module.name); only the allowed ones are ever created. */
class Global {
  constructor(readonly name: string) {}
}
/** A storage's persistent id: which data/<key> entry, of which type, how many elements. */
class StorageRef {
  constructor(readonly type: string, readonly key: string, readonly numel: number) {}
}
class Tensor {
  constructor(readonly shape: number[], readonly data: Float32Array) {}
}
/** dict / OrderedDict: string keys only (a state_dict's parameter names). */
class Dict {
  readonly items = new Map<string, Value>();
}
/** A tuple: immutable in Python, so kept apart from lists for the checks below. */
class Tuple {
  constructor(readonly items: Value[]) {}
}
type Value = null | boolean | number | string | Global | StorageRef | Tensor | Dict | Tuple | Value[];

const ALLOWED_GLOBALS = new Set([
  "collections.OrderedDict",
  "torch._utils._rebuild_tensor_v2",
  ...Object.keys(STORAGES).map((s) => `torch.${s}`),
]);

const MARK = Symbol("mark");

class Refused extends Error {}

function describe(v: Value | typeof MARK): string {
  if (v === MARK) return "a mark";
  if (v === null) return "None";
  if (v instanceof Global) return v.name;
  if (v instanceof StorageRef) return `a ${v.type}`;
  if (v instanceof Tensor) return "a tensor";
  if (v instanceof Dict) return "a dict";
  if (v instanceof Tuple) return "a tuple";
  if (Array.isArray(v)) return "a list";
  return `${typeof v} ${JSON.stringify(v)}`;
}

function int(v: Value, what: string): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) throw new Refused(`${what} is ${describe(v)}, not a non-negative integer`);
  return v;
}

function intTuple(v: Value, what: string): number[] {
  if (!(v instanceof Tuple)) throw new Refused(`${what} is ${describe(v)}, not a tuple`);
  return v.items.map((x, i) => int(x, `${what}[${i}]`));
}

/**
 * torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]):
 * the tensor's elements are storage[offset : offset + numel] when it is contiguous (row-major strides).
 */
function rebuildTensor(args: Value[], storage: (ref: StorageRef) => Float32Array): Tensor {
  if (args.length < 6 || args.length > 7) throw new Refused(`_rebuild_tensor_v2 takes 6 or 7 arguments, the pickle gives ${args.length}`);
  const [ref, offsetArg, sizeArg, strideArg, , hooks, metadata] = args;
  if (!(ref instanceof StorageRef)) throw new Refused(`_rebuild_tensor_v2's storage is ${describe(ref!)}`);
  const offset = int(offsetArg!, "a tensor's storage offset");
  const shape = intTuple(sizeArg!, "a tensor's size");
  const stride = intTuple(strideArg!, "a tensor's stride");
  if (stride.length !== shape.length) throw new Refused(`a tensor of size (${shape}) has stride (${stride})`);
  if (!(hooks instanceof Dict) || hooks.items.size) throw new Refused("a tensor has backward hooks");
  if (metadata !== undefined && metadata !== null && !(metadata instanceof Dict && metadata.items.size === 0)) throw new Refused("a tensor carries metadata");
  const numel = shape.reduce((a, b) => a * b, 1);
  // Row-major strides; an axis of length 1 may have any stride (torch gives such views).
  let expected = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i]! !== 1 && stride[i] !== expected) {
      throw new Refused(`a tensor of size (${shape.join(", ")}) has stride (${stride.join(", ")}): it is not contiguous (save tensor.contiguous())`);
    }
    expected *= shape[i]!;
  }
  if (offset + numel > ref.numel) throw new Refused(`a tensor needs elements ${offset}..${offset + numel} of a storage of ${ref.numel}`);
  return new Tensor(shape, storage(ref).slice(offset, offset + numel));
}

/** The pickle machine: runs data.pkl's opcodes over a stack and a memo, building only the values above. */
function unpickle(pkl: Uint8Array, storage: (ref: StorageRef) => Float32Array): Value {
  const view = new DataView(pkl.buffer, pkl.byteOffset, pkl.byteLength);
  const text = new TextDecoder("utf-8", { fatal: true });
  const stack: Array<Value | typeof MARK> = [];
  const memo = new Map<number, Value>();
  let pos = 0;
  const need = (n: number) => {
    if (pos + n > pkl.length) throw new Refused(`data.pkl ends inside an opcode at byte ${pos}`);
  };
  const u8 = () => (need(1), pkl[pos++]!);
  const u16 = () => (need(2), (pos += 2), view.getUint16(pos - 2, true));
  const u32 = () => (need(4), (pos += 4), view.getUint32(pos - 4, true));
  const bytes = (n: number) => (need(n), pkl.subarray(pos, (pos += n)));
  const line = () => {
    const end = pkl.indexOf(0x0a, pos);
    if (end < 0) throw new Refused("data.pkl ends inside a GLOBAL opcode");
    const s = text.decode(pkl.subarray(pos, end));
    pos = end + 1;
    return s;
  };
  const pop = (): Value => {
    const v = stack.pop();
    if (v === undefined || v === MARK) throw new Refused(`data.pkl pops ${v === MARK ? "a mark" : "an empty stack"} at byte ${pos}`);
    return v;
  };
  const popMark = (): Value[] => {
    const at = stack.lastIndexOf(MARK);
    if (at < 0) throw new Refused(`data.pkl has no mark at byte ${pos}`);
    const items = stack.splice(at) as Value[];
    return items.slice(1);
  };
  const top = (): Value => {
    const v = stack[stack.length - 1];
    if (v === undefined || v === MARK) throw new Refused(`data.pkl reads an empty stack at byte ${pos}`);
    return v;
  };
  const global = (module: string, name: string): Global => {
    const full = `${module}.${name}`;
    if (module === "torch" && name.endsWith("Storage") && !ALLOWED_GLOBALS.has(full)) {
      throw new Refused(`a tensor is stored as ${name}; only float32, float16 and bfloat16 tensors are read`);
    }
    if (!ALLOWED_GLOBALS.has(full)) {
      throw new Refused(`it refers to ${full}, which this reader does not allow (a torch.save of a state_dict names only collections.OrderedDict, torch._utils._rebuild_tensor_v2 and float32 / float16 / bfloat16 storages)`);
    }
    return new Global(full);
  };
  const setItems = (dict: Value, pairs: Value[]) => {
    if (!(dict instanceof Dict)) throw new Refused(`data.pkl sets items on ${describe(dict)}`);
    for (let i = 0; i + 1 < pairs.length; i += 2) {
      const k = pairs[i]!;
      if (typeof k !== "string") throw new Refused(`a dict key is ${describe(k)}, not a string`);
      dict.items.set(k, pairs[i + 1]!);
    }
  };

  for (;;) {
    const at = pos;
    const op = u8();
    switch (op) {
      case 0x80: // PROTO
        if (u8() > 5) throw new Refused("data.pkl uses a pickle protocol newer than 5");
        break;
      case 0x95: // FRAME (protocol 4): a length to skip
        bytes(8);
        break;
      case 0x2e: // STOP
        if (stack.length !== 1) throw new Refused(`data.pkl stops with ${stack.length} values on the stack`);
        return pop();
      case 0x63: // GLOBAL
        stack.push(global(line(), line()));
        break;
      case 0x93: { // STACK_GLOBAL
        const name = pop();
        const module = pop();
        if (typeof module !== "string" || typeof name !== "string") throw new Refused("STACK_GLOBAL without two strings");
        stack.push(global(module, name));
        break;
      }
      case 0x71: memo.set(u8(), top()); break; // BINPUT
      case 0x72: memo.set(u32(), top()); break; // LONG_BINPUT
      case 0x94: memo.set(memo.size, top()); break; // MEMOIZE
      case 0x68: case 0x6a: { // BINGET, LONG_BINGET
        const k = op === 0x68 ? u8() : u32();
        if (!memo.has(k)) throw new Refused(`data.pkl reads memo ${k}, never stored`);
        stack.push(memo.get(k)!);
        break;
      }
      case 0x28: stack.push(MARK); break; // MARK
      case 0x7d: stack.push(new Dict()); break; // EMPTY_DICT
      case 0x5d: stack.push([]); break; // EMPTY_LIST
      case 0x29: stack.push(new Tuple([])); break; // EMPTY_TUPLE
      case 0x74: stack.push(new Tuple(popMark())); break; // TUPLE
      case 0x85: stack.push(new Tuple([pop()])); break; // TUPLE1
      case 0x86: { const b = pop(); const a = pop(); stack.push(new Tuple([a, b])); break; } // TUPLE2
      case 0x87: { const c = pop(); const b = pop(); const a = pop(); stack.push(new Tuple([a, b, c])); break; } // TUPLE3
      case 0x73: { const v = pop(); const k = pop(); setItems(top(), [k, v]); break; } // SETITEM
      case 0x75: { const pairs = popMark(); setItems(top(), pairs); break; } // SETITEMS
      case 0x61: { const v = pop(); const l = top(); if (!Array.isArray(l)) throw new Refused("APPEND to a non-list"); l.push(v); break; } // APPEND
      case 0x65: { const items = popMark(); const l = top(); if (!Array.isArray(l)) throw new Refused("APPENDS to a non-list"); l.push(...items); break; } // APPENDS
      case 0x4e: stack.push(null); break; // NONE
      case 0x88: stack.push(true); break; // NEWTRUE
      case 0x89: stack.push(false); break; // NEWFALSE
      case 0x4b: stack.push(u8()); break; // BININT1
      case 0x4d: stack.push(u16()); break; // BININT2
      case 0x4a: stack.push((need(4), (pos += 4), view.getInt32(pos - 4, true))); break; // BININT
      case 0x8a: { // LONG1: a little-endian two's complement integer of n bytes
        const n = u8();
        const b = bytes(n);
        if (n > 6) throw new Refused(`data.pkl holds an integer of ${n} bytes`);
        let v = 0;
        for (let i = n - 1; i >= 0; i--) v = v * 256 + b[i]!;
        if (n && b[n - 1]! & 0x80) v -= 2 ** (8 * n);
        stack.push(v);
        break;
      }
      case 0x47: stack.push((need(8), (pos += 8), view.getFloat64(pos - 8, false))); break; // BINFLOAT (big-endian)
      case 0x58: stack.push(text.decode(bytes(u32()))); break; // BINUNICODE
      case 0x8c: stack.push(text.decode(bytes(u8()))); break; // SHORT_BINUNICODE
      case 0x51: { // BINPERSID: torch's storage id ('storage', StorageClass, key, location, numel)
        const id = pop();
        if (!(id instanceof Tuple) || id.items[0] !== "storage" || id.items.length !== 5) throw new Refused(`a persistent id is ${describe(id)}, not a torch storage`);
        const [, type, key, , numel] = id.items;
        if (!(type instanceof Global) || typeof key !== "string") throw new Refused("a storage id without its type and key");
        stack.push(new StorageRef(type.name.slice("torch.".length), key, int(numel!, "a storage's size")));
        break;
      }
      case 0x52: { // REDUCE: call an allowed global
        const args = pop();
        const fn = pop();
        if (!(fn instanceof Global) || !(args instanceof Tuple)) throw new Refused(`data.pkl calls ${describe(fn)}`);
        if (fn.name === "collections.OrderedDict" && args.items.length === 0) stack.push(new Dict());
        else if (fn.name === "torch._utils._rebuild_tensor_v2") stack.push(rebuildTensor(args.items, storage));
        else throw new Refused(`data.pkl calls ${fn.name} with ${args.items.length} arguments`);
        break;
      }
      case 0x62: { // BUILD: an OrderedDict's __dict__ (state_dict()'s _metadata: versions of the modules), dropped
        const state = pop();
        const obj = top();
        if (!(obj instanceof Dict) || !(state instanceof Dict) || [...state.items.keys()].some((k) => k !== "_metadata")) {
          throw new Refused(`data.pkl sets the state of ${describe(obj)} with ${describe(state)}`);
        }
        break;
      }
      default:
        throw new Refused(`data.pkl has opcode 0x${op.toString(16).padStart(2, "0")} at byte ${at}, which this reader does not run`);
    }
  }
}

/** One stored entry of the archive: where its bytes lie, checked against its CRC-32. */
interface ZipEntry {
  name: string;
  method: number;
  crc: number;
  size: number;
  compressedSize: number;
  headerOffset: number;
}

/** The central directory of a zip archive (no zip64 sizes: state_dicts of heads are far below 4 GiB). */
function zipEntries(bytes: Buffer): Map<string, ZipEntry> {
  const EOCD = 0x06054b50;
  let eocd = -1;
  for (let i = bytes.length - 22; i >= Math.max(0, bytes.length - 22 - 65535); i--) {
    if (bytes.readUInt32LE(i) === EOCD) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Refused("it is not a complete zip archive (no end-of-central-directory record: truncated?)");
  const count = bytes.readUInt16LE(eocd + 10);
  const dirSize = bytes.readUInt32LE(eocd + 12);
  const dirOffset = bytes.readUInt32LE(eocd + 16);
  if (count === 0xffff || dirOffset === 0xffffffff) throw new Refused("it needs zip64 records, which this reader does not read");
  if (dirOffset + dirSize > eocd) throw new Refused("its zip central directory lies outside the file (truncated?)");
  const entries = new Map<string, ZipEntry>();
  let p = dirOffset;
  for (let i = 0; i < count; i++) {
    if (p + 46 > eocd || bytes.readUInt32LE(p) !== 0x02014b50) throw new Refused(`its zip central directory is damaged at entry ${i}`);
    const nameLength = bytes.readUInt16LE(p + 28);
    const entry: ZipEntry = {
      method: bytes.readUInt16LE(p + 10),
      crc: bytes.readUInt32LE(p + 16),
      compressedSize: bytes.readUInt32LE(p + 20),
      size: bytes.readUInt32LE(p + 24),
      headerOffset: bytes.readUInt32LE(p + 42),
      name: bytes.toString("utf8", p + 46, p + 46 + nameLength),
    };
    entries.set(entry.name, entry);
    p += 46 + nameLength + bytes.readUInt16LE(p + 30) + bytes.readUInt16LE(p + 32);
  }
  return entries;
}

function entryBytes(bytes: Buffer, e: ZipEntry): Uint8Array {
  const h = e.headerOffset;
  if (h + 30 > bytes.length || bytes.readUInt32LE(h) !== 0x04034b50) throw new Refused(`its zip entry ${e.name} has no local header (truncated?)`);
  if (e.method !== 0) throw new Refused(`its zip entry ${e.name} is compressed (method ${e.method}); torch.save stores entries uncompressed`);
  if (e.size === 0xffffffff || e.compressedSize !== e.size) throw new Refused(`its zip entry ${e.name} has zip64 or inconsistent sizes`);
  const start = h + 30 + bytes.readUInt16LE(h + 26) + bytes.readUInt16LE(h + 28);
  if (start + e.size > bytes.length) throw new Refused(`its zip entry ${e.name} runs past the end of the file (truncated?)`);
  const data = bytes.subarray(start, start + e.size);
  if ((Bun.hash.crc32(data) >>> 0) !== e.crc) throw new Refused(`its zip entry ${e.name} fails its CRC-32 check (damaged)`);
  return data;
}

/**
 * Every tensor of a torch.save'd state_dict (a dict or OrderedDict of tensors), as float32 (float32, float16 and
 * bfloat16 storages are read). Anything else, in the archive or in its pickle, is a ModelLoadError naming the file.
 */
export function readTorchStateDict(path: string): Map<string, WeightTensor> {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new ModelLoadError(`cannot read ${path}: ${(e as Error).message}`);
  }
  try {
    if (bytes[0] === 0x80) throw new Refused("it is in torch's legacy (pre-1.6, non-zip) serialization format, which this reader does not read; re-save it with torch.save in torch >= 1.6");
    if (bytes.length < 4 || bytes.readUInt32LE(0) !== 0x04034b50) throw new Refused("it is not a torch.save zip archive");
    const entries = zipEntries(bytes);
    const pickles = [...entries.keys()].filter((n) => /^[^/]+\/data\.pkl$/.test(n));
    if (pickles.length !== 1) throw new Refused(`it holds ${pickles.length} <folder>/data.pkl entries, torch.save writes one`);
    const folder = pickles[0]!.slice(0, -"data.pkl".length);
    const order = entries.get(`${folder}byteorder`);
    if (order) {
      const value = new TextDecoder().decode(entryBytes(bytes, order)).trim();
      if (value !== "little") throw new Refused(`its tensors are stored ${value}-endian`);
    }
    const storages = new Map<string, Float32Array>();
    const storage = (ref: StorageRef): Float32Array => {
      const cached = storages.get(ref.key);
      if (cached) return cached;
      const type = Object.hasOwn(STORAGES, ref.type) ? STORAGES[ref.type] : undefined;
      if (!type) throw new Refused(`a tensor is stored as ${ref.type}; only float32, float16 and bfloat16 tensors are read`);
      const e = entries.get(`${folder}data/${ref.key}`);
      if (!e) throw new Refused(`its storage ${ref.key} has no data/${ref.key} entry`);
      if (e.size !== ref.numel * type.bytes) throw new Refused(`its storage ${ref.key} holds ${e.size} bytes for ${ref.numel} ${ref.type} elements`);
      // Copy out of the file buffer: typed-array views need aligned offsets.
      const data = type.read(new Uint8Array(entryBytes(bytes, e)).buffer);
      storages.set(ref.key, data);
      return data;
    };
    const root = unpickle(entryBytes(bytes, entries.get(pickles[0]!)!), storage);
    if (!(root instanceof Dict)) throw new Refused(`it holds ${describe(root)}, not a state_dict (a dict of tensors)`);
    const out = new Map<string, WeightTensor>();
    for (const [name, v] of root.items) {
      if (!(v instanceof Tensor)) throw new Refused(`its entry ${name} is ${describe(v)}, not a tensor`);
      out.set(name, { shape: v.shape, data: v.data });
    }
    return out;
  } catch (e) {
    if (e instanceof Refused) throw new ModelLoadError(`${path} is not read as a torch state_dict: ${e.message}`);
    if (e instanceof TypeError || e instanceof RangeError) throw new ModelLoadError(`${path} is not read as a torch state_dict: ${e.message}`);
    throw e;
  }
}
