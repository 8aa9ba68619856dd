// deploy/kubernetes/*.yaml: every object validates against the Kubernetes OpenAPI schema (kubernetes-models'
// validators, bundled with the npm package, no network), and the settings that keep rollouts and shutdowns safe
// hold together: readiness probes on /health and liveness on /live, a startup probe covering model loading, grace period > drain + preStop.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Deployment } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { PersistentVolumeClaim, Service } from "kubernetes-models/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { OPTIONS } from "../../src/config";
import { ROOT } from "./binary";

const DIR = join(ROOT, "deploy", "kubernetes");

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata?: { name?: string };
  [key: string]: unknown;
}

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  "apps/v1/Deployment": Deployment,
  "v1/Service": Service,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
};

const files = readdirSync(DIR).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml").sort();
const manifests: { file: string; doc: Manifest }[] = files.flatMap((file) => {
  const parsed = Bun.YAML.parse(readFileSync(join(DIR, file), "utf8")) as Manifest | Manifest[];
  return (Array.isArray(parsed) ? parsed : [parsed]).map((doc) => ({ file, doc }));
});
const byKind = (kind: string) => manifests.find((m) => m.doc.kind === kind)!.doc as any;

describe("deploy/kubernetes manifests", () => {
  test("has the expected objects", () => {
    expect(manifests.map((m) => m.doc.kind).sort()).toEqual(
      ["Deployment", "HorizontalPodAutoscaler", "PersistentVolumeClaim", "PodDisruptionBudget", "Service"],
    );
  });

  for (const { file, doc } of manifests) {
    test(`${file}: ${doc.kind} validates against the Kubernetes schema`, () => {
      const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      expect(Model).toBeDefined();
      expect(() => new Model!(doc as never).validate()).not.toThrow();
    });
  }

  test("the validator does reject a broken object", () => {
    const broken = structuredClone(byKind("Deployment"));
    broken.spec.template.spec.containers[0].ports[0].containerPort = "7997";
    expect(() => new Deployment(broken).validate()).toThrow(/containerPort/);
  });

  test("kustomization lists every manifest except the optional PVC", () => {
    const k = Bun.YAML.parse(readFileSync(join(DIR, "kustomization.yaml"), "utf8")) as { resources: string[] };
    expect([...k.resources].sort()).toEqual(files.filter((f) => f !== "model-cache-pvc.yaml"));
  });

  const deployment = byKind("Deployment");
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  const env = Object.fromEntries(container.env.map((e: { name: string; value: string }) => [e.name, e.value]));

  test("probes: readiness on /health, liveness on /live, gated by a startup probe long enough to load models", () => {
    for (const probe of ["startupProbe", "readinessProbe"]) {
      expect(container[probe].httpGet.path).toBe("/health");
      expect(container[probe].httpGet.port).toBe("http");
    }
    // Liveness is a separate route that stays 200 while a model is broken or the server drains (test/server/lifecycle).
    expect(container.livenessProbe.httpGet.path).toBe("/live");
    expect(container.livenessProbe.httpGet.port).toBe("http");
    const startup = container.startupProbe;
    expect(startup.periodSeconds * startup.failureThreshold).toBeGreaterThanOrEqual(300);
    // Liveness tolerates a stall longer than the readiness probe does, so it does not restart a busy pod first.
    const live = container.livenessProbe, ready = container.readinessProbe;
    expect(live.periodSeconds * live.failureThreshold).toBeGreaterThan(ready.periodSeconds * ready.failureThreshold);
  });

  test("terminationGracePeriodSeconds exceeds preStop sleep + shutdown timeout", () => {
    const shutdownDefault = OPTIONS.find((o) => o.name === "shutdown-timeout")!.default as number;
    const shutdown = Number(env.INFINITY_SHUTDOWN_TIMEOUT ?? shutdownDefault);
    const preStop = container.lifecycle.preStop.sleep.seconds;
    expect(preStop).toBeGreaterThan(0);
    // src/server/serve.ts waits up to 2 s more after the drain for the last responses to be written.
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(preStop + shutdown + 2);
  });

  test("container: port, INFINITY_* options that exist, resources, non-root and read-only", () => {
    expect(container.ports[0].containerPort).toBe(Number(env.INFINITY_PORT));
    const known = new Set(OPTIONS.map((o) => "INFINITY_" + o.name.toUpperCase().replace(/-/g, "_")));
    for (const name of Object.keys(env)) if (!["INFINITY_HOME", "INFINITY_NATIVE_DIR", "TMPDIR"].includes(name)) expect(known).toContain(name);
    expect(container.resources.requests.cpu).toBeDefined();
    expect(container.resources.requests.memory).toBeDefined();
    expect(container.resources.limits.memory).toBeDefined();
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    // The model cache is a volume mounted where INFINITY_HOME points.
    const mount = container.volumeMounts.find((m: { mountPath: string }) => m.mountPath === env.INFINITY_HOME);
    expect(pod.volumes.map((v: { name: string }) => v.name)).toContain(mount.name);
    // Rewritten graphs (src/model/scratch.ts) go under TMPDIR: with a read-only root it must be on that volume.
    expect(env.TMPDIR.startsWith(`${mount.mountPath}/`)).toBe(true);
  });

  test("Service, PDB and HPA select / target the Deployment", () => {
    const labels = deployment.spec.template.metadata.labels;
    for (const kind of ["Service", "PodDisruptionBudget"]) {
      const selector = kind === "Service" ? byKind(kind).spec.selector : byKind(kind).spec.selector.matchLabels;
      for (const [k, v] of Object.entries(selector)) expect(labels[k]).toBe(v);
    }
    expect(byKind("Service").spec.ports[0].targetPort).toBe(container.ports[0].name);
    const hpa = byKind("HorizontalPodAutoscaler");
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: "apps/v1", kind: "Deployment", name: deployment.metadata.name });
    expect(hpa.spec.metrics[0].resource.name).toBe("cpu");
    // A PDB allowing one disruption still leaves a pod when the HPA is at its minimum.
    expect(hpa.spec.minReplicas).toBeGreaterThan(byKind("PodDisruptionBudget").spec.maxUnavailable);
  });
});

describe("Dockerfile", () => {
  const text = readFileSync(join(ROOT, "Dockerfile"), "utf8");
  const stages = [...text.matchAll(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/gim)].map((m) => ({ image: m[1]!, name: m[2] ?? null }));

  test("multi-stage: npm ci + bun run build, distroless default, CUDA target", () => {
    expect(stages[0]!.name).toBe("build");
    expect(text).toMatch(/npm ci/);
    expect(text).toMatch(/npm run build/);
    expect(stages.find((s) => s.name === "cpu")!.image).toMatch(/^gcr\.io\/distroless\/cc-debian12/);
    expect(stages.find((s) => s.name === "cuda")).toBeDefined();
    expect(text).toMatch(/ARG ONNXRUNTIME_NODE_INSTALL=skip/);
    // The last stage is the default target: the CPU image.
    expect(stages.at(-1)!.image).toBe("cpu");
  });

  test("runtime: non-root, port 7997, writable native folder and model volume", () => {
    expect(text).toMatch(/^USER 65532/m);
    expect(text).toMatch(/^EXPOSE 7997$/m);
    // The port is the program's default (7997), not the image's: SageMaker's `serve` (8080) and Vertex AI's
    // AIP_HTTP_PORT choose it when INFINITY_PORT is unset (src/platform.ts).
    expect(text).not.toMatch(/INFINITY_PORT=/);
    expect(text).toMatch(/INFINITY_NATIVE_DIR=\/opt\/infinity\/native/);
    expect(text).toMatch(/--chown=65532:65532 \/out\/native \/opt\/infinity\/native/);
    expect(text).toMatch(/VOLUME \["\/data"\]/);
    // Both runtime stages keep the temporary folder (rewritten graphs) on the volume, not on the read-only root.
    expect([...text.matchAll(/^\s*TMPDIR=(\S+)/gm)].map((m) => m[1])).toEqual(["/data/tmp", "/data/tmp"]);
  });
});
