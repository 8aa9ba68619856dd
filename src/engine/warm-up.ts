// Warm-up: full-size batches before a model serves, which measure its speed and memory and, where the flags leave
// them to it, time the batch token budget, the run overhead and the instance count (engine/batcher.ts holds the
// policies); then the memory budget and the quantization ranges are checked against what was measured. What differs
// by model family (its inputs, its other engines, what is not calibrated) is the family's warmUp (families/).

import { availableParallelism } from "node:os";
import { ModelLoadError } from "../errors";
import { log } from "../log";
import type { ModelSession } from "../model/session";
import { returnFreedMemory } from "../model/trim";
import type { Encoded } from "../tokenize/encode";
import { budgetShape, budgetTokens, calibrationTrusted, chooseBudget, fitRunOverhead, keepClimbing, TOKEN_BUDGET_FIRST, TOKEN_BUDGET_START, type BudgetTiming, type RunTiming } from "./batcher";
import { OtherLoad } from "./cpu-load";
import type { Engine } from "./engine";
import { familyOf } from "./families";
import type { FamilyWarmUp } from "./families/family";
import { CPU_BATCH_TOKENS, GPU_BATCH_TOKENS, tokenBudgetWithin } from "./memory-budget";
import { enginesOf, type ServedModel } from "./served";

/** What --max-models-memory-mb leaves a model beside the other loaded models (Infinity without a budget). */
export type RoomFor = (model: string) => number;

/** The most single-threaded instances warm-up tries (each holds its own copy of the weights). */
export const MAX_CALIBRATED_INSTANCES = 4;
/** Timing noise: instances must time at least this much faster to be kept, whatever their memory. */
export const MIN_INSTANCES_GAIN = 1.1;

/** What warm-up measured of the two settings it compares, for chooseInstances. */
export interface InstanceTimings {
  /** The candidate: n instances of `threads` intra-op threads each, against one session of `allThreads`. */
  n: number;
  threads: number;
  allThreads: number;
  oneTokensPerSecond: number;
  manyTokensPerSecond: number;
  /** The model's resident bytes with the one session, and with the n instances in its place (both measured). */
  oneBytes: number;
  manyBytes: number;
  /** What --max-models-memory-mb leaves this model beside the other loaded models; Infinity without a budget. */
  roomBytes: number;
}

/**
 * Keeps the n instances only when they pay for their memory: each holds its own weights and arena (bench model: a
 * model of ~150 MiB took ~280 with two, and the server 289 -> 427 MiB RSS), so they must time at least as many times
 * faster as they take memory (tokens/s per resident byte does not fall; at least MIN_INSTANCES_GAIN, the noise), and
 * fit the --max-models-memory-mb room. On a quiet 2-core machine two single-threaded instances served 17-23% more
 * tokens/s than one session with both cores at saturation (bench/README "Saturated cells, repeated") for ~1.5x the
 * server's memory, so one session is kept; where another process keeps taking a core, the two-thread session stalls
 * at every operator barrier and two instances can time more than twice as fast.
 */
export function chooseInstances(t: InstanceTimings): { keep: boolean; reason: string } {
  const mb = (b: number) => `${Math.round(b / 1048576)} MB`;
  const gain = t.manyTokensPerSecond / Math.max(1e-9, t.oneTokensPerSecond);
  const memory = t.manyBytes / Math.max(1, t.oneBytes);
  const need = Math.max(MIN_INSTANCES_GAIN, memory);
  const timed = `${t.n} x ${t.threads} thread${t.threads === 1 ? "" : "s"} timed ${gain.toFixed(2)}x as fast as 1 x ${t.allThreads} threads ` +
    `(${t.manyTokensPerSecond.toFixed(0)} against ${t.oneTokensPerSecond.toFixed(0)} tokens/s) for ${memory.toFixed(2)}x the memory (${mb(t.manyBytes)} against ${mb(t.oneBytes)})`;
  if (t.manyBytes > t.roomBytes) return { keep: false, reason: `${timed}, over the ${mb(t.roomBytes)} --max-models-memory-mb leaves it: one session` };
  if (gain < need) return { keep: false, reason: `${timed}; instances are kept from ${need.toFixed(2)}x: one session` };
  return { keep: true, reason: `${timed}; at least ${need.toFixed(2)}x: ${t.n} instances` };
}

/** Calibration ranges must have the size of the model's vectors: measured on one short text. */
export async function checkQuantizationRanges(m: ServedModel): Promise<void> {
  const ranges = m.quantizationRanges;
  if (!ranges) return;
  let dim: number | null = null;
  if (m.task === "embed") {
    m.engine.start();
    const out = await m.engine.submit(await m.encode(["dimension probe"]));
    dim = out.results[0]!.length;
  } else if (m.task === "hybrid") dim = m.layout.hiddenSize;
  if (dim !== ranges.min.length) {
    throw new ModelLoadError(`--quantization-ranges ${m.config.quantizationRanges}: ${ranges.min.length} dimensions, but the model's vectors have ${dim ?? "an unknown number of"}`);
  }
}

/** Runs full-size batches before serving, measures speed and the memory the session's arenas take. */
export async function warmUp(m: ServedModel, roomFor: RoomFor): Promise<void> {
  if (!m.config.modelWarmup) return;
  const rssBefore = process.memoryUsage().rss;
  // The model's memory beside its session instances (tokenizer, engines), as the load measured it.
  const besideSessions = Math.max(0, m.memoryBytes - m.session.createBytes);
  const sentence = "The quick brown fox jumps over the lazy dog. ";
  const family: FamilyWarmUp = familyOf(m.layout).warmUp ?? {};
  const text = sentence.repeat(family.shortTexts ? 2 : Math.ceil(m.layout.maxLength / 8));
  const count = Math.max(1, Math.min(m.config.batchSize, Math.floor(m.engine.batchLimits.maxBatchTokens / m.layout.maxLength)));
  const texts = Array.from({ length: count }, () => text);
  const encodeFor = async (texts: string[]): Promise<{ ids: ArrayLike<number> }[]> => (family.inputs ? family.inputs(m, texts) : m.encode(texts));
  let encoded = await encodeFor(texts);
  if (m.fullLogitsBytesPerToken) {
    // A full-logits export warms up within its logits plan: each row cut (from the front, keeping the prompt's
    // suffix) to the batch token budget, as a long input would otherwise run alone past it.
    const cap = m.engine.batchLimits.maxBatchTokens;
    encoded = (encoded as Encoded[]).map((e) => (e.ids.length > cap ? { ...e, ids: e.ids.slice(e.ids.length - cap) } : e));
  }
  // The engine is not started yet: run its runner directly through a temporary start.
  const engine = m.engine as unknown as Engine<unknown, unknown, unknown>;
  engine.start();
  const t0 = performance.now();
  let tokens = 0;
  // Twice on every instance, one run at a time, so each instance's arena is grown and measured (its memory).
  for (let i = 0; i < 2; i++) {
    await m.session.warmEach(() => engine.submit(encoded));
    tokens += m.session.instances * encoded.reduce((s, e) => s + e.ids.length, 0);
  }
  const seconds = (performance.now() - t0) / 1000;
  m.warmupTokensPerSecond = tokens / seconds;
  if (m.config.maxBatchTokens === 0) await calibrateTokenBudget(m, family, engine, sentence, encodeFor);
  if (m.config.instances === 0) await calibrateInstances(m, family, roomFor, engine, encoded, m.memoryBytes + Math.max(0, process.memoryUsage().rss - rssBefore));
  if (m.config.runOverheadTokens === 0) {
    // Batches of 1, 2, 4 and 8 identical rows of about 32 tokens (within the batch size and the token budget: never
    // a batch past it, so the arena does not grow). What the batcher weighs is a new run against more rows in one
    // run, so the line is fitted over rows at one length: rows add linear work, where longer single rows would add
    // attention's quadratic cost and bend the line (on the bench model, single rows of 12-512 tokens fitted 2
    // tokens where 12-132 fitted 23). Rows also catch what a one-row run wastes beyond its fixed cost (a matrix of
    // one short row uses the cores poorly).
    const row = (await encodeFor([sentence.repeat(3)]))[0]!;
    const maxRows = Math.min(m.config.batchSize, Math.floor(m.engine.batchLimits.maxBatchTokens / Math.max(1, row.ids.length)));
    const sizes = [1, 2, 4, 8].filter((n) => n <= maxRows);
    // Five rounds over the sizes, the fastest run of each kept: a load spike then slows one run of every size
    // instead of all runs of one.
    const timings: RunTiming[] = sizes.map((n) => ({ tokens: n * row.ids.length, ms: Infinity }));
    const others = new OtherLoad();
    others.start();
    for (let round = 0; round < 5; round++) {
      for (const [i, n] of sizes.entries()) {
        const batch = Array.from({ length: n }, () => row);
        const t = performance.now();
        await engine.submit(batch);
        timings[i]!.ms = Math.min(timings[i]!.ms, performance.now() - t);
      }
    }
    const busy = noteCalibrationLoad(m, others.stop());
    const fit = busy ? null : fitRunOverhead(timings);
    if (fit) {
      m.engine.setRunOverheadTokens(fit.tokens);
      m.runOverheadSource = "calibrated";
    }
    log.info("run overhead", {
      model: m.name,
      runs: timings.map((x, i) => `${sizes[i]}x${row.ids.length} ${x.ms.toFixed(2)} ms`).join(", "),
      fixed_ms: fit ? +fit.fixedMs.toFixed(2) : undefined,
      ms_per_token: fit ? +fit.msPerToken.toFixed(4) : undefined,
      tokens: m.engine.batchLimits.runOverheadTokens,
      source: m.runOverheadSource,
      ...(busy ? { not_used: busy } : {}),
    });
  }
  await family.others?.(m);
  // Every instance counts: the growth over warm-up (arenas, and instances calibration kept), and at least what
  // the instances were measured to take.
  m.memoryBytes = Math.max(m.memoryBytes + Math.max(0, process.memoryUsage().rss - rssBefore), besideSessions + m.session.memoryBytes);
  const padded = count * Math.max(...encoded.map((e) => e.ids.length));
  // One batch's activations: the largest arena one instance's warm-up runs grew.
  m.activationBytesPerToken = Math.max(m.activationBytesPerToken, m.session.maxRunBytes / padded);
}

/**
 * Records the other processes' load over one calibration span; returns why its timings are not used (the machine
 * was busier than calibrationTrusted allows: they would set the budget or overhead for good from a passing
 * spell), or null when they are.
 */
function noteCalibrationLoad(m: ServedModel, others: number | null): string | null {
  if (others === null) return null;
  m.calibrationOtherLoad = Math.max(m.calibrationOtherLoad ?? 0, +others.toFixed(2));
  if (calibrationTrusted(others, availableParallelism())) return null;
  const why = `other processes used ${others.toFixed(2)} of ${availableParallelism()} cores while it was timed: the timings are not used`;
  log.warn("warm-up calibration on a busy machine", { model: m.name, other_load_cores: +others.toFixed(2), note: why });
  return why;
}

/**
 * --max-batch-tokens 0 (auto): times batches of identical rows at doubling sizes on the model's own session and
 * keeps the size batcher.ts's chooseBudget picks (policy there). Each size runs once first (its arena grown, not
 * counted), then is timed as the fastest of five runs; the first TOKEN_BUDGET_FIRST sizes are timed in interleaved
 * rounds and each later size alternately with the one before, so a slow spell of the machine slows both sides of a
 * comparison, not one. Not timed (the provider's constant stays): several instances (a batch could land on
 * either), a full-logits LLM reranker (its budget is planned from the logits' memory) and a family that says why
 * not (its untimedBudget: ColPali's fixed-size queries). The climb never passes what --memory-budget-mb leaves for one batch per instance.
 */
async function calibrateTokenBudget(m: ServedModel, family: FamilyWarmUp, engine: Engine<unknown, unknown, unknown>, sentence: string, encodeFor: (texts: string[]) => Promise<{ ids: ArrayLike<number> }[]>): Promise<void> {
  const skip = m.session.instances > 1 ? `${m.session.instances} instances` : m.fullLogitsBytesPerToken ? "full-vocabulary logits (budget planned from their memory)" : family.untimedBudget ?? null;
  if (skip) return void log.info("token budget not timed", { model: m.name, reason: skip, max_batch_tokens: m.engine.batchLimits.maxBatchTokens });
  const before = m.engine.batchLimits.maxBatchTokens;
  const cap = m.config.memoryBudgetMb ? tokenBudgetWithin(m.config.memoryBudgetMb, m.sessionBytes, m.activationBytesPerToken, m.layout.maxLength, m.name) : Infinity;
  // Rows of about the shape's length: the tokens one sentence adds, measured (a pair template or prefix adds its own).
  const one = (await encodeFor([sentence]))[0]!.ids.length;
  const perSentence = Math.max(1, (await encodeFor([sentence.repeat(2)]))[0]!.ids.length - one);
  const batches = new Map<BudgetTiming, readonly { ids: ArrayLike<number> }[]>();
  const timeOnce = async (t: BudgetTiming, counted: boolean) => {
    m.engine.setMaxBatchTokens(budgetTokens(t));
    const start = performance.now();
    await engine.submit(batches.get(t)!);
    if (counted) t.ms = Math.min(t.ms, performance.now() - start);
  };
  const timings: BudgetTiming[] = [];
  const others = new OtherLoad();
  others.start();
  for (let target = TOKEN_BUDGET_START; keepClimbing(timings); target *= 2) {
    const previous = timings.at(-1);
    const shape = budgetShape(target, m.layout.maxLength, m.config.batchSize, previous ? budgetTokens(previous) : 0);
    if (!shape) break;
    const row = (await encodeFor([sentence.repeat(Math.max(1, 1 + Math.round((shape.length - one) / perSentence)))]))[0]!;
    const timing: BudgetTiming = { rows: shape.rows, length: row.ids.length, ms: Infinity };
    if (budgetTokens(timing) > cap || (previous && budgetTokens(timing) <= budgetTokens(previous))) break;
    batches.set(timing, Array.from({ length: shape.rows }, () => row));
    await timeOnce(timing, false);
    timings.push(timing);
    if (timings.length < TOKEN_BUDGET_FIRST) continue;
    const round = timings.length === TOKEN_BUDGET_FIRST ? timings : [previous!, timing];
    for (let r = 0; r < 5; r++) for (const t of round) await timeOnce(t, true);
  }
  // Fewer sizes than the interleaved rounds need (a short max length or a small memory budget): time them now.
  if (timings.length < TOKEN_BUDGET_FIRST) for (let r = 0; r < 5; r++) for (const t of timings) await timeOnce(t, true);
  const busy = noteCalibrationLoad(m, others.stop());
  const chosen = busy ? null : chooseBudget(timings, m.provider === "cpu" ? CPU_BATCH_TOKENS : GPU_BATCH_TOKENS);
  const tokens = chosen ? budgetTokens(chosen) : before;
  m.engine.setMaxBatchTokens(tokens);
  if (m.task === "embed" && typeof m.tokens !== "string") m.tokens.setMaxBatchTokens(tokens);
  if (chosen) m.maxBatchTokensSource = "calibrated";
  log.info("token budget", {
    model: m.name,
    batches: timings.map((t) => `${t.rows}x${t.length} ${Math.round((budgetTokens(t) / t.ms) * 1000)} tokens/s`).join(", "),
    max_batch_tokens: tokens,
    source: m.maxBatchTokensSource,
    ...(busy ? { not_used: busy } : {}),
  });
}

/**
 * --instances 0 (the default): one session with all cores against single-threaded sessions, one per core (up to
 * MAX_CALIBRATED_INSTANCES, the cores split evenly), each warmed once per instance and then timed on the warm-up
 * batch submitted 2 x instances times at once, alternating, the better of two rounds each; the instances stay when
 * chooseInstances finds they pay for their memory (and fit the budgets), else the one session. Only on CPU, with
 * --num-threads not given and 2 cores or more, and for models whose engines all run on the one session (no separate
 * media tower, not ColPali: the family's oneSession); otherwise one instance. `oneBytes`: the model's memory so far, with the one session.
 */
async function calibrateInstances(m: ServedModel, family: FamilyWarmUp, roomFor: RoomFor, engine: Engine<unknown, unknown, unknown>, encoded: readonly { ids: ArrayLike<number> }[], oneBytes: number): Promise<void> {
  const c = m.config;
  if (c.numThreadsSet) return void (m.instancesReason = `one session: --num-threads ${c.numThreads} given`);
  if (m.provider !== "cpu") return void (m.instancesReason = `one session: not calibrated on ${m.provider}`);
  if (c.numThreads < 2) return void (m.instancesReason = "one session: one core");
  if (family.oneSession) return void (m.instancesReason = `one session: ${family.oneSession}`);
  const n = Math.min(MAX_CALIBRATED_INSTANCES, c.numThreads);
  const threads = Math.floor(c.numThreads / n);
  // Instances trade memory for speed, so the server makes that trade itself only within a memory budget the operator
  // set: without one the timing is not even run (it holds the one session and n candidates at once: the bench
  // model's server peaked at ~500 MiB during it, and kept 30-50 MiB of it with the one session kept).
  const room = roomFor(m.name);
  if (!Number.isFinite(room)) {
    m.instancesReason = `one session: instances are calibrated only within --max-models-memory-mb (each holds its own weights); --instances ${n} --num-threads ${threads} sets them`;
    return;
  }
  const mb = (b: number) => Math.round(b / 1048576);
  // The calibration holds the one session and the candidates together: both must fit the room.
  if (oneBytes + n * m.session.memoryBytes > room) {
    m.instancesReason = `one session: timing ${n} instances beside the one needs about ${mb(oneBytes + n * m.session.memoryBytes)} MB, over the ${mb(room)} MB --max-models-memory-mb leaves it`;
    return;
  }
  // --memory-budget-mb: n instances each running a batch at the token budget must fit it without cutting batches.
  if (c.memoryBudgetMb && n * (m.sessionBytes + m.engine.batchLimits.maxBatchTokens * m.activationBytesPerToken) > c.memoryBudgetMb * 1048576) {
    m.instancesReason = `one session: ${n} instances running a batch of ${m.engine.batchLimits.maxBatchTokens} tokens each would pass --memory-budget-mb ${c.memoryBudgetMb}`;
    return;
  }
  const engines = enginesOf(m);
  const tokens = encoded.reduce((s, e) => s + e.ids.length, 0);
  let candidate: ModelSession;
  try {
    candidate = await m.newSession(threads, n);
  } catch (e) {
    log.warn("instances: the candidate sessions could not be created; keeping one", { model: m.name, error: (e as Error).message });
    m.instancesReason = `one session: the candidate instances could not be created (${(e as Error).message})`;
    return;
  }
  const one = m.session.memoryBytes;
  const use = async (which: "one" | "candidate") => {
    // A run's answer reaches its caller before the engine takes its runner back: wait for that.
    await Promise.all(engines.map((e) => e.idle()));
    const want = which === "candidate" ? n : 1;
    if (m.session.instances !== want) m.session.exchange(candidate);
    for (const e of engines) e.setInstances(want);
  };
  const time = async (): Promise<number> => {
    const k = 2 * m.session.instances;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: k }, () => engine.submit(encoded)));
    return (k * tokens) / ((performance.now() - t0) / 1000);
  };
  let oneSpeed = 0, manySpeed = 0, choice: { keep: boolean; reason: string };
  try {
    // The candidate's instances run their first batch one at a time (their arenas measured, as the one session's
    // were), so neither setting is timed cold.
    await use("candidate");
    await m.session.warmEach(() => engine.submit(encoded));
    const many = m.session.memoryBytes;
    await use("one");
    for (let round = 0; round < 2; round++) {
      oneSpeed = Math.max(oneSpeed, await time());
      await use("candidate");
      manySpeed = Math.max(manySpeed, await time());
      await use("one");
    }
    choice = chooseInstances({
      n, threads, allThreads: c.numThreads, oneTokensPerSecond: oneSpeed, manyTokensPerSecond: manySpeed,
      oneBytes, manyBytes: oneBytes - one + many, roomBytes: roomFor(m.name),
    });
    if (choice.keep) {
      await use("candidate");
      m.sessionBytes += candidate.createBytes - m.session.createBytes;
    }
  } finally {
    // The setting not kept: its workers end, and their memory goes back to the system.
    await candidate.release();
    returnFreedMemory();
  }
  m.instancesSource = "calibrated";
  m.instancesReason = choice.reason;
  log.info("instances", { model: m.name, chosen: `${m.session.instances} x ${m.session.settings.numThreads} threads`, reason: choice.reason });
}

/** Lowers a model's token budget so one batch's activations stay within its --memory-budget-mb. */
export function applyMemoryBudget(m: ServedModel): void {
  const budgetMb = m.config.memoryBudgetMb;
  if (!budgetMb) return;
  // Each instance runs a batch at once: the budget holds every instance's weights and one batch per instance.
  const tokens = tokenBudgetWithin(budgetMb, m.sessionBytes, m.activationBytesPerToken * m.session.instances, m.layout.maxLength, m.name);
  if (tokens < m.engine.batchLimits.maxBatchTokens) {
    m.engine.setMaxBatchTokens(tokens);
    if (m.task === "embed" && typeof m.tokens !== "string") m.tokens.setMaxBatchTokens(tokens);
    m.maxBatchTokensSource = "memory-budget";
    log.info("memory budget lowers the batch token budget", { model: m.name, max_batch_tokens: tokens, budget_mb: budgetMb, instances: m.session.instances });
  }
}
