// The naive server: what one writes in ten minutes. Bun.serve, and every request calls a transformers.js
// feature-extraction pipeline on its own inputs (no batching across requests, no queue, no token budget).
// Same model files, same onnxruntime-node and the same intra-op thread setting as the other systems.
//
//   bun bench/naive-server.ts <model folder> <port> <intra-op threads>
import { env, pipeline } from "@huggingface/transformers";
import { basename, dirname, resolve } from "node:path";

const [dirArg, portArg, threadsArg] = process.argv.slice(2);
if (!dirArg || !portArg) {
  console.error("usage: bun bench/naive-server.ts <model folder> <port> [threads]");
  process.exit(2);
}
const dir = resolve(dirArg);
env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = dirname(dir) + "/";
const threads = Number(threadsArg ?? 0);

// onnxruntime-node is handed the file path, so it finds onnx/model.onnx_data next to onnx/model.onnx by itself.
const extractor = await pipeline("feature-extraction", basename(dir), {
  device: "cpu",
  dtype: "fp32",
  session_options: threads > 0 ? { intraOpNumThreads: threads, interOpNumThreads: 1 } : {},
} as Parameters<typeof pipeline>[2]);
const name = basename(dir);

function base64(v: Float32Array): string {
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64");
}

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: Number(portArg),
  idleTimeout: 0,
  async fetch(req) {
    const url = new URL(req.url);
    if (url.pathname === "/health") return Response.json({ status: "ready" });
    if (req.method !== "POST" || url.pathname !== "/embeddings") return new Response("not found", { status: 404 });
    const body = (await req.json()) as { input: string | string[]; encoding_format?: string };
    const texts = typeof body.input === "string" ? [body.input] : body.input;
    const out = await extractor(texts, { pooling: "cls", normalize: true });
    const dim = out.dims[1] as number;
    const flat = out.data as Float32Array;
    const data = texts.map((_, i) => {
      const v = flat.subarray(i * dim, (i + 1) * dim);
      return { object: "embedding", index: i, embedding: body.encoding_format === "base64" ? base64(v) : Array.from(v) };
    });
    // No usage counts: the pipeline does not return token counts, and the harness counts tokens itself.
    return Response.json({ object: "list", data, model: name });
  },
});
console.error(`naive server listening on ${server.url}`);
