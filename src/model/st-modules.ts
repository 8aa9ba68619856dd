// The sentence-transformers modules of a repository (modules.json): which ones this server implements, the Dense
// modules applied after pooling, and the Pooling module's mode.
import { ModelLoadError } from "../errors";

export type Pooling = "mean" | "cls" | "max" | "last" | "mean_sqrt_len" | "weighted_mean";

/** A sentence-transformers Dense module after pooling, as its N_Dense/config.json describes it. */
export interface DenseModule {
  path: string;
  inFeatures: number;
  outFeatures: number;
  bias: boolean;
  activation: DenseActivation;
  /** use_residual: the input (projected when the sizes differ) is added to the output. */
  residual: boolean;
}
export type DenseActivation = "identity" | "tanh" | "relu" | "sigmoid";
const DENSE_ACTIVATIONS: Record<string, DenseActivation> = {
  Identity: "identity", Tanh: "tanh", ReLU: "relu", Sigmoid: "sigmoid",
};

/** One entry of modules.json: its folder and its class name's last segment. */
export interface StModule { path: string; kind: string }

/**
 * sentence-transformers modules this server implements (by the last segment of the class path). Any other module
 * in modules.json is refused at load: serving the model without it would give wrong vectors.
 */
export const KNOWN_MODULES: ReadonlySet<string> = new Set([
  "Transformer", "MLMTransformer", "Pooling", "Normalize", "Dense", "SpladePooling",
  // CrossEncoder over a causal LM: yes/no logits at the last position (rerankTemplateOf)
  "LogitScore",
]);

/**
 * The Dense modules of an embedder, checked against what this server can apply: after pooling (on the sentence
 * embedding), with an activation it knows. Refuses modules it does not know, with what is there.
 */
export function denseModules(modules: readonly StModule[], moduleConfig: (path: string) => Record<string, unknown> | null, allowed: ReadonlySet<string> = KNOWN_MODULES): DenseModule[] {
  const unknown = modules.filter((m) => !allowed.has(m.kind));
  if (unknown.length) {
    throw new ModelLoadError(
      `modules.json has sentence-transformers module${unknown.length > 1 ? "s" : ""} this server does not implement: ` +
        `${unknown.map((m) => `${m.kind} (${m.path || "."})`).join(", ")}; served without ${unknown.length > 1 ? "them" : "it"} the vectors would be wrong. ` +
        `Implemented: ${[...allowed].join(", ")}`,
    );
  }
  const poolingAt = modules.findIndex((m) => m.kind === "Pooling");
  const out: DenseModule[] = [];
  modules.forEach((m, i) => {
    if (m.kind !== "Dense") return;
    const cfg = moduleConfig(m.path);
    if (!cfg) throw new ModelLoadError(`Dense module ${m.path}: missing ${m.path}/config.json`);
    const input = cfg.module_input_name ?? "sentence_embedding";
    if (i < poolingAt || input !== "sentence_embedding") {
      throw new ModelLoadError(`Dense module ${m.path} works on token embeddings (before pooling); only Dense modules on the pooled sentence embedding are supported`);
    }
    const fn = String(cfg.activation_function ?? "torch.nn.modules.activation.Tanh");
    const activation = DENSE_ACTIVATIONS[fn.split(".").pop() ?? ""];
    if (!activation) throw new ModelLoadError(`Dense module ${m.path}: activation ${fn} is not supported (Identity, Tanh, ReLU, Sigmoid)`);
    const inFeatures = Number(cfg.in_features);
    const outFeatures = Number(cfg.out_features);
    if (!(inFeatures > 0 && outFeatures > 0)) throw new ModelLoadError(`Dense module ${m.path}: config.json lacks in_features/out_features`);
    out.push({ path: m.path, inFeatures, outFeatures, bias: cfg.bias !== false, activation, residual: cfg.use_residual === true });
  });
  return out;
}

/** modules.json of every sentence-transformers generation: the class is matched by its last name segment. */
export function readModules(modulesJson: unknown): StModule[] {
  if (!Array.isArray(modulesJson)) return [];
  return modulesJson
    .filter((m): m is Record<string, unknown> => typeof m === "object" && m !== null)
    .map((m) => {
      const type = String(m.type ?? "");
      return { path: String(m.path ?? ""), kind: type.split(".").pop() ?? type };
    });
}

/**
 * Pooling from a 1_Pooling/config.json of any generation: a `pooling_mode` string (newer) or the
 * `pooling_mode_*` booleans (all versions). Returns null when the file names no mode.
 */
export function poolingFromConfig(cfg: Record<string, unknown> | null): Pooling | null {
  if (!cfg) return null;
  const mode = cfg.pooling_mode;
  if (typeof mode === "string") {
    const named: Record<string, Pooling> = {
      cls: "cls", mean: "mean", max: "max", lasttoken: "last", last: "last",
      mean_sqrt_len_tokens: "mean_sqrt_len", weightedmean: "weighted_mean",
    };
    if (named[mode]) return named[mode]!;
  }
  if (cfg.pooling_mode_cls_token) return "cls";
  if (cfg.pooling_mode_mean_tokens) return "mean";
  if (cfg.pooling_mode_max_tokens) return "max";
  if (cfg.pooling_mode_mean_sqrt_len_tokens) return "mean_sqrt_len";
  if (cfg.pooling_mode_weightedmean_tokens) return "weighted_mean";
  if (cfg.pooling_mode_lasttoken) return "last";
  return null;
}
