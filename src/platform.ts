// Managed ML platforms start the container their own way; this turns what each one hands the process into the
// server's own options, below anything given explicitly (flags, INFINITY_* variables, the config file).
//   SageMaker: `docker run <image> serve`, port 8080, the model in HF_MODEL_ID or unpacked at /opt/ml/model.
//   Vertex AI: AIP_HTTP_PORT, AIP_STORAGE_URI (the model folder, gs:// or a path), AIP_HEALTH_ROUTE and AIP_PREDICT_ROUTE (routes the
//   server adds: server/routes/platforms.ts).
import { ConfigError } from "./errors";

export const SAGEMAKER_MODEL_DIR = "/opt/ml/model";
export const SAGEMAKER_PORT = "8080";

/** What a platform's entry turns into: the arguments left for the option parser and variables to fall back on. */
export interface PlatformStart {
  platform: "sagemaker" | "vertex" | null;
  args: string[];
  /** The environment with the platform's defaults added where the INFINITY_* variable is unset. */
  env: Record<string, string | undefined>;
}

function hasFlag(args: readonly string[], name: string): boolean {
  return args.some((a) => a === `--${name}` || a.startsWith(`--${name}=`));
}

export function platformStart(argv: readonly string[], env: Record<string, string | undefined>, exists: (path: string) => boolean): PlatformStart {
  const sagemaker = argv[0] === "serve";
  const args = argv[0] === "v2" || sagemaker ? argv.slice(1) : [...argv];
  const vertex = !sagemaker && env.AIP_HTTP_PORT !== undefined;
  if (!sagemaker && !vertex) return { platform: null, args, env };
  const out = { ...env };
  const noModel = !hasFlag(args, "model-id") && out.INFINITY_MODEL_ID === undefined && !hasFlag(args, "config") && out.INFINITY_CONFIG === undefined;
  if (sagemaker) {
    if (!hasFlag(args, "port")) out.INFINITY_PORT ??= SAGEMAKER_PORT;
    if (noModel) {
      const model = env.HF_MODEL_ID ?? (exists(SAGEMAKER_MODEL_DIR) ? SAGEMAKER_MODEL_DIR : undefined);
      if (!model) throw new ConfigError(`serve (SageMaker): no model: set HF_MODEL_ID or provide the model at ${SAGEMAKER_MODEL_DIR}`);
      out.INFINITY_MODEL_ID = model;
    }
    return { platform: "sagemaker", args, env: out };
  }
  if (!hasFlag(args, "port")) out.INFINITY_PORT ??= env.AIP_HTTP_PORT;
  if (noModel && env.AIP_STORAGE_URI) {
    // A gs:// URI is copied from Cloud Storage at load (model/gcs.ts); a path is read as it is.
    out.INFINITY_MODEL_ID = env.AIP_STORAGE_URI;
  } else if (noModel && env.HF_MODEL_ID) {
    out.INFINITY_MODEL_ID = env.HF_MODEL_ID;
  }
  return { platform: "vertex", args, env: out };
}

/** Vertex AI's routes (AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE), each a path, or null. */
export function vertexRoutes(env: Record<string, string | undefined>): { health: string | null; predict: string | null } {
  const route = (name: string): string | null => {
    const v = env[name]?.trim();
    if (!v) return null;
    if (!v.startsWith("/") || /\s|[?#]/.test(v)) throw new ConfigError(`${name} must be a path such as /predict, got "${v}"`);
    return v.replace(/\/+$/, "") || "/";
  };
  return { health: route("AIP_HEALTH_ROUTE"), predict: route("AIP_PREDICT_ROUTE") };
}
