// LLM rerankers and the size of their logits. An export with a num_logits_to_keep input (qwen3-rerank-keep) is fed 1
// and returns [batch, 1, vocab]: its batch budget stays as configured. An export without it (qwen3-rerank, as
// onnx-community's Qwen3-Reranker) returns [batch, seq, vocab] float32, vocab x 4 bytes per padded token: the load
// cuts its batch token budget so one batch's logits fit 1 GiB, or --memory-budget-mb with the activations, and says
// so in the load log and in /models (full_logits_bytes_per_token). Parity of both exports: families.test.ts.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import {
  CPU_BATCH_TOKENS,
  FULL_LOGITS_MAX_BYTES,
  GPU_BATCH_TOKENS,
  estimateActivationBytesPerToken,
  fullLogitsBytesPerToken,
  fullLogitsTokenBudget,
} from "../../src/engine/registry";
import { configureLog } from "../../src/log";
import type { RunningServer } from "../../src/server/serve";
import { fixture, postJson, reference, startTestServer } from "../helpers";

// Qwen/Qwen3-Reranker-0.6B config.json: vocab_size 151669, max_position_embeddings 40960.
const QWEN3_RERANKER_VOCAB = 151_669;
const PAST_SIGNATURE = ["input_ids", "attention_mask", "position_ids", "past_key_values.0.key", "past_key_values.0.value"];

describe("full-vocabulary logits: bytes per token and the batch budget", () => {
  test("Qwen3-Reranker without num_logits_to_keep: 606,676 bytes per token; GPU's 16,384-token default cut to 1,769, CPU's 512 kept", () => {
    const perToken = fullLogitsBytesPerToken({ vocab_size: QWEN3_RERANKER_VOCAB }, PAST_SIGNATURE, true);
    expect(perToken).toBe(QWEN3_RERANKER_VOCAB * 4);
    const gpu = fullLogitsTokenBudget(perToken, GPU_BATCH_TOKENS, 40960);
    expect(gpu).toEqual({ tokens: 1769, cut: true, longestInputBytes: 40960 * perToken });
    // the most tokens whose logits fit the plan
    expect(gpu.tokens * perToken).toBeLessThanOrEqual(FULL_LOGITS_MAX_BYTES);
    expect((gpu.tokens + 1) * perToken).toBeGreaterThan(FULL_LOGITS_MAX_BYTES);
    // 512 tokens of logits are 296 MiB: within the plan
    expect(fullLogitsTokenBudget(perToken, CPU_BATCH_TOKENS, 8192)).toEqual({ tokens: 512, cut: false, longestInputBytes: 8192 * perToken });
    // a plan smaller than one token's logits still runs one token at a time
    expect(fullLogitsTokenBudget(perToken, 512, 8192, 1000).tokens).toBe(1);
  });

  test("exports that return one position's logits, and models not scored from a causal LM's logits, add nothing", () => {
    const config = { vocab_size: QWEN3_RERANKER_VOCAB };
    expect(fullLogitsBytesPerToken(config, [...PAST_SIGNATURE, "num_logits_to_keep"], true)).toBe(0);
    expect(fullLogitsBytesPerToken(config, [...PAST_SIGNATURE, "logits_to_keep"], true)).toBe(0);
    // -seq-cls conversions and cross-encoders: logits [batch, 1]
    expect(fullLogitsBytesPerToken(config, ["input_ids", "attention_mask"], false)).toBe(0);
    // vocab_size missing: nothing to plan with
    expect(fullLogitsBytesPerToken({}, PAST_SIGNATURE, true)).toBe(0);
  });
});

describe("live: the load cuts a full-logits export's batch budget and says so", () => {
  let server: RunningServer;
  const lines: string[] = [];
  type Entry = { id: string; max_batch_tokens: number; full_logits_bytes_per_token: number | null; max_length: number };
  let models: Map<string, Entry>;

  beforeAll(async () => {
    // test/helpers.ts logs errors only; the load lines are info
    configureLog("info", "text");
    const write = spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      server = await startTestServer({
        "model-id": [fixture("qwen3-rerank"), fixture("qwen3-rerank-keep"), fixture("qwen3-rerank"), fixture("qwen3-rerank")],
        "served-model-name": ["full", "keep", "budget", "small"],
        "max-batch-tokens": ["1000000", "1000000", "1000000", "100"],
        "memory-budget-mb": ["0", "0", "512", "0"],
      });
    } finally {
      write.mockRestore();
      configureLog((process.env.TEST_LOG_LEVEL as "debug" | undefined) ?? "error", "text");
    }
    const json = (await (await fetch(`${server.url}/models`)).json()) as { data: Entry[] };
    models = new Map(json.data.map((m) => [m.id, m]));
  });
  afterAll(async () => {
    await server?.shutdown();
  });

  test("without a memory budget: one batch's logits within 1 GiB (fixture vocabulary 1,405: 5,620 bytes per token)", async () => {
    const ref = await reference("qwen3-rerank-keep");
    const perToken = ref.vocab_size * 4;
    const full = models.get("full")!;
    expect(full.full_logits_bytes_per_token).toBe(perToken);
    expect(full.max_batch_tokens).toBe(Math.floor(FULL_LOGITS_MAX_BYTES / perToken));
    const logged = lines.find((l) => l.includes("returns full-vocabulary logits") && l.includes("model=full "));
    expect(logged).toBeDefined();
    expect(logged).toContain(`max_batch_tokens=${full.max_batch_tokens} was=1000000`);
    expect(logged).toContain("plan=1024 MB of logits per batch");
    // the cut model still answers as the reference says
    const c = ref.cases[0];
    const answer = await postJson(`${server.url}/rerank`, { model: "full", query: c.query, documents: [c.document] });
    expect(answer.status).toBe(200);
  });

  test("with num_logits_to_keep: nothing cut, no logits line", () => {
    const keep = models.get("keep")!;
    expect(keep.full_logits_bytes_per_token).toBeNull();
    expect(keep.max_batch_tokens).toBe(1_000_000);
    expect(lines.some((l) => l.includes("returns full-vocabulary logits") && l.includes("model=keep "))).toBe(false);
  });

  test("with --memory-budget-mb: the logits count with the activations against the budget", async () => {
    const budget = models.get("budget")!;
    const ref = await reference("qwen3-rerank-keep");
    const config = JSON.parse(await Bun.file(`${fixture("qwen3-rerank")}/config.json`).text());
    const perToken = estimateActivationBytesPerToken(config) + ref.vocab_size * 4;
    expect(budget.full_logits_bytes_per_token).toBe(ref.vocab_size * 4);
    expect(budget.max_batch_tokens).toBeLessThanOrEqual(Math.floor((512 * 1048576) / perToken));
    expect(budget.max_batch_tokens).toBeGreaterThanOrEqual(budget.max_length);
    expect(lines.some((l) => l.includes("returns full-vocabulary logits") && l.includes("model=budget ") && l.includes("plan=--memory-budget-mb 512"))).toBe(true);
  });

  test("a budget below the max length (warm-up rows are cut to it): a full-length pair runs alone past it, warned at load, and scores as the reference", async () => {
    const small = models.get("small")!;
    expect(small.max_batch_tokens).toBe(100);
    const warned = lines.find((l) => l.includes("runs alone: its logits pass the plan") && l.includes("model=small "));
    expect(warned).toContain(`max_length=${small.max_length}`);
    expect(warned).toContain("longest_input_logits_mb=1");
    const ref = await reference("qwen3-rerank");
    type Pair = { query: string; document: string; input_ids: number[]; logit: number };
    const long = (ref.cases as Pair[]).filter((c) => c.input_ids.length === ref.max_length);
    expect(long.length).toBeGreaterThan(0);
    for (const c of long) {
      const { status, json } = await postJson(`${server.url}/rerank`, { model: "small", query: c.query, documents: [c.document], raw_scores: true });
      expect(status).toBe(200);
      expect(Math.abs(json.results[0].relevance_score - c.logit)).toBeLessThanOrEqual(1e-4);
    }
  });
});
