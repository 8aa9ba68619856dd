// Tracing's cost: this server with --otlp-endpoint (spans exported to a receiver on loopback) against the same server
// without it, both up at once, on the bench model; cells of 1-input /embeddings requests at concurrency 32,
// alternating between the two, best cell of each counted.
//
//   bun bench/tracing.ts [--seconds S] [--rounds N]     (writes bench/results/tracing.md)
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ensureBenchModel, REPO_ROOT } from "./model";
import { startServer } from "./process";
import { makeWorkload } from "./workload";

const { values } = parseArgs({ options: { seconds: { type: "string", default: "10" }, rounds: { type: "string", default: "3" } }, strict: true });
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const log = (m: string) => process.stderr.write(`[tracing] ${m}\n`);

let spansBytes = 0;
let exports = 0;
const receiver = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    spansBytes += (await req.arrayBuffer()).byteLength;
    exports++;
    return new Response(new Uint8Array(), { headers: { "content-type": "application/x-protobuf" } });
  },
});

const model = ensureBenchModel({ log });
const texts = (await makeWorkload(model, 512)).texts.map((t) => t.text);
const common = ["--model-id", model, "--served-model-name", "m", "--no-model-warmup"];
const servers = {
  off: await startServer(common),
  on: await startServer([...common, "--otlp-endpoint", `http://127.0.0.1:${receiver.port}`]),
};

async function cell(url: string): Promise<number> {
  let done = 0;
  let next = 0;
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (performance.now() < end) {
        const text = texts[next++ % texts.length]!;
        const res = await fetch(`${url}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m", input: text, encoding_format: "base64" }) });
        if (res.status !== 200) throw new Error(`status ${res.status}`);
        await res.arrayBuffer();
        done++;
      }
    }),
  );
  return done / ((performance.now() - t0) / 1000);
}

const best = { off: 0, on: 0 };
const cells: string[] = [];
for (let r = 0; r < rounds; r++) {
  for (const which of r % 2 ? (["on", "off"] as const) : (["off", "on"] as const)) {
    const rps = await cell(servers[which].url);
    best[which] = Math.max(best[which], rps);
    cells.push(`${which} ${rps.toFixed(1)}`);
    log(`round ${r + 1} ${which}: ${rps.toFixed(1)} requests/s`);
  }
}
await servers.off.stop();
await servers.on.stop();
receiver.stop(true);

const md = [
  "# Tracing overhead",
  "",
  `\`bun bench/tracing.ts --seconds ${seconds} --rounds ${rounds}\`, ${new Date().toISOString().slice(0, 10)}: bge-small-shaped bench model, 1-input requests at concurrency 32, cells alternating, best of ${rounds} each.`,
  "",
  "| server | requests/s (best cell) |",
  "|---|---|",
  `| tracing off | ${best.off.toFixed(1)} |`,
  `| --otlp-endpoint (loopback receiver) | ${best.on.toFixed(1)} |`,
  "",
  `On / off: ${(best.on / best.off).toFixed(3)}x. Cells in order: ${cells.join(", ")}. The receiver took ${exports} exports, ${(spansBytes / 1024).toFixed(0)} KiB.`,
  "",
].join("\n");
mkdirSync(join(REPO_ROOT, "bench", "results"), { recursive: true });
writeFileSync(join(REPO_ROOT, "bench", "results", "tracing.md"), md);
process.stdout.write(md);
