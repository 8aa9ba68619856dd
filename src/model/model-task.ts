// Which task a model's config.json architecture serves, before the repository's other files refine it.

export type Task = "embed" | "rerank" | "classify" | "sparse" | "multivector" | "hybrid";

export function taskOf(config: Record<string, unknown>): { task: Task; labels: string[] } {
  const arch = Array.isArray(config.architectures) ? String(config.architectures[0] ?? "") : "";
  if (arch.endsWith("ForCausalLM")) return { task: "rerank", labels: [] };
  const id2label = (config.id2label ?? {}) as Record<string, string>;
  const labels = Object.keys(id2label)
    .sort((a, b) => Number(a) - Number(b))
    .map((k) => String(id2label[k]));
  if (arch.endsWith("ForSequenceClassification")) {
    const n = Number(config.num_labels ?? labels.length) || labels.length;
    const count = labels.length || n || 1;
    const named = labels.length === count ? labels : Array.from({ length: count }, (_, i) => `LABEL_${i}`);
    return { task: count === 1 ? "rerank" : "classify", labels: named };
  }
  return { task: "embed", labels: [] };
}
