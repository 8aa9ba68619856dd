// LLM rerankers and the size of their logits. An export without a num_logits_to_keep input (qwen3-rerank, as
// onnx-community's Qwen3-Reranker) returns [batch, seq, vocab] float32: the load rewrites its graph so the lm_head reads
// the last position only ([batch, 1, vocab], model/logits-graph.ts), and its batch budget stays as configured. An
// export with the input (qwen3-rerank-keep) is fed 1. A graph that cannot be cut (the int8 file: dynamic quantization
// scales over every position) keeps every position's logits, vocab x 4 bytes per padded token: the load says why, and
// cuts its batch token budget so one batch's logits fit 1 GiB, or --memory-budget-mb with the activations
// (/models full_logits_bytes_per_token). Parity of the exports alone: families.test.ts.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import {
  CPU_BATCH_TOKENS,
  FULL_LOGITS_MAX_BYTES,
  GPU_BATCH_TOKENS,
  estimateActivationBytesPerToken,
  fullLogitsBytesPerToken,
  fullLogitsTokenBudget,
} from "../../src/engine/memory-budget";
import { configureLog } from "../../src/log";
import type { RunningServer } from "../../src/server/serve";
import { fixture, postJson, reference, startTestServer } from "../helpers";
import { INT8_ACROSS_CPUS, int8Session, lastLogitAlone } from "../int8";

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

type Entry = { id: string; max_batch_tokens: number; full_logits_bytes_per_token: number | null; llm_logits: string | null; max_length: number };
type Pair = { query: string; document: string; input_ids: number[]; logit: number };

/** One server, its load log and its /models entries. */
function liveServer(flags: Record<string, string | string[]>) {
  const state = { server: null as RunningServer | null, lines: [] as string[], models: new Map<string, Entry>() };
  beforeAll(async () => {
    // test/helpers.ts logs errors only; the load lines are info
    configureLog("info", "text");
    const write = spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      state.lines.push(String(chunk));
      return true;
    });
    try {
      state.server = await startTestServer(flags);
    } finally {
      write.mockRestore();
      configureLog((process.env.TEST_LOG_LEVEL as "debug" | undefined) ?? "error", "text");
    }
    const json = (await (await fetch(`${state.server.url}/models`)).json()) as { data: Entry[] };
    state.models = new Map(json.data.map((m) => [m.id, m]));
  });
  afterAll(async () => {
    await state.server?.shutdown();
  });
  return state;
}

/** Every pair alone, then (batched) each query's pairs in one request with extra documents (raw logits), against `logits`. */
async function checkPairs(url: string, model: string, pairs: Pair[], logits: number[], batched = true, tol = 1e-4) {
  for (const [i, c] of pairs.entries()) {
    const { status, json } = await postJson(`${url}/rerank`, { model, query: c.query, documents: [c.document], raw_scores: true });
    expect(status).toBe(200);
    expect(Math.abs(json.results[0].relevance_score - logits[i]!)).toBeLessThanOrEqual(tol);
    expect(json.usage.total_tokens).toBe(c.input_ids.length);
  }
  if (!batched) return;
  for (const query of new Set(pairs.map((p) => p.query))) {
    const docs = pairs.map((p, i) => ({ p, i })).filter((x) => x.p.query === query);
    const { status, json } = await postJson(`${url}/rerank`, { model, query, documents: [...docs.map((x) => x.p.document), "hello", "a short extra document"], raw_scores: true, return_documents: false });
    expect(status).toBe(200);
    for (const [k, x] of docs.entries()) {
      const got = json.results.find((r: { index: number }) => r.index === k).relevance_score;
      expect(Math.abs(got - logits[x.i]!)).toBeLessThanOrEqual(tol);
    }
  }
}

describe("live: an export with full-vocabulary logits is rewritten at load to the last position", () => {
  const live = liveServer({
    "model-id": [fixture("qwen3-rerank"), fixture("qwen3-rerank-keep"), fixture("qwen3-rerank")],
    "served-model-name": ["full", "keep", "long"],
    "max-batch-tokens": ["1000000", "1000000", "100"],
    "max-length": ["0", "0", "512"],
    // load-time rewrites and parity: the warm-up's timed runs add nothing here
    "model-warmup": "false",
  });

  test("no budget cut, no full-logits plan; /models and the load log say the lm_head reads the last position's no/yes columns", async () => {
    const full = live.models.get("full")!;
    expect(full.max_batch_tokens).toBe(1_000_000);
    expect(full.full_logits_bytes_per_token).toBeNull();
    const ref = await reference("qwen3-rerank");
    expect(full.llm_logits).toBe(`last position, vocabulary columns ${ref.no}, ${ref.yes} (no, yes) (graph rewritten at load: a Slice before /model/lm_head/MatMul)`);
    expect(live.lines.some((l) => l.includes("the lm_head reads the last position only") && l.includes("model=full "))).toBe(true);
    expect(live.lines.some((l) => l.includes("returns full-vocabulary logits") && l.includes("model=full "))).toBe(false);
    expect(live.models.get("keep")!.llm_logits).toBe("num_logits_to_keep");
    expect(live.models.get("keep")!.max_batch_tokens).toBe(1_000_000);
  });

  test("parity <= 1e-4 with transformers (model card scoring), alone and batched, pairs cut at the max length", async () => {
    const ref = await reference("qwen3-rerank");
    const cases = ref.cases as Pair[];
    expect(cases.filter((c) => c.input_ids.length === ref.max_length).length).toBeGreaterThanOrEqual(2);
    await checkPairs(live.server!.url, "full", cases, cases.map((c) => c.logit));
  });

  test("--max-length 512 (the fixture's positions) with a 100-token batch budget: pairs of 364 and 512 tokens (cut) run alone past the budget, batched with short ones, as the reference", async () => {
    const ref = await reference("qwen3-rerank");
    expect(live.models.get("long")!.max_length).toBe(ref.long_max_length);
    expect(live.models.get("long")!.max_batch_tokens).toBe(100);
    const pairs = [...(ref.long_cases as Pair[]), ...(ref.cases as Pair[]).filter((c) => c.input_ids.length < 100)];
    expect(pairs.filter((c) => c.input_ids.length === 512).length).toBe(2);
    await checkPairs(live.server!.url, "long", pairs, pairs.map((c) => c.logit));
    // concurrent requests mixing the long and short pairs
    const answers = await Promise.all(pairs.map((c) => postJson(`${live.server!.url}/rerank`, { model: "long", query: c.query, documents: [c.document], raw_scores: true })));
    answers.forEach((a, i) => expect(Math.abs(a.json.results[0].relevance_score - pairs[i]!.logit)).toBeLessThanOrEqual(1e-4));
  });
});

describe("live: a graph that cannot be cut (int8) keeps every position's logits: the batch budget is cut for them", () => {
  const live = liveServer({
    "model-id": [fixture("qwen3-rerank"), fixture("qwen3-rerank"), fixture("qwen3-rerank")],
    "served-model-name": ["int8", "budget", "small"],
    dtype: "int8",
    "max-batch-tokens": ["1000000", "1000000", "100"],
    "memory-budget-mb": ["0", "512", "0"],
    // the load-time plan and parity need no warm-up; "small" keeps it (its warm-up rows are cut to its budget)
    "model-warmup": ["false", "false", "true"],
  });
  // What the original int8 graph scores each pair alone in onnxruntime on this machine (int8 kernels differ by
  // instruction set, test/int8.ts): the server is held to these at 1e-5; the stored int8_cases (another machine's
  // onnxruntime) to the int8 bound across CPUs.
  const int8Logits: number[] = [];
  beforeAll(async () => {
    const ref = await reference("qwen3-rerank");
    const cases = ref.cases as Pair[];
    const stored = ref.int8_cases as Array<{ input_ids: number[]; logit: number }>;
    const [plain, precise] = [await int8Session("qwen3-rerank"), await int8Session("qwen3-rerank", true)];
    for (const [i, c] of cases.entries()) {
      expect(stored[i]!.input_ids).toEqual(c.input_ids);
      const logit = await lastLogitAlone(plain, c.input_ids, ref.yes, ref.no);
      expect(Math.abs(logit - stored[i]!.logit)).toBeLessThanOrEqual(INT8_ACROSS_CPUS.logit);
      // the two u8s8 kernels (saturating without VNNI, exact with it) where this machine has both
      expect(Math.abs(logit - (await lastLogitAlone(precise, c.input_ids, ref.yes, ref.no)))).toBeLessThanOrEqual(INT8_ACROSS_CPUS.logit);
      int8Logits.push(logit);
    }
    await Promise.all([plain.release(), precise.release()]);
  });

  test("the load warns with the reason; without a memory budget one batch's logits stay within 1 GiB (fixture vocabulary 1,405: 5,620 bytes per token)", async () => {
    const ref = await reference("qwen3-rerank");
    const perToken = ref.vocab_size * 4;
    const int8 = live.models.get("int8")!;
    expect(int8.llm_logits).toBe('every position (logits comes from a Mul node "/model/lm_head/MatMul_quant_output_scale_mul", not from an lm_head MatMul)');
    expect(live.lines.some((l) => l.includes("the graph could not be cut to the last position") && l.includes("model=int8 ") && l.includes("not from an lm_head MatMul"))).toBe(true);
    expect(int8.full_logits_bytes_per_token).toBe(perToken);
    expect(int8.max_batch_tokens).toBe(Math.floor(FULL_LOGITS_MAX_BYTES / perToken));
    const logged = live.lines.find((l) => l.includes("returns full-vocabulary logits") && l.includes("model=int8 "));
    expect(logged).toContain(`max_batch_tokens=${int8.max_batch_tokens} was=1000000`);
    expect(logged).toContain("plan=1024 MB of logits per batch");
    // scored as that graph scores a pair alone (its own last-position logits, from onnxruntime on this machine),
    // batched too (left padding, mixed lengths): its dynamic quantization is rewritten at load to scale each pair
    // over its own tokens (model/rowwise-quant.ts); the original graph's one scale over the whole batch moved a
    // batched logit by up to ~0.05
    expect(live.lines.some((l) => l.includes("dynamic int8 quantization made per input") && l.includes("model=int8 ") && l.includes("quantizers=9"))).toBe(true);
    const cases = ref.cases as Pair[];
    expect(int8Logits.length).toBe(cases.length);
    await checkPairs(live.server!.url, "int8", cases, int8Logits, true, 1e-5);
  });

  test("with --memory-budget-mb: the logits count with the activations against the budget", async () => {
    const budget = live.models.get("budget")!;
    const ref = await reference("qwen3-rerank");
    const config = JSON.parse(await Bun.file(`${fixture("qwen3-rerank")}/config.json`).text());
    const perToken = estimateActivationBytesPerToken(config) + ref.vocab_size * 4;
    expect(budget.full_logits_bytes_per_token).toBe(ref.vocab_size * 4);
    expect(budget.max_batch_tokens).toBeLessThanOrEqual(Math.floor((512 * 1048576) / perToken));
    expect(budget.max_batch_tokens).toBeGreaterThanOrEqual(budget.max_length);
    expect(live.lines.some((l) => l.includes("returns full-vocabulary logits") && l.includes("model=budget ") && l.includes("plan=--memory-budget-mb 512"))).toBe(true);
  });

  test("a budget below the max length (warm-up rows are cut to it): full-length pairs run alone past it, warned at load, and score as that graph does", async () => {
    const small = live.models.get("small")!;
    expect(small.max_batch_tokens).toBe(100);
    const warned = live.lines.find((l) => l.includes("runs alone: its logits pass the plan") && l.includes("model=small "));
    expect(warned).toContain(`max_length=${small.max_length}`);
    expect(warned).toContain("longest_input_logits_mb=1");
    const ref = await reference("qwen3-rerank");
    const cases = ref.cases as Pair[];
    const long = cases.map((c, i) => ({ c, logit: int8Logits[i]! })).filter((x) => x.c.input_ids.length === ref.max_length);
    expect(long.length).toBeGreaterThan(0);
    await checkPairs(live.server!.url, "small", long.map((x) => x.c), long.map((x) => x.logit));
  });
});
