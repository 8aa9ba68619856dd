// Resident memory of a server after long inputs: rounds of four concurrent /embeddings requests of two texts of up
// to 1,000,000 characters each (the default --max-input-chars), VmRSS when ready, after each round and some seconds
// after the last. Two input sets: texts the Encoder cuts before tokenizing (letters, CJK, mixed scripts, words then
// one long word) and texts it still tokenizes whole (runs of spaces, line breaks, tabs), whose encodings the Rust
// library allocates on libuv's pool threads and glibc's arenas keep once freed unless they are handed back
// (src/model/trim.ts collect, called by the tokenizer worker). RSS counts pages, not time: load on the machine does not move it.
//
//   bun bench/long-input-memory.ts [--model DIR] [--rounds N] [--settle SECONDS] [--server-root DIR]
//   (default: test/fixtures/models/qwen3-embed, 3 rounds, 8 s; --server-root runs another checkout's server)
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { REPO_ROOT } from "./model";
import { startSystem, stop } from "./system";
import { rssMb } from "./stats";
import { letters } from "./workload";

const N = 1_000_000;
const SETS: Record<string, () => string[]> = {
  "cut before tokenizing": () => [
    letters(N, "abcdefghijklmnopqrstuvwxyz", 1),
    letters(N, "的一是不了人我在有他这为之大来以个中上们", 4),
    letters(N / 2, "abcxyzéжд日本語😀🎉1234!?.-", 6),
    ("hello world ".repeat(100) + "b".repeat(N)).slice(0, N),
  ],
  "tokenized whole": () => [" ".repeat(N), "\n".repeat(N), " \n".repeat(N / 2), "\t ".repeat(N / 2)],
};

const { values } = parseArgs({
  options: { model: { type: "string" }, rounds: { type: "string" }, settle: { type: "string" }, "server-root": { type: "string" } },
});
const modelDir = resolve(values.model ?? `${REPO_ROOT}/test/fixtures/models/qwen3-embed`);
const rounds = Number(values.rounds ?? 3);
const settleMs = Number(values.settle ?? 8) * 1000;
const serverRoot = resolve(values["server-root"] ?? REPO_ROOT);

console.log(`server ${serverRoot}, model ${modelDir}, ${rounds} rounds of 4 concurrent requests x 2 texts`);
console.log("| inputs | RSS ready | after each round | after " + settleMs / 1000 + " s |");
console.log("|---|---:|---|---:|");
for (const [label, make] of Object.entries(SETS)) {
  const texts = make();
  const r = await startSystem("server", modelDir, 0, [], serverRoot);
  try {
    const pid = r.proc.pid;
    const name = ((await (await fetch(`${r.url}/models`)).json()) as { data: Array<{ id: string }> }).data[0]!.id;
    const ready = rssMb(pid);
    const after: number[] = [];
    for (let round = 0; round < rounds; round++) {
      await Promise.all(
        texts.map(async (t) => {
          const res = await fetch(`${r.url}/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: name, input: [t, t.slice(0, N / 2)], encoding_format: "base64" }) });
          if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
          await res.arrayBuffer();
        }),
      );
      after.push(rssMb(pid));
    }
    await Bun.sleep(settleMs);
    console.log(`| ${label} | ${ready.toFixed(0)} MiB | ${after.map((x) => x.toFixed(0)).join(", ")} MiB | ${rssMb(pid).toFixed(0)} MiB |`);
  } finally {
    await stop(r);
  }
}
