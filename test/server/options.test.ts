// Per-model options that change what is loaded or how it runs, each checked on a live server.
import { describe, expect, test } from "bun:test";
import { availableParallelism } from "node:os";
import { calibrationTrusted } from "../../src/engine/batcher";
import { CPU_BATCH_TOKENS } from "../../src/engine/memory-budget";
import { providerOrder } from "../../src/model/onnx";
import { cosine, fixture, l2, maxAbsDiff, postJson, reference, startTestServer } from "../helpers";
import { INT8_ACROSS_CPUS, INT8_MIN_COSINE_TO_FP32, int8Session, meanPooledAlone } from "../int8";

describe("--dtype loads the hub's variant files", () => {
  for (const [dtype, file] of [["int8", "onnx/model_quantized.onnx"], ["float16", "onnx/model_fp16.onnx"]] as const) {
    test(`${dtype} -> ${file}`, async () => {
      const variants = (await reference("bert-mean-norm.variants")).variants[file];
      const fp32 = (await reference("bert-mean-norm")).cases as Array<{ text: string; input_ids: number[]; embedding: number[] }>;
      const cases = variants.cases as Array<{ text: string; embedding: number[] }>;
      expect(cases.map((c) => c.text)).toEqual(fp32.map((c) => c.text));
      // int8: what the original graph gives each text alone in onnxruntime on THIS machine (int8 kernels differ by
      // instruction set, test/int8.ts), by default and on the non-saturating u8u8 path; float16: the stored reference
      // (Python onnxruntime, one text at a time), within 1e-3.
      let want = cases.map((c) => l2(c.embedding));
      let tol = 1e-3;
      if (dtype === "int8") {
        const [plain, precise] = [await int8Session("bert-mean-norm"), await int8Session("bert-mean-norm", true)];
        want = await Promise.all(fp32.map((c) => meanPooledAlone(plain, c.input_ids)));
        const other = await Promise.all(fp32.map((c) => meanPooledAlone(precise, c.input_ids)));
        await Promise.all([plain.release(), precise.release()]);
        tol = 1e-6;
        want.forEach((v, i) => {
          // the stored int8 reference came from another machine: an int8 bound, and the fp32 reference's direction
          expect(maxAbsDiff(v, l2(cases[i]!.embedding))).toBeLessThanOrEqual(INT8_ACROSS_CPUS.embedding);
          expect(cosine(v, fp32[i]!.embedding)).toBeGreaterThanOrEqual(INT8_MIN_COSINE_TO_FP32);
          // the two u8s8 kernels (saturating without VNNI, exact with it) where this machine has both
          expect(maxAbsDiff(v, other[i]!)).toBeLessThanOrEqual(INT8_ACROSS_CPUS.embedding);
        });
      }
      const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), dtype });
      try {
        const models = (await (await fetch(`${s.url}/models`)).json()) as { data: Array<{ dtype: string }> };
        expect(models.data[0]!.dtype).toBe(dtype);
        // The reference ran one text at a time. One text per request, then all in one request (one batch of mixed
        // lengths, padded): the int8 file's dynamic quantization is rewritten at load to scale each input over its
        // own tokens (model/rowwise-quant.ts), so batched rows get the numbers they get alone.
        let worst = 0;
        for (const [i, c] of cases.entries()) {
          const r = await postJson(`${s.url}/embeddings`, { input: c.text, encoding_format: "float" });
          expect(r.status).toBe(200);
          worst = Math.max(worst, maxAbsDiff(r.json.data[0].embedding, want[i]!));
        }
        const all = await postJson(`${s.url}/embeddings`, { input: cases.map((c) => c.text), encoding_format: "float" });
        expect(all.status).toBe(200);
        const lengths = new Set(all.json.data.map((_: unknown, i: number) => cases[i]!.text.length));
        expect(lengths.size).toBeGreaterThan(1);
        cases.forEach((_, i) => (worst = Math.max(worst, maxAbsDiff(all.json.data[i].embedding, want[i]!))));
        expect(worst).toBeLessThanOrEqual(tol);
      } finally {
        await s.shutdown();
      }
    });
  }
});

describe("device, pooling, warm-up, queue", () => {
  test("--run-overhead-tokens: 0 calibrates at warm-up with batches of 1-8 rows, a value skips that, no warm-up keeps 24", async () => {
    const s = await startTestServer({
      "model-id": [fixture("bert-mean-norm"), fixture("bert-mean-norm"), fixture("bert-mean-norm")],
      "served-model-name": ["calibrated", "flag", "cold"],
      "run-overhead-tokens": ["0", "40", "0"],
      "model-warmup": ["true", "true", "false"],
      // A fixed token budget: its warm-up timing (a timed number of sizes) would differ between the models.
      "max-batch-tokens": "512",
    });
    try {
      const models = (await (await fetch(`${s.url}/models`)).json()) as { data: Array<{ id: string; run_overhead_tokens: number; run_overhead_source: string; calibration_other_load: number | null }> };
      const by = Object.fromEntries(models.data.map((m) => [m.id, m]));
      expect([by.flag!.run_overhead_tokens, by.flag!.run_overhead_source]).toEqual([40, "flag"]);
      expect([by.cold!.run_overhead_tokens, by.cold!.run_overhead_source]).toEqual([24, "default"]);
      expect(by.cold!.calibration_other_load).toBeNull();
      // A tiny model's per-token cost can drown in timing noise (then the fit gives no answer), and timings taken
      // while other processes were busy are not used: then the constant stays.
      const cal = by.calibrated!;
      if (cal.run_overhead_source === "calibrated") {
        expect(cal.run_overhead_tokens).toBeGreaterThanOrEqual(4);
        expect(cal.run_overhead_tokens).toBeLessThanOrEqual(256);
      } else expect([cal.run_overhead_tokens, cal.run_overhead_source]).toEqual([24, "default"]);
      if (process.platform === "linux") expect(cal.calibration_other_load).toBeGreaterThanOrEqual(0);
      // Same warm-up batches for both; calibration adds 5 rounds of batches of 1, 2, 4 and 8 rows of about 32 tokens
      // (within the budget: 8 x 32 < 512).
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      const value = (series: string) => Number(metrics.split("\n").find((l) => l.startsWith(`${series} `))?.split(" ")[1] ?? -1);
      const runs = (model: string) => value(`infinity_batch_size_count{model="${model}"}`);
      const upTo = (model: string, le: number) => value(`infinity_batch_size_bucket{model="${model}",le="${le}"}`);
      expect(runs("calibrated") - runs("flag")).toBe(20);
      for (const le of [1, 2, 4, 8]) expect(upTo("calibrated", le) - upTo("flag", le)).toBe(5 * Math.log2(2 * le));
      expect(runs("cold")).toBe(-1);
    } finally {
      await s.shutdown();
    }
  });

  test.skipIf(process.platform !== "linux")("warm-up timings taken while other processes keep every core busy are not used: the constants stay", async () => {
    // One busy loop per core, started before the server and running through its warm-up.
    const loops = Array.from({ length: availableParallelism() }, () => Bun.spawn([process.execPath, "-e", "for (;;) {}"], { stdout: "ignore", stderr: "ignore" }));
    try {
      await Bun.sleep(300);
      const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), "max-batch-tokens": "0", "run-overhead-tokens": "0" });
      try {
        const models = (await (await fetch(`${s.url}/models`)).json()) as { data: Array<{ max_batch_tokens: number; max_batch_tokens_source: string; run_overhead_tokens: number; run_overhead_source: string; calibration_other_load: number }> };
        const m = models.data[0]!;
        expect(calibrationTrusted(m.calibration_other_load, availableParallelism())).toBe(false);
        expect([m.max_batch_tokens, m.max_batch_tokens_source]).toEqual([CPU_BATCH_TOKENS, "default"]);
        expect([m.run_overhead_tokens, m.run_overhead_source]).toEqual([24, "default"]);
        const res = await postJson(`${s.url}/embeddings`, { input: ["a", "b c"] });
        expect(res.status).toBe(200);
      } finally {
        await s.shutdown();
      }
    } finally {
      for (const p of loops) p.kill();
    }
  });

  test("--max-batch-tokens: 0 times the budget at warm-up (batches of doubling size), a value skips that, no warm-up keeps the CPU constant", async () => {
    const s = await startTestServer({
      "model-id": [fixture("bert-mean-norm"), fixture("bert-mean-norm"), fixture("bert-mean-norm")],
      "served-model-name": ["timed", "flag", "cold"],
      "max-batch-tokens": ["0", "300", "0"],
      "model-warmup": ["true", "true", "false"],
      "run-overhead-tokens": "24",
    });
    try {
      const models = (await (await fetch(`${s.url}/models`)).json()) as { data: Array<{ id: string; max_batch_tokens: number; max_batch_tokens_source: string; max_length: number; batch_size: number; calibration_other_load: number | null }> };
      const by = Object.fromEntries(models.data.map((m) => [m.id, m]));
      expect([by.flag!.max_batch_tokens, by.flag!.max_batch_tokens_source]).toEqual([300, "flag"]);
      expect([by.cold!.max_batch_tokens, by.cold!.max_batch_tokens_source]).toEqual([CPU_BATCH_TOKENS, "default"]);
      const timed = by.timed!;
      // Timings taken while other processes were busy are not used (the next test): the constant then stays.
      if (timed.max_batch_tokens_source === "default") {
        expect(timed.max_batch_tokens).toBe(CPU_BATCH_TOKENS);
        expect(calibrationTrusted(timed.calibration_other_load, availableParallelism())).toBe(false);
        return;
      }
      expect(timed.max_batch_tokens_source).toBe("calibrated");
      // The fixture's max length is 48: sizes of 3, 5, 11, 21 and 32 rows of at most 48 tokens can be timed.
      expect(timed.max_batch_tokens).toBeGreaterThanOrEqual(3 * 24);
      expect(timed.max_batch_tokens).toBeLessThanOrEqual(timed.batch_size * timed.max_length);
      // Same warm-up for both otherwise. Each size timed is one uncounted run and five timed ones; each size after
      // the first three is timed alternately with the one before (five more runs of that): n sizes, 6n + 5(n - 3) runs.
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      const value = (series: string) => Number(metrics.split("\n").find((l) => l.startsWith(`${series} `))?.split(" ")[1] ?? -1);
      const extra = value(`infinity_batch_size_count{model="timed"}`) - value(`infinity_batch_size_count{model="flag"}`);
      const sizes = (extra + 15) / 11;
      expect(Number.isInteger(sizes) && sizes >= 3 && sizes <= 5).toBe(true);
      // The timed model serves as it should.
      const res = await postJson(`${s.url}/embeddings`, { model: "timed", input: ["a", "b c"] });
      expect(res.status).toBe(200);
    } finally {
      await s.shutdown();
    }
  });

  test("--device cuda on a machine without CUDA falls back to the CPU and keeps serving", async () => {
    expect(providerOrder("cuda")).toEqual(["cuda", "cpu"]);
    expect(providerOrder("auto", "linux", () => false)).toEqual(["cpu"]);
    expect(providerOrder("auto", "linux", () => true)).toEqual(["cuda", "cpu"]);
    expect(providerOrder("auto", "darwin")).toEqual(["coreml", "cpu"]);
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), device: "cuda", "model-warmup": "false" });
    try {
      const models = (await (await fetch(`${s.url}/models`)).json()) as { data: Array<{ backend: string }> };
      expect(models.data[0]!.backend).toBe("onnxruntime/cpu");
      expect((await postJson(`${s.url}/embeddings`, { input: "x" })).status).toBe(200);
    } finally {
      await s.shutdown();
    }
  });

  test("--pooling-method overrides the model's pooling", async () => {
    const ref = await reference("bert-mean-norm");
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), "pooling-method": "cls", "model-warmup": "false" });
    try {
      const models = (await (await fetch(`${s.url}/models`)).json()) as { data: Array<{ pooling: string }> };
      expect(models.data[0]!.pooling).toBe("cls");
      const r = await postJson(`${s.url}/embeddings`, { input: ref.cases[3].text, encoding_format: "float" });
      // CLS pooling gives another vector than the reference's mean pooling.
      expect(maxAbsDiff(r.json.data[0].embedding, l2(ref.cases[3].embedding))).toBeGreaterThan(1e-2);
    } finally {
      await s.shutdown();
    }
  });

  test("--max-queue-size: a request that does not fit the queue gets 429 with Retry-After", async () => {
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), "max-queue-size": "4", "batch-size": "1", "model-warmup": "false" });
    try {
      const big = Array.from({ length: 4 }, (_, i) => `text number ${i}`);
      const results = await Promise.all(Array.from({ length: 6 }, () => postJson(`${s.url}/embeddings`, { input: big })));
      const refused = results.filter((r) => r.status === 429);
      expect(refused.length).toBeGreaterThan(0);
      expect(Number(refused[0]!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(refused[0]!.json.error.type).toBe("overloaded_error");
      for (const r of results) expect([200, 429]).toContain(r.status);
      const five = await postJson(`${s.url}/embeddings`, { input: [...big, "one more"] });
      expect(five.status).toBe(429);
    } finally {
      await s.shutdown();
    }
  });

  test("--permissive-cors allows any origin", async () => {
    const s = await startTestServer({ "model-id": fixture("bert-mean-norm"), "permissive-cors": "true", "model-warmup": "false" });
    try {
      const r = await fetch(`${s.url}/models`, { headers: { origin: "https://anything.example" } });
      expect(r.headers.get("access-control-allow-origin")).toBe("*");
    } finally {
      await s.shutdown();
    }
  });
});
