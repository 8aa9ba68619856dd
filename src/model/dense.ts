// The weights of sentence-transformers Dense modules (N_Dense/model.safetensors), for exports whose graph stops at
// the token embeddings: the server applies them after pooling (tasks/embed.ts applyDense).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ModelLoadError } from "../errors";
import type { DenseActivation, DenseModule } from "./layout";
import { readSafetensors } from "./safetensors";

export interface DenseLayer {
  inFeatures: number;
  outFeatures: number;
  /** Row-major [outFeatures, inFeatures], as torch's nn.Linear stores it. */
  weight: Float32Array;
  bias: Float32Array | null;
  activation: DenseActivation;
  /** use_residual: null when not used; the identity when the sizes match, else [out, in] projection weights. */
  residual: Float32Array | "identity" | null;
}

function tensor(weights: Map<string, { shape: number[]; data: Float32Array }>, name: string, shape: number[], file: string): Float32Array {
  const t = weights.get(name);
  if (!t) throw new ModelLoadError(`${file} has no tensor ${name} (it has ${[...weights.keys()].join(", ")})`);
  if (t.shape.join("x") !== shape.join("x")) throw new ModelLoadError(`${file}: ${name} has shape ${t.shape.join("x")}, config.json says ${shape.join("x")}`);
  return t.data;
}

/** Reads each Dense module's weights; a module without safetensors weights is refused with what is there. */
export function readDenseLayers(dir: string, modules: readonly DenseModule[]): DenseLayer[] {
  return modules.map((m) => {
    const file = join(m.path, "model.safetensors");
    if (!existsSync(join(dir, file))) {
      const legacy = existsSync(join(dir, m.path, "pytorch_model.bin"));
      throw new ModelLoadError(
        `the ONNX export has no sentence_embedding output, so the Dense module ${m.path} must be applied by the server, but ${file} is missing` +
          (legacy ? ` (${m.path} holds only pytorch_model.bin, a pickle this server does not read; convert it to safetensors)` : ""),
      );
    }
    const weights = readSafetensors(join(dir, file));
    return {
      inFeatures: m.inFeatures,
      outFeatures: m.outFeatures,
      weight: tensor(weights, "linear.weight", [m.outFeatures, m.inFeatures], file),
      bias: m.bias ? tensor(weights, "linear.bias", [m.outFeatures], file) : null,
      activation: m.activation,
      residual: !m.residual ? null : m.inFeatures === m.outFeatures ? "identity" : tensor(weights, "residual.weight", [m.outFeatures, m.inFeatures], file),
    };
  });
}
