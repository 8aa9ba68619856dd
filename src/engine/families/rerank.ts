// Rerankers: cross-encoders (one logit per pair) and LLM rerankers (Qwen3-Reranker: the pair inside a prompt, the
// yes/no logits of a causal LM at the last position, or the one logit of a -seq-cls conversion). An LLM reranker's
// graph is cut to the last position where it can be, and its batches bounded by their logits' memory where not.
import { ModelLoadError } from "../../errors";
import { log } from "../../log";
import { KEEP_LOGITS_INPUTS, lastPositionGraph, type LastPositionGraph } from "../../model/logits-graph";
import type { RerankTemplate } from "../../model/rerank-template";
import { llmRerankText, rerankReader, yesNoReader } from "../../tasks/rerank";
import type { Encoder, Encoded } from "../../tokenize/encode";
import { tokenBatches } from "../../tasks/batch-input";
import { sessionRunner } from "../../tasks/runner";
import { Engine } from "../engine";
import { FULL_LOGITS_MAX_BYTES, fullLogitsBytesPerToken, fullLogitsTokenBudget, tokenBudgetWithin } from "../memory-budget";
import type { Family, FamilyPlan } from "./family";

type TemplateTokens = Awaited<ReturnType<typeof templateTokens>>;

interface RerankPlan extends FamilyPlan {
  /** LLM rerankers: the prompt as token ids; null for cross-encoders. */
  template: TemplateTokens | null;
  /** What rewriting the graph to the last position gave (causal LMs only). */
  logits: ReturnType<typeof lastPositionGraph> | null;
}

/**
 * A decoder reranker's prompt as token ids: prefix and suffix (tokenized alone, as the model card does), the
 * length left for the pair text, and the yes/no ids of a causal LM.
 */
async function templateTokens(encoder: Encoder, t: RerankTemplate, maxLength: number) {
  if ((await encoder.encode("")).ids.length !== 0) {
    throw new ModelLoadError("this decoder reranker's tokenizer adds special tokens of its own; only tokenizers that add none (Qwen) are supported");
  }
  const prefix = (await encoder.encode(t.prefix)).ids;
  const suffix = (await encoder.encode(t.suffix)).ids;
  const bodyLength = maxLength - prefix.length - suffix.length;
  if (bodyLength < 8) throw new ModelLoadError(`max length ${maxLength} leaves ${bodyLength} tokens for a pair after the reranker's prompt`);
  const id = (token: string | null) => {
    if (token === null) return undefined;
    const v = encoder.tokenId(token);
    if (v === undefined) throw new ModelLoadError(`the reranker's tokenizer has no "${token}" token`);
    return v;
  };
  return {
    bodyLength,
    yes: id(t.yesToken),
    no: id(t.noToken),
    wrap(e: Encoded): Encoded {
      const ids = new Int32Array(prefix.length + e.ids.length + suffix.length);
      ids.set(prefix, 0);
      ids.set(e.ids, prefix.length);
      ids.set(suffix, prefix.length + e.ids.length);
      // a body cut to fit keeps its count (x-truncated-inputs, truncate false's 413)
      if (e.fullLength === undefined) return { ids, typeIds: null };
      const fullLength = prefix.length + e.fullLength + suffix.length;
      return e.fullLengthAtLeast ? { ids, typeIds: null, fullLength, fullLengthAtLeast: true } : { ids, typeIds: null, fullLength };
    },
  };
}

export const rerankFamily: Family<RerankPlan> = {
  name: "rerank",
  serves: (layout) => layout.task === "rerank",
  async prepare({ layout, encoder }) {
    const template = layout.rerankTemplate ? await templateTokens(encoder, layout.rerankTemplate, layout.maxLength) : null;
    const plan: RerankPlan = { template, logits: null };
    // A decoder reranker's pair text is truncated to what its prompt leaves of the max length.
    if (template) plan.textLength = template.bodyLength;
    // LLM rerankers read the no/yes logits at the last position: a graph that computes every position's full
    // vocabulary is rewritten so its lm_head reads only the last position, and only those two columns where it can
    // (model/logits-graph.ts), or kept with the reason logged.
    if (template?.yes !== undefined) {
      plan.rewrite = (path) => {
        plan.logits = lastPositionGraph(path, "logits", [template.no!, template.yes!]);
        return plan.logits && "path" in plan.logits ? plan.logits : null;
      };
    }
    return plan;
  },
  async build({ config: c, layout, key, plan, session, padId, base, limits, metrics, each, sessionBytes }) {
    const { template, logits } = plan;
    const causalReranker = template?.yes !== undefined;
    const logitsGraph: LastPositionGraph | null = logits && "path" in logits ? logits : null;
    let maxBatchTokens = limits.maxBatchTokens;
    // An LLM reranker export without num_logits_to_keep returns [batch, seq, vocab] logits: the batch is cut (before
    // warm-up, which runs a full batch) so they fit --memory-budget-mb with the activations, or FULL_LOGITS_MAX_BYTES.
    let llmLogits: string | null = null;
    if (logitsGraph) {
      const columns = logitsGraph.columns ? `, vocabulary columns ${logitsGraph.columns.join(", ")} (no, yes)` : "";
      llmLogits = `last position${columns} (graph rewritten at load: a Slice before ${logitsGraph.head})`;
      log.info(`${layout.onnxFile}: the lm_head reads the last position only (graph rewritten at load)`, { model: key, lm_head: logitsGraph.head, columns: logitsGraph.columns?.join(",") });
    } else if (logits && "kept" in logits) llmLogits = logits.kept;
    else if (logits && "reason" in logits) {
      llmLogits = `every position (${logits.reason})`;
      log.warn(`${layout.onnxFile} computes every position's logits: the graph could not be cut to the last position`, { model: key, reason: logits.reason });
    }
    const logitsBytes = fullLogitsBytesPerToken(layout.configJson, session.inputNames, causalReranker && !logitsGraph);
    if (logitsBytes) {
      const planned = c.memoryBudgetMb
        ? Math.min(maxBatchTokens, tokenBudgetWithin(c.memoryBudgetMb, sessionBytes(), base.activationBytesPerToken + logitsBytes, layout.maxLength, key))
        : fullLogitsTokenBudget(logitsBytes, maxBatchTokens, layout.maxLength).tokens;
      const mb = (bytes: number) => Math.round(bytes / 1048576);
      log.info(`${layout.onnxFile} returns full-vocabulary logits for every position (no ${KEEP_LOGITS_INPUTS.join(" / ")} input)`, {
        model: key,
        logits_bytes_per_token: logitsBytes,
        max_batch_tokens: planned,
        was: planned < maxBatchTokens ? maxBatchTokens : undefined,
        batch_logits_mb: mb(planned * logitsBytes),
        plan: c.memoryBudgetMb ? `--memory-budget-mb ${c.memoryBudgetMb}` : `${mb(FULL_LOGITS_MAX_BYTES)} MB of logits per batch`,
      });
      if (layout.maxLength > planned) {
        log.warn("an input longer than the batch token budget runs alone: its logits pass the plan", {
          model: key, max_length: layout.maxLength, longest_input_logits_mb: mb(layout.maxLength * logitsBytes),
          fix: "an export with a num_logits_to_keep input returns one position's logits",
        });
      }
      maxBatchTokens = planned;
    }
    const reader = template?.yes === undefined
      ? rerankReader
      : logitsGraph?.columns ? yesNoReader(logitsGraph.columns.indexOf(template.yes), logitsGraph.columns.indexOf(template.no!)) : yesNoReader(template.yes, template.no!);
    const engine = new Engine<number>(key, each(sessionRunner(session, reader)), tokenBatches(padId, layout.paddingSide), { ...limits, maxBatchTokens }, metrics);
    const bytes = sessionBytes();
    return {
      ...base,
      memoryBytes: bytes,
      sessionBytes: bytes,
      activationBytesPerToken: base.activationBytesPerToken + logitsBytes,
      fullLogitsBytesPerToken: logitsBytes,
      llmLogits,
      logitsGraph,
      encode: async (texts, firsts, options) => {
        if (template && firsts) {
          // Decoder rerankers: each pair as one text inside the template's prompt.
          const instruction = options?.instruction ?? layout.rerankTemplate!.instruction;
          const bodies = await base.encode(texts.map((d, i) => llmRerankText(firsts[i]!, d, instruction)));
          return bodies.map((e) => template.wrap(e));
        }
        return base.encode(texts, firsts, options);
      },
      task: "rerank",
      engine,
    };
  },
  warmUp: {
    // Query/document pairs, as a rerank request queues them.
    inputs: (m, texts) => m.encode(texts, texts),
  },
};
