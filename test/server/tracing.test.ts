// OpenTelemetry traces end to end: an OTLP/HTTP receiver on loopback decodes what the server exports (protobuf,
// decoded here by field number from opentelemetry-proto's trace.proto) and the test checks the span tree under a
// caller's traceparent. An unreachable collector never fails a request.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config";
import type { RunningServer } from "../../src/server/serve";
import { traceOf, tracesUrl } from "../../src/tracing";
import { fixture, postJson, startTestServer } from "../helpers";

/** A protobuf message's fields by number: varints and fixed64 as bigint, length-delimited as bytes. */
function fields(buf: Uint8Array): Map<number, Array<bigint | Uint8Array>> {
  const out = new Map<number, Array<bigint | Uint8Array>>();
  let at = 0;
  const varint = (): bigint => {
    let v = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const b = buf[at++]!;
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  while (at < buf.length) {
    const key = Number(varint());
    const [num, wire] = [key >> 3, key & 7];
    let value: bigint | Uint8Array;
    if (wire === 0) value = varint();
    else if (wire === 1) {
      value = new DataView(buf.buffer, buf.byteOffset + at, 8).getBigUint64(0, true);
      at += 8;
    } else if (wire === 2) {
      const len = Number(varint());
      value = buf.subarray(at, at + len);
      at += len;
    } else if (wire === 5) {
      value = BigInt(new DataView(buf.buffer, buf.byteOffset + at, 4).getUint32(0, true));
      at += 4;
    } else throw new Error(`wire type ${wire}`);
    out.set(num, [...(out.get(num) ?? []), value]);
  }
  return out;
}

type Value = string | number | boolean;
interface SpanRecord {
  traceId: string;
  spanId: string;
  parentId: string;
  name: string;
  kind: number;
  start: bigint;
  end: bigint;
  attributes: Record<string, Value>;
  statusCode: number;
  events: string[];
  service: string;
}

const hex = (b: Uint8Array | undefined) => (b ? Buffer.from(b).toString("hex") : "");
const text = (b: Uint8Array | undefined) => (b ? new TextDecoder().decode(b) : "");

function attributesOf(list: Array<bigint | Uint8Array> | undefined): Record<string, Value> {
  const out: Record<string, Value> = {};
  for (const kv of (list ?? []) as Uint8Array[]) {
    const f = fields(kv);
    const v = fields((f.get(2)?.[0] as Uint8Array) ?? new Uint8Array());
    const key = text(f.get(1)?.[0] as Uint8Array);
    if (v.has(1)) out[key] = text(v.get(1)![0] as Uint8Array);
    else if (v.has(2)) out[key] = v.get(2)![0] === 1n;
    else if (v.has(3)) out[key] = Number(BigInt.asIntN(64, v.get(3)![0] as bigint));
    else if (v.has(4)) out[key] = new DataView(new BigUint64Array([v.get(4)![0] as bigint]).buffer).getFloat64(0, true);
  }
  return out;
}

/** ExportTraceServiceRequest -> spans (resource_spans 1 -> resource 1 / scope_spans 2 -> spans 2). */
function decodeExport(body: Uint8Array): SpanRecord[] {
  const spans: SpanRecord[] = [];
  for (const rs of (fields(body).get(1) ?? []) as Uint8Array[]) {
    const r = fields(rs);
    const resource = attributesOf(fields((r.get(1)?.[0] as Uint8Array) ?? new Uint8Array()).get(1));
    for (const ss of (r.get(2) ?? []) as Uint8Array[]) {
      for (const sp of (fields(ss).get(2) ?? []) as Uint8Array[]) {
        const s = fields(sp);
        const status = fields((s.get(15)?.[0] as Uint8Array) ?? new Uint8Array());
        spans.push({
          traceId: hex(s.get(1)?.[0] as Uint8Array),
          spanId: hex(s.get(2)?.[0] as Uint8Array),
          parentId: hex(s.get(4)?.[0] as Uint8Array),
          name: text(s.get(5)?.[0] as Uint8Array),
          kind: Number(s.get(6)?.[0] ?? 0n),
          start: (s.get(7)?.[0] as bigint) ?? 0n,
          end: (s.get(8)?.[0] as bigint) ?? 0n,
          attributes: attributesOf(s.get(9)),
          statusCode: Number(status.get(3)?.[0] ?? 0n),
          events: ((s.get(11) ?? []) as Uint8Array[]).map((e) => text(fields(e).get(2)?.[0] as Uint8Array)),
          service: String(resource["service.name"] ?? ""),
        });
      }
    }
  }
  return spans;
}

const received: SpanRecord[] = [];
const contentTypes = new Set<string>();
let receiver: ReturnType<typeof Bun.serve>;
let server: RunningServer;

beforeAll(async () => {
  receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      if (req.method !== "POST" || new URL(req.url).pathname !== "/v1/traces") return new Response("no", { status: 404 });
      contentTypes.add(req.headers.get("content-type") ?? "");
      received.push(...decodeExport(new Uint8Array(await req.arrayBuffer())));
      return new Response(new Uint8Array(), { headers: { "content-type": "application/x-protobuf" } });
    },
  });
  server = await startTestServer({
    "model-id": fixture("bert-mean-norm"),
    "otlp-endpoint": `http://127.0.0.1:${receiver.port}`,
    "otlp-service-name": "embeddings-test",
    "result-cache": "memory",
    "model-warmup": "false",
  });
});
afterAll(async () => {
  await server.shutdown();
  receiver.stop(true);
});

async function spansOf(traceId: string, until: (spans: SpanRecord[]) => boolean): Promise<SpanRecord[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const spans = received.filter((s) => s.traceId === traceId);
    if (until(spans) || Date.now() > deadline) return spans;
    await Bun.sleep(50);
  }
}

describe("traces over OTLP/HTTP", () => {
  test("a request's spans join the caller's trace: server span, tokenize, cache, queue wait, batch > inference", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const callerSpan = "00f067aa0ba902b7";
    const res = await postJson(`${server.url}/embeddings`, { model: "bert-mean-norm", input: ["hello", "a longer text about cats", "x"] }, { traceparent: `00-${traceId}-${callerSpan}-01`, tracestate: "vendor=1" });
    expect(res.status).toBe(200);
    const spans = await spansOf(traceId, (s) => s.some((x) => x.name === "inference") && s.some((x) => x.kind === 2));
    const root = spans.find((s) => s.kind === 2)!; // SPAN_KIND_SERVER
    expect(root).toBeDefined();
    expect(root.parentId).toBe(callerSpan);
    expect(root.name).toBe("POST /embeddings");
    expect(root.service).toBe("embeddings-test");
    expect(root.attributes).toMatchObject({
      "http.request.method": "POST", "http.route": "/embeddings", "http.response.status_code": 200, "url.path": "/embeddings",
      "infinity.model": "bert-mean-norm", "infinity.inputs": 3, "infinity.cache.hits": 0,
    });
    const child = (name: string) => spans.find((s) => s.name === name && s.parentId === root.spanId);
    for (const name of ["tokenize", "cache lookup", "cache store", "queue wait", "batch"]) expect(child(name)).toBeDefined();
    const batch = child("batch")!;
    expect(batch.attributes["infinity.batch.size"]).toBeGreaterThanOrEqual(3);
    expect(batch.attributes["infinity.batch.tokens"]).toBeGreaterThan(0);
    expect(batch.attributes["infinity.batch.padded_tokens"]).toBeGreaterThanOrEqual(batch.attributes["infinity.batch.tokens"] as number);
    const inference = spans.find((s) => s.name === "inference")!;
    expect(inference.parentId).toBe(batch.spanId);
    // Time nests: the server span holds its children; the queue wait ends where the batch starts.
    for (const s of spans.filter((x) => x !== root)) {
      expect(s.start).toBeGreaterThanOrEqual(root.start);
      expect(s.end).toBeLessThanOrEqual(root.end);
    }
    expect(child("queue wait")!.end).toBe(batch.start);
    expect([...contentTypes]).toEqual(["application/x-protobuf"]);

    // The same texts again: answered by the cache, no batch.
    const again = await postJson(`${server.url}/embeddings`, { model: "bert-mean-norm", input: ["hello"] }, { traceparent: `00-${"1".repeat(32)}-${callerSpan}-01` });
    expect(again.status).toBe(200);
    const cached = await spansOf("1".repeat(32), (s) => s.some((x) => x.kind === 2));
    expect(cached.find((s) => s.kind === 2)!.attributes["infinity.cache.hits"]).toBe(1);
    expect(cached.some((s) => s.name === "batch")).toBe(false);
  });

  test("without a traceparent a request starts its own trace; a refused one records its error on the span", async () => {
    const before = received.length;
    const bad = await postJson(`${server.url}/embeddings`, { model: "bert-mean-norm", input: [] }, { traceparent: `00-${"2".repeat(32)}-${"3".repeat(16)}-01` });
    expect(bad.status).toBe(400);
    const [span] = await spansOf("2".repeat(32), (s) => s.length > 0);
    expect(span!.attributes["http.response.status_code"]).toBe(400);
    expect(span!.statusCode).toBe(0); // 4xx: the client's error, not the server's (HTTP semantic conventions)
    expect(span!.events).toContain("exception");
    await postJson(`${server.url}/embeddings`, { model: "bert-mean-norm", input: "fresh root" });
    const deadline = Date.now() + 10_000;
    let root: SpanRecord | undefined;
    while (!root && Date.now() < deadline) {
      root = received.slice(before).find((s) => s.kind === 2 && s.parentId === "" && s.attributes["infinity.inputs"] === 1 && s.name === "POST /embeddings");
      await Bun.sleep(50);
    }
    expect(root).toBeDefined();
    expect(root!.traceId).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe("off, and an unreachable collector", () => {
  test("off by default: no endpoint, and no trace context for any request", () => {
    const config = buildConfig({ flags: new Map([["model-id", ["m"]]]), env: {}, file: null, cpuCount: 2 });
    expect(config.otlpEndpoint).toBeNull();
    expect(config.otlpServiceName).toBe("infinity");
    const env = buildConfig({ flags: new Map([["model-id", ["m"]]]), env: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_SERVICE_NAME: "svc" }, file: null, cpuCount: 2 });
    expect([env.otlpEndpoint, env.otlpServiceName]).toEqual(["http://127.0.0.1:4318", "svc"]);
    expect(() => buildConfig({ flags: new Map([["model-id", ["m"]], ["otlp-endpoint", ["collector:4318"]]]), env: {}, file: null, cpuCount: 2 })).toThrow(/must be an http\(s\) URL/);
    expect(tracesUrl("http://c:4318/")).toBe("http://c:4318/v1/traces");
    expect(tracesUrl("http://c:4318/v1/traces")).toBe("http://c:4318/v1/traces");
  });

  test("a collector nobody listens on: every request is answered, and the server stops", async () => {
    // This server's tracer replaces the suite's; the receiver above has what it needs by now.
    const lonely = await startTestServer({ "model-id": fixture("bert-mean-norm"), "otlp-endpoint": "http://127.0.0.1:9", "model-warmup": "false" });
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => postJson(`${lonely.url}/embeddings`, { model: "bert-mean-norm", input: `text ${i}` })));
      expect(answers.every((a) => a.status === 200)).toBe(true);
    } finally {
      const t0 = Date.now();
      await lonely.shutdown();
      expect(Date.now() - t0).toBeLessThan(15_000);
    }
    expect(traceOf(new AbortController().signal)).toBeNull();
  }, 30_000);
});
