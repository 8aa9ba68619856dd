// The torch.save reader against files written by real torch.save (test/fixtures/generate/bgem3.py build_pickles):
// every value equals what torch.load gives (as float32), and everything outside a plain state_dict of float tensors
// is refused with a message naming the file and the reason, without running the pickle.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelLoadError } from "../../src/errors";
import { readTorchStateDict } from "../../src/model/torch-state-dict";
import { reference, ROOT } from "../helpers";

const DIR = join(ROOT, "test", "fixtures", "torch-state-dict");
const file = (name: string) => join(DIR, `${name}.pt`);

describe("readTorchStateDict: what torch.save writes", () => {
  test("float32, float16, bfloat16, a view with a storage offset, a shared storage, an empty tensor, a scalar, protocol 4: as torch.load reads them", async () => {
    const want: Record<string, Record<string, { shape: number[]; values: number[] }>> = await reference("torch-state-dict");
    expect(Object.keys(want).sort()).toEqual(["bfloat16", "empty", "float16", "float32", "offset", "protocol4", "shared"]);
    for (const [name, tensors] of Object.entries(want)) {
      const got = readTorchStateDict(file(name));
      expect([...got.keys()]).toEqual(Object.keys(tensors));
      for (const [key, t] of Object.entries(tensors)) {
        expect(got.get(key)!.shape).toEqual(t.shape);
        // Exact: each stored value widened to float32, as torch's .float().
        expect(Array.from(got.get(key)!.data)).toEqual(t.values.map(Math.fround));
      }
    }
  });

  test("FlagEmbedding's heads: torch.save(nn.Linear.state_dict()) with its _metadata, in float32 and float16", () => {
    const sparse = readTorchStateDict(join(ROOT, "test", "fixtures", "models", "bge-m3-baai", "sparse_linear.pt"));
    expect([...sparse.keys()]).toEqual(["weight", "bias"]);
    expect(sparse.get("weight")!.shape).toEqual([1, 32]);
    expect(sparse.get("bias")!.data[0]).toBeCloseTo(0.05, 7);
    const half = readTorchStateDict(file("colbert_linear.fp16"));
    const full = readTorchStateDict(join(ROOT, "test", "fixtures", "models", "bge-m3-baai", "colbert_linear.pt"));
    expect(half.get("weight")!.shape).toEqual([32, 32]);
    // float16 rounding: close to the float32 weights, not equal.
    const w16 = half.get("weight")!.data;
    const w32 = full.get("weight")!.data;
    let worst = 0;
    for (let i = 0; i < w32.length; i++) worst = Math.max(worst, Math.abs(w16[i]! - w32[i]!) / Math.max(1e-3, Math.abs(w32[i]!)));
    expect(worst).toBeGreaterThan(0);
    expect(worst).toBeLessThan(1e-3);
  });
});

describe("readTorchStateDict: refused, naming the file", () => {
  const refused = (path: string, message: RegExp) => {
    let error: unknown;
    try {
      readTorchStateDict(path);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ModelLoadError);
    expect((error as Error).message).toContain(path);
    expect((error as Error).message).toMatch(message);
  };

  test("tensors it cannot read as float32 rows", () => {
    refused(file("transposed"), /size \(4, 3\) has stride \(1, 4\): it is not contiguous/);
    refused(file("int64"), /stored as LongStorage; only float32, float16 and bfloat16 tensors are read/);
  });

  test("pickles of something else than a dict of tensors", () => {
    refused(file("list"), /entry weight is a list, not a tensor/);
    refused(file("not-a-dict"), /holds a list, not a state_dict/);
    refused(file("module"), /refers to torch\.nn\.modules\.linear\.Linear, which this reader does not allow/);
  });

  test("a global that would run code, and an opcode outside the reader's set", () => {
    refused(file("code"), /refers to os\.system, which this reader does not allow/);
    refused(file("unknown-opcode"), /opcode 0x49 at byte 18, which this reader does not run/);
  });

  test("torch's legacy format, truncated and damaged archives, a missing file", () => {
    refused(file("legacy"), /legacy \(pre-1\.6, non-zip\) serialization format/);
    const dir = mkdtempSync(join(tmpdir(), "torch-state-dict-"));
    try {
      const bytes = readFileSync(file("float32"));
      const cut = join(dir, "cut.pt");
      for (const length of [bytes.length - 30, 900, 100, 3]) {
        writeFileSync(cut, bytes.subarray(0, length));
        refused(cut, length > 3 ? /truncated/ : /not a torch\.save zip archive/);
      }
      // One byte of the first tensor's data changed: the entry's CRC-32 no longer matches.
      const damaged = Buffer.from(bytes);
      const at = damaged.indexOf(Buffer.from("float32/data/0"));
      expect(at).toBeGreaterThan(0);
      const header = damaged.lastIndexOf(Buffer.from([0x50, 0x4b, 0x03, 0x04]), at);
      const start = header + 30 + damaged.readUInt16LE(header + 26) + damaged.readUInt16LE(header + 28);
      damaged[start] ^= 0x40;
      writeFileSync(join(dir, "damaged.pt"), damaged);
      refused(join(dir, "damaged.pt"), /float32\/data\/0 fails its CRC-32 check/);
      writeFileSync(join(dir, "text.pt"), "not a pickle");
      refused(join(dir, "text.pt"), /not a torch\.save zip archive/);
      refused(join(dir, "absent.pt"), /cannot read/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
