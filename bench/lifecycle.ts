// Models on demand on the benchmark model (bge-small architecture): seconds from the first request to its answer
// when the model is not loaded, and how much of the memory the model took an unload returns (RSS of the server
// process before the load, after it, and after POST /models/{name}/unload), over a few load/unload cycles.
// Usage: bun bench/lifecycle.ts [--cycles N] [--threads N] [--no-warmup]
import { ensureBenchModel } from "./model";
import { startServer } from "./process";
import { residentSplitMb, rssMb } from "./stats";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

/** RSS once it stops falling (memory is returned to the OS over a short while after an unload). */
const split = (pid: number) => {
  const m = residentSplitMb(pid);
  return `anon ${m.anon.toFixed(0)} + file ${m.file.toFixed(0)}`;
};

async function settledRss(pid: number): Promise<number> {
  let last = rssMb(pid);
  for (let i = 0; i < 20; i++) {
    await Bun.sleep(250);
    const now = rssMb(pid);
    if (Math.abs(now - last) < 0.5) return now;
    last = now;
  }
  return last;
}

if (import.meta.main) {
  const cycles = Number(arg("cycles", "3"));
  const threads = arg("threads", "2");
  const warmup = !process.argv.includes("--no-warmup");
  const model = ensureBenchModel({ log: (m) => console.error(m) });
  const name = "bench";
  const server = await startServer([
    "--model-id", model, "--served-model-name", name, "--load", "on-demand", "--num-threads", threads,
    ...(warmup ? [] : ["--no-model-warmup"]),
  ]);
  const post = (path: string, body?: unknown) =>
    fetch(`${server.url}${path}`, { method: "POST", ...(body ? { headers: { "content-type": "application/json" }, body: JSON.stringify(body) } : {}) });
  try {
    console.log(`models on demand: bge-small architecture (${model}), --num-threads ${threads}, warm-up ${warmup ? "on" : "off"}, ${cycles} cycles`);
    const rows: string[] = [];
    for (let c = 0; c < cycles; c++) {
      const before = await settledRss(server.pid);
      const splitBefore = split(server.pid);
      const t0 = performance.now();
      const res = await post("/embeddings", { input: "the first request for a model that is not loaded" });
      const firstAnswer = (performance.now() - t0) / 1000;
      if (res.status !== 200) throw new Error(`first request: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
      const loaded = await settledRss(server.pid);
      const splitLoaded = split(server.pid);
      const entry = ((await (await fetch(`${server.url}/models`)).json()) as { data: Array<{ id: string; load_seconds: number; memory_bytes: number }> }).data.find((m) => m.id === name)!;
      const unload = await post(`/models/${name}/unload`);
      if (unload.status !== 200) throw new Error(`unload: ${unload.status} ${await unload.text()}`);
      // The server trims again a second after the unload, once the inference worker thread has ended.
      await Bun.sleep(1500);
      const after = await settledRss(server.pid);
      const took = loaded - before;
      const freed = loaded - after;
      rows.push(
        `cycle ${c + 1}: first answer ${firstAnswer.toFixed(2)} s (load ${entry.load_seconds.toFixed(2)} s, measured ${(entry.memory_bytes / 1048576).toFixed(0)} MB); ` +
          `RSS ${before.toFixed(0)} -> ${loaded.toFixed(0)} -> ${after.toFixed(0)} MB after unload: took ${took.toFixed(0)} MB, freed ${freed.toFixed(0)} MB (${((100 * freed) / took).toFixed(0)}%); ` +
          `resident (smaps_rollup, MB): ${splitBefore} -> ${splitLoaded} -> ${split(server.pid)}`,
      );
      console.log(rows[rows.length - 1]);
    }
  } finally {
    await server.stop();
  }
}
