// What one architecture file provides: which config.json architectures / model types it builds, and the graph.
import type { Builder } from "./blocks";

/** The graph's result tensors: per-token states (output last_hidden_state), and a classifier's logits (output logits). */
export interface Built {
  hidden: string;
  /** [batch, labels] for sequence classification; [batch, sequence, vocab] for a causal LM head. */
  logits?: string;
  /** Per-position logits ([B, S, V]) rather than one row per sequence. */
  tokenLogits?: boolean;
  /** A Stanford ColBERT's projected token vectors, [B, S, dim] (output contextual, as its exports name them). */
  contextual?: string;
}

export interface Architecture {
  /** config.json `architectures` entries this file builds. */
  architectures: readonly string[];
  /** config.json `model_type` values it builds (used when `architectures` is absent). */
  modelTypes: readonly string[];
  build(b: Builder): Built;
  /**
   * Whether `--graph auto` builds this config even when the repository has an ONNX export: only where the bench showed
   * the built graph at least as fast and as exact as the export (bench/built-graph.ts), and for configs it builds.
   */
  preferred?(config: Record<string, unknown>): boolean;
}
