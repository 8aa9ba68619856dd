import { describe, expect, test } from "bun:test";
import { rerankTemplateOf } from "../../src/model/rerank-template";
import { taskOf } from "../../src/model/model-task";

describe("decoder rerankers", () => {
  const tj = (...tokens: string[]) => ({ added_tokens: tokens.map((content) => ({ content })), model: { vocab: {} } });
  const qwen = (arch: string) => ({ architectures: [arch], model_type: "qwen3" });

  test("a causal LM with the Qwen chat and yes/no tokens is an LLM reranker; a -seq-cls conversion uses the same prompt", () => {
    expect(taskOf(qwen("Qwen3ForCausalLM")).task).toBe("rerank");
    expect(rerankTemplateOf(qwen("Qwen3ForCausalLM"), tj("<|im_start|>", "<|im_end|>", "yes", "no"), "rerank")?.yesToken).toBe("yes");
    const seqCls = rerankTemplateOf({ ...qwen("Qwen3ForSequenceClassification"), num_labels: 1 }, tj("<|im_start|>", "<|im_end|>"), "rerank");
    expect([seqCls?.yesToken, seqCls?.prefix.startsWith("<|im_start|>system")]).toEqual([null, true]);
    expect(rerankTemplateOf({ architectures: ["BertForSequenceClassification"], model_type: "bert" }, tj(), "rerank")).toBeNull();
  });

  test("a causal LM that cannot be read as a reranker is refused at load, saying why", () => {
    expect(() => rerankTemplateOf(qwen("Qwen3ForCausalLM"), tj("<|im_start|>", "<|im_end|>"), "rerank")).toThrow(/lacks yes, no/);
    expect(() => rerankTemplateOf({ architectures: ["LlamaForCausalLM"], model_type: "llama" }, tj("yes", "no"), "rerank")).toThrow(/causal language model/);
  });
});
