// The weights of sentence-transformers Dense modules (N_Dense/model.safetensors), for exports whose graph stops at
// the token embeddings: the server applies them after pooling (tasks/embed.ts applyDense); and bge-m3's linear heads
// pickled beside BAAI's encoder export, which the inference worker applies to the token states (tasks/hybrid.ts).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ModelLoadError } from "../errors";
import type { DenseActivation, DenseModule } from "./st-modules";
import { readSafetensors } from "./safetensors";
import { readTorchStateDict } from "./torch-state-dict";

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

/**
 * bge-m3's heads from BAAI's torch.save'd files (FlagEmbedding's BGEM3 model): sparse_linear = nn.Linear(hidden, 1)
 * under a relu, colbert_linear = nn.Linear(hidden, hidden or colbert_dim). Each file must hold exactly the Linear's
 * weight and bias, sized for the encoder's hidden size; anything else is refused at load, naming the file.
 */
export function readPickledHeads(dir: string, files: { sparse: string | null; colbert: string | null }, hiddenSize: number | null): { sparse: DenseLayer | null; colbert: DenseLayer | null } {
  if (!hiddenSize) throw new ModelLoadError("bge-m3's pickled heads need the encoder's hidden_size (config.json)");
  const linear = (file: string, outputs: number | null, activation: DenseActivation): DenseLayer => {
    const weights = readTorchStateDict(join(dir, file));
    const keys = [...weights.keys()].sort();
    if (keys.join() !== "bias,weight") throw new ModelLoadError(`${file} holds ${keys.join(", ") || "no tensors"}; an nn.Linear state_dict holds weight and bias`);
    const w = weights.get("weight")!;
    const out = outputs ?? w.shape[0] ?? 0;
    const linearOf = `nn.Linear(${hiddenSize}, ${outputs ?? "n"}) for the encoder's hidden size ${hiddenSize}`;
    if (w.shape.length !== 2 || w.shape[0] !== out || w.shape[1] !== hiddenSize || out < 1) {
      throw new ModelLoadError(`${file}: weight has shape ${w.shape.join("x")}, expected ${outputs ?? "n"}x${hiddenSize} (${linearOf})`);
    }
    const b = weights.get("bias")!;
    if (b.shape.join("x") !== String(out)) throw new ModelLoadError(`${file}: bias has shape ${b.shape.join("x") || "()"}, expected ${out} (${linearOf})`);
    return { inFeatures: hiddenSize, outFeatures: out, weight: w.data, bias: b.data, activation, residual: null };
  };
  return {
    sparse: files.sparse ? linear(files.sparse, 1, "relu") : null,
    colbert: files.colbert ? linear(files.colbert, null, "identity") : null,
  };
}
