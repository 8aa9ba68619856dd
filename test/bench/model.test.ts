// The benchmark model generator, on small tensors only: the full 130 MB data file is never written here.
import { describe, expect, test } from "bun:test";
import { checkManifest, fillTensor, readManifest, SKELETONS, skeletonPresent, tensorBuffer, type Manifest, type TensorSpec } from "../../bench/model";

const SMALL = 64 * 1024;

for (const variant of ["fp32", "int8"] as const) {
  describe.skipIf(!skeletonPresent(variant))(`bench model generator (${variant} skeleton)`, () => {
    const m: Manifest = skeletonPresent(variant) ? readManifest(SKELETONS[variant]) : ({ tensors: [] } as unknown as Manifest);
    const small = m.tensors.map((t, i) => [t, i] as [TensorSpec, number]).filter(([t]) => t.length <= SMALL);

    test("manifest tensors tile the data file exactly", () => {
      expect(() => checkManifest(m)).not.toThrow();
      const total = m.tensors.reduce((s, t) => s + t.length, 0);
      expect(total).toBe(m.data_bytes);
      const last = m.tensors[m.tensors.length - 1]!;
      expect(last.offset + last.length).toBe(m.data_bytes);
    });

    test("a gap or a wrong size in the manifest is refused", () => {
      const gap = structuredClone(m);
      gap.tensors[1]!.offset += 4;
      expect(() => checkManifest(gap)).toThrow(/starts at/);
      const short = structuredClone(m);
      short.data_bytes += 1;
      expect(() => checkManifest(short)).toThrow(/cover/);
    });

    test("every kind present is filled by its rule, deterministically per seed", () => {
      expect(small.length).toBeGreaterThan(0);
      const kinds = new Set<string>();
      for (const [t, i] of small) {
        const rule = m.fill[t.kind]!;
        const a = tensorBuffer(t);
        const b = tensorBuffer(t);
        fillTensor(t, i, rule, 7, a);
        fillTensor(t, i, rule, 7, b);
        expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true);
        if (rule.distribution === "constant") {
          const f = new Float32Array(a.buffer, 0, t.elements);
          expect(f.every((x) => x === rule.value)).toBe(true);
        } else {
          const c = tensorBuffer(t);
          fillTensor(t, i, rule, 8, c);
          expect(Buffer.from(a).equals(Buffer.from(c))).toBe(false);
        }
        kinds.add(t.kind);
      }
      expect(kinds.size).toBeGreaterThan(1);
    });

    test("normal weights have the manifest's mean and std; streams differ between tensors", () => {
      const weights = m.tensors.map((t, i) => [t, i] as [TensorSpec, number]).filter(([t]) => m.fill[t.kind]!.distribution === "normal" && t.length <= 4 * 1024 * 1024);
      if (weights.length < 2) return; // the int8 skeleton keeps no float weights of this size
      const stats = weights.slice(0, 2).map(([t, i]) => {
        const buf = tensorBuffer(t);
        fillTensor(t, i, m.fill[t.kind]!, 1, buf);
        const f = new Float32Array(buf.buffer, 0, t.elements);
        let s = 0, s2 = 0;
        for (const x of f) { s += x; s2 += x * x; }
        const mean = s / f.length;
        return { mean, std: Math.sqrt(s2 / f.length - mean * mean), head: f.slice(0, 8) };
      });
      const rule = m.fill.weight!;
      for (const st of stats) {
        expect(Math.abs(st.mean - (rule.mean ?? 0))).toBeLessThan(0.002);
        expect(Math.abs(st.std - rule.std!) / rule.std!).toBeLessThan(0.02);
      }
      expect(Array.from(stats[0]!.head)).not.toEqual(Array.from(stats[1]!.head));
    });

    test("integer weights stay in their range", () => {
      const ints = m.tensors.map((t, i) => [t, i] as [TensorSpec, number]).filter(([t]) => m.fill[t.kind]!.distribution === "uniform_int").slice(0, 2);
      for (const [t, i] of ints) {
        const rule = m.fill[t.kind]!;
        const buf = tensorBuffer(t);
        fillTensor(t, i, rule, 3, buf);
        const view = t.dtype === "int8" ? new Int8Array(buf.buffer, 0, t.elements) : buf;
        let lo = Infinity, hi = -Infinity;
        for (const x of view) { if (x < lo) lo = x; if (x > hi) hi = x; }
        expect(lo).toBeGreaterThanOrEqual(rule.low!);
        expect(hi).toBeLessThanOrEqual(rule.high!);
        expect(hi - lo).toBeGreaterThan((rule.high! - rule.low!) / 2);
      }
    });
  });
}

test("generator module loads without the skeleton", () => {
  expect(typeof skeletonPresent()).toBe("boolean");
});
