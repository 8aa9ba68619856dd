// A small Prometheus registry: counters, gauges and histograms with labels, rendered in the text exposition format.

type Labels = Record<string, string>;

function labelKey(labels: Labels): string {
  const keys = Object.keys(labels).sort();
  return keys.map((k) => `${k}="${String(labels[k]).replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')}"`).join(",");
}

abstract class Metric {
  constructor(
    readonly name: string,
    readonly help: string,
    readonly kind: "counter" | "gauge" | "histogram",
  ) {}
  abstract lines(): string[];
  header(): string[] {
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${this.kind}`];
  }
}

export class Counter extends Metric {
  private readonly values = new Map<string, number>();
  constructor(name: string, help: string) {
    super(name, help, "counter");
  }
  inc(labels: Labels = {}, by = 1): void {
    const k = labelKey(labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  get(labels: Labels = {}): number {
    return this.values.get(labelKey(labels)) ?? 0;
  }
  lines(): string[] {
    return [...this.values].map(([k, v]) => `${this.name}${k ? `{${k}}` : ""} ${v}`);
  }
}

export class Gauge extends Metric {
  private readonly values = new Map<string, number | (() => number)>();
  constructor(name: string, help: string) {
    super(name, help, "gauge");
  }
  set(labels: Labels, value: number | (() => number)): void {
    this.values.set(labelKey(labels), value);
  }
  lines(): string[] {
    return [...this.values].map(([k, v]) => `${this.name}${k ? `{${k}}` : ""} ${typeof v === "function" ? v() : v}`);
  }
}

export class Histogram extends Metric {
  private readonly series = new Map<string, { counts: number[]; sum: number; count: number }>();
  constructor(
    name: string,
    help: string,
    readonly buckets: readonly number[],
  ) {
    super(name, help, "histogram");
  }
  observe(labels: Labels, value: number): void {
    const k = labelKey(labels);
    let s = this.series.get(k);
    if (!s) {
      s = { counts: new Array(this.buckets.length).fill(0), sum: 0, count: 0 };
      this.series.set(k, s);
    }
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) s.counts[i]++;
    s.sum += value;
    s.count++;
  }
  lines(): string[] {
    const out: string[] = [];
    for (const [k, s] of this.series) {
      const sep = k ? "," : "";
      this.buckets.forEach((b, i) => out.push(`${this.name}_bucket{${k}${sep}le="${b}"} ${s.counts[i]}`));
      out.push(`${this.name}_bucket{${k}${sep}le="+Inf"} ${s.count}`);
      out.push(`${this.name}_sum${k ? `{${k}}` : ""} ${s.sum}`);
      out.push(`${this.name}_count${k ? `{${k}}` : ""} ${s.count}`);
    }
    return out;
  }
}

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Every metric the server exports; one instance per server. */
export class Metrics {
  readonly requests = new Counter("infinity_requests_total", "HTTP requests by route, model and status");
  readonly requestsInFlight = new Gauge("infinity_requests_in_flight", "HTTP requests received and not yet answered (this scrape included)");
  readonly requestSeconds = new Histogram("infinity_request_duration_seconds", "HTTP request latency", SECONDS);
  readonly queueSeconds = new Histogram("infinity_queue_duration_seconds", "time inputs wait before their batch starts", SECONDS);
  readonly inferenceSeconds = new Histogram("infinity_inference_duration_seconds", "onnxruntime time per batch", SECONDS);
  readonly batchSize = new Histogram("infinity_batch_size", "inputs per batch", [1, 2, 4, 8, 16, 32, 64, 128, 256]);
  readonly batchTokens = new Histogram("infinity_batch_tokens", "padded tokens per batch", [16, 64, 256, 1024, 4096, 16384, 65536]);
  readonly tokens = new Counter("infinity_tokens_total", "tokens processed (without padding)");
  readonly queueDepth = new Gauge("infinity_queue_depth", "inputs waiting in the queue");
  readonly rejected = new Counter("infinity_rejected_total", "inputs refused because the queue was full");
  readonly truncated = new Counter("infinity_truncated_inputs_total", "inputs cut to the model's maximum length");
  readonly memoryBytes = new Gauge("infinity_model_memory_bytes", "resident memory measured at model load");
  readonly workerRestarts = new Counter("infinity_inference_worker_restarts_total", "inference workers replaced after dying or hanging");
  readonly eventLoopLag = new Histogram(
    "infinity_event_loop_lag_seconds",
    "how late a 20 ms timer on the main thread fires: time the event loop could not answer anything",
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  );
  readonly modelLoads = new Counter("infinity_model_loads_total", "models loaded (at startup, on demand or by POST /models/{name}/load)");
  readonly modelLoadFailures = new Counter("infinity_model_load_failures_total", "model loads that failed");
  readonly modelLoadSeconds = new Histogram("infinity_model_load_seconds", "time to load a model: sessions, tokenizer, warm-up", [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]);
  readonly modelUnloads = new Counter("infinity_model_unloads_total", "models unloaded, by reason (idle, evicted, admin)");
  readonly modelEvictions = new Counter("infinity_model_evictions_total", "idle models unloaded to keep loaded models within --max-models-memory-mb");
  readonly cacheHits = new Counter("infinity_result_cache_hits_total", "inputs answered from the result cache");
  readonly cacheMisses = new Counter("infinity_result_cache_misses_total", "inputs looked up in the result cache and computed");
  readonly cacheEvictions = new Counter("infinity_result_cache_evictions_total", "result cache entries evicted to stay within --result-cache-size-mb");
  readonly cacheErrors = new Counter("infinity_result_cache_errors_total", "result cache calls that failed (the inputs were computed)");
  readonly cacheBytes = new Gauge("infinity_result_cache_bytes", "bytes held by the result cache (memory and sqlite backends)");

  render(): string {
    const all: Metric[] = [
      this.requests, this.requestsInFlight, this.requestSeconds, this.queueSeconds, this.inferenceSeconds, this.batchSize,
      this.batchTokens, this.tokens, this.queueDepth, this.rejected, this.truncated, this.memoryBytes, this.workerRestarts, this.eventLoopLag,
      this.modelLoads, this.modelLoadFailures, this.modelLoadSeconds, this.modelUnloads, this.modelEvictions,
      this.cacheHits, this.cacheMisses, this.cacheEvictions, this.cacheErrors, this.cacheBytes,
    ];
    const lines: string[] = [];
    for (const m of all) lines.push(...m.header(), ...m.lines());
    const mem = process.memoryUsage();
    lines.push("# HELP process_resident_memory_bytes Resident memory size in bytes.", "# TYPE process_resident_memory_bytes gauge");
    lines.push(`process_resident_memory_bytes ${mem.rss}`);
    return lines.join("\n") + "\n";
  }
}

/**
 * Measures event-loop lag: a timer asks to fire every `intervalMs` and records how late it fires. Anything that
 * holds the main thread (a synchronous run, a large JSON parse) shows up here. Returns the stop function.
 */
export function monitorEventLoopLag(histogram: Histogram, intervalMs = 20): () => void {
  let expected = performance.now() + intervalMs;
  const timer = setInterval(() => {
    const now = performance.now();
    histogram.observe({}, Math.max(0, now - expected) / 1000);
    expected = now + intervalMs;
  }, intervalMs);
  (timer as { unref?: () => void }).unref?.();
  return () => clearInterval(timer);
}
