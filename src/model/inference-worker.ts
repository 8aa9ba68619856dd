// The inference worker: owns one onnxruntime session. onnxruntime-node creates and runs a session synchronously
// on the thread that calls it, so on the main thread every batch stopped the event loop (no request read, no
// response written, /health silent) and two models' batches could never overlap. Here they run beside it.
import { ModelLoadError } from "../errors";
import { configureLog } from "../log";
import type { InferenceReply, InferenceRequest, InjectedFault } from "./inference-protocol";
import { createOrtSession, runOnce, type OrtSession } from "./onnx";
import { IdleTrim } from "./trim";

declare const self: Worker;

let session: OrtSession | null = null;
/** The graph one model output passes through after the runs that ask for its outputs (SessionHead), with its own session. */
let head: { input: string; outputs: Record<string, string>; session: OrtSession } | null = null;
/**
 * After a burst of runs, once idle, this thread's garbage (feed copies, output buffers) is collected and the C
 * allocator trimmed: one request of 64 x 512 tokens left the bench model's server at 289-311 MiB without it and
 * 270-272 MiB with it (bench/README.md "Memory").
 */
const idleTrim = new IdleTrim();

/** Padded tokens of a run: the elements of its first feed (input_ids; a media tower's pixels count as many). */
function feedTokens(feeds: Record<string, { dims: number[] }>): number {
  const first = Object.values(feeds)[0];
  return first ? first.dims.reduce((a, b) => a * b, 1) : 0;
}

/** Test-only (ModelSession.injectFault): dies or blocks the way a crashed or stuck native run would. */
function fault(kind: InjectedFault): never {
  if (kind === "exit") process.exit(70);
  if (kind === "throw") {
    setTimeout(() => {
      throw new Error("injected fault: uncaught error in the inference worker");
    });
    throw new Error("unreachable");
  }
  // Bounded so a forgotten test cannot hold a core forever.
  const until = Date.now() + 120_000;
  while (Date.now() < until) {}
  throw new Error("injected hang ended");
}

async function handle(m: InferenceRequest): Promise<InferenceReply> {
  switch (m.type) {
    case "create": {
      if (m.log) configureLog(m.log.level, m.log.format);
      if (m.fault) fault(m.fault);
      session = await createOrtSession(m.path, m.settings);
      head = m.head ? { input: m.head.input, outputs: m.head.outputs, session: await createOrtSession(m.head.graph, m.settings) } : null;
      const outputNames = [...session.session.outputNames];
      if (head && !outputNames.includes(head.input)) throw new ModelLoadError(`the model has no output ${head.input} for its head graph (it has ${outputNames.join(", ")})`);
      for (const name of Object.keys(head?.outputs ?? {})) if (!outputNames.includes(name)) outputNames.push(name);
      return {
        id: m.id, ok: true,
        created: { provider: session.provider, fallbackReason: session.fallbackReason, inputs: session.inputs, outputNames },
      };
    }
    case "run": {
      if (m.fault) fault(m.fault);
      if (!session) throw new Error("the inference worker has no session");
      const t0 = performance.now();
      idleTrim.busy();
      const h = head;
      const fromHead = h ? m.outputNames.filter((n) => Object.hasOwn(h.outputs, n)) : [];
      // The model runs once for what it gives and for the head's input; the head then gives the rest from that.
      const fromModel = [...new Set([...m.outputNames.filter((n) => !fromHead.includes(n)), ...(fromHead.length ? [h!.input] : [])])];
      const modelOut = await runOnce(session, m.feeds, fromModel);
      const headOut = fromHead.length
        ? await runOnce(h!.session, { x: modelOut[fromModel.indexOf(h!.input)]! }, fromHead.map((n) => h!.outputs[n]!))
        : [];
      const outputs = m.outputNames.map((name) => {
        const k = fromHead.indexOf(name);
        const o = k >= 0 ? headOut[k]! : modelOut[fromModel.indexOf(name)]!;
        return { name, data: o.data, dims: o.dims };
      });
      idleTrim.ran(feedTokens(m.feeds));
      return { id: m.id, ok: true, outputs, runMs: performance.now() - t0 };
    }
    case "release": {
      idleTrim.stop();
      await session?.session.release();
      await head?.session.session.release();
      session = null;
      head = null;
      return { id: m.id, ok: true };
    }
  }
}

self.onmessage = async (event: MessageEvent<InferenceRequest>) => {
  const m = event.data;
  let reply: InferenceReply;
  try {
    reply = await handle(m);
  } catch (e) {
    if (m.type !== "release" && m.fault === "throw") return;
    reply = { id: m.id, ok: false, error: (e as Error)?.message ?? String(e), loadError: e instanceof ModelLoadError };
  }
  // The outputs' buffers move to the main thread (the worker keeps nothing of them): cloning ~150 KB of a typical
  // output doubled the way back at concurrency 1 (0.29 against 0.14 ms). Buffers that cannot move are copied.
  const buffers = reply.ok && reply.outputs ? reply.outputs.map((o) => o.data.buffer) : [];
  if (buffers.length && buffers.every((b) => b instanceof ArrayBuffer) && new Set(buffers).size === buffers.length) {
    try {
      self.postMessage(reply, buffers as ArrayBuffer[]);
      return;
    } catch {
      // fall through: copy
    }
  }
  self.postMessage(reply);
};
