// deploy/kubernetes/*.yaml: every object validates against the Kubernetes OpenAPI schema (kubernetes-models'
// validators, bundled with the npm package, no network), and the settings that keep rollouts and shutdowns safe
// hold together: readiness probes on /health and liveness on /live, a startup probe covering model loading, grace period > drain + preStop.
// The optional kustomize Components (keda/: a ScaledObject replacing the CPU HPA; redis/: a shared result cache)
// validate too (KEDA's schema from @kubernetes-models/keda), and point at what exists: the Deployment, metrics the
// server exports, the redis Service's name and port.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject";
import { Deployment } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { PersistentVolumeClaim, Service } from "kubernetes-models/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { OPTIONS, parseResultCache } from "../../src/config";
import { Metrics } from "../../src/metrics";
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
  "keda.sh/v1alpha1/ScaledObject": ScaledObject,
};

const files = readdirSync(DIR).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml").sort();
const readManifests = (dir: string, names: string[]): { file: string; doc: Manifest }[] =>
  names.flatMap((file) => {
    const parsed = Bun.YAML.parse(readFileSync(join(dir, file), "utf8")) as Manifest | Manifest[];
    return (Array.isArray(parsed) ? parsed : [parsed]).map((doc) => ({ file, doc }));
  });
const manifests = readManifests(DIR, files);
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

interface Component {
  kind: string;
  resources: string[];
  patches: { patch: string }[];
}

/** A Component folder: its kustomization, the objects its resources add, its patches parsed. */
function component(name: string) {
  const dir = join(DIR, name);
  const k = Bun.YAML.parse(readFileSync(join(dir, "kustomization.yaml"), "utf8")) as Component;
  const objects = readManifests(dir, k.resources);
  const patches = k.patches.map((p) => Bun.YAML.parse(p.patch) as any);
  return { k, objects, patches, get: (kind: string) => objects.find((m) => m.doc.kind === kind)!.doc as any };
}

/** The metric names a PromQL query reads: identifiers outside label matchers, ranges and by/without clauses, not called. */
function promMetricNames(query: string): string[] {
  const bare = query
    .replace(/"(?:[^"\\]|\\.)*"/g, "")
    .replace(/\{[^}]*\}|\[[^\]]*\]/g, " ")
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ");
  const keywords = new Set(["and", "or", "unless", "offset", "bool"]);
  return [...bare.matchAll(/\b[A-Za-z_:][\w:]*\b(?!\s*\()/g)].map((m) => m[0]).filter((n) => !keywords.has(n));
}

describe("deploy/kubernetes/keda: ScaledObject in place of the CPU HPA", () => {
  const keda = component("keda");
  const scaled = keda.get("ScaledObject");
  const hpa = byKind("HorizontalPodAutoscaler");
  const exported = new Map([...new Metrics().render().matchAll(/^# TYPE (\S+) (\w+)$/gm)].map((m) => [m[1]!, m[2]!]));

  test("a Component that adds only the ScaledObject, which validates against KEDA's schema", () => {
    expect(keda.k.kind).toBe("Component");
    expect(keda.objects.map((m) => m.doc.kind)).toEqual(["ScaledObject"]);
    expect(() => new ScaledObject(scaled).validate()).not.toThrow();
    // The validator is real: trigger metadata values are strings.
    const broken = structuredClone(scaled);
    broken.spec.triggers[0].metadata.threshold = 32;
    expect(() => new ScaledObject(broken).validate()).toThrow(/threshold/);
  });

  test("deletes the base's HPA (KEDA makes its own) and keeps its bounds and behaviour", () => {
    const deletes = keda.patches.filter((p) => p.$patch === "delete");
    expect(deletes).toEqual([{ $patch: "delete", apiVersion: hpa.apiVersion, kind: hpa.kind, metadata: { name: hpa.metadata.name } }]);
    expect(scaled.spec.minReplicaCount).toBe(hpa.spec.minReplicas);
    expect(scaled.spec.maxReplicaCount).toBe(hpa.spec.maxReplicas);
    expect(scaled.spec.advanced.horizontalPodAutoscalerConfig.behavior).toEqual(hpa.spec.behavior);
  });

  test("targets the Deployment", () => {
    const deployment = byKind("Deployment");
    expect(scaled.spec.scaleTargetRef).toEqual({ apiVersion: deployment.apiVersion, kind: deployment.kind, name: deployment.metadata.name });
  });

  test("the metric-name parser reads names, not functions, labels or ranges", () => {
    expect(promMetricNames('sum by (pod) (rate(infinity_tokens_total{namespace="a_b"}[5m])) / on (pod) x_y')).toEqual(["infinity_tokens_total", "x_y"]);
  });

  test("Prometheus triggers on queue depth and requests in flight: gauges the server exports, per-replica targets", () => {
    const queries = Object.fromEntries(scaled.spec.triggers.map((t: any) => [t.name, t.metadata.query]));
    expect(promMetricNames(queries["queue-depth"])).toEqual(["infinity_queue_depth"]);
    expect(promMetricNames(queries["requests-in-flight"])).toEqual(["infinity_requests_in_flight"]);
    for (const t of scaled.spec.triggers) {
      expect(t.type).toBe("prometheus");
      expect(t.metricType).toBe("AverageValue");
      expect(new URL(t.metadata.serverAddress).protocol).toMatch(/^https?:$/);
      expect(Number(t.metadata.threshold)).toBeGreaterThan(0);
      // sum() of a gauge is the load now; a counter would need rate().
      for (const name of promMetricNames(t.metadata.query)) expect(exported.get(name)).toBe("gauge");
    }
  });
});

describe("deploy/kubernetes/redis: shared result cache", () => {
  const redis = component("redis");
  const deployment = redis.get("Deployment");
  const service = redis.get("Service");
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];

  test("a Component whose objects validate against the Kubernetes schema", () => {
    expect(redis.k.kind).toBe("Component");
    expect(redis.objects.map((m) => m.doc.kind).sort()).toEqual(["Deployment", "Service"]);
    for (const { doc } of redis.objects) expect(() => new MODELS[`${doc.apiVersion}/${doc.kind}`]!(doc as never).validate()).not.toThrow();
  });

  test("Redis: bounded LRU cache, no persistence, non-root, read-only root, resources, probes", () => {
    const arg = (flag: string) => container.args[container.args.indexOf(flag) + 1];
    expect(container.image).toMatch(/^redis:/);
    expect(arg("--maxmemory")).toMatch(/^\d+[kmg]b$/);
    expect(arg("--maxmemory-policy")).toBe("allkeys-lru");
    expect(arg("--save")).toBe("");
    expect(arg("--appendonly")).toBe("no");
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    expect(container.resources.requests.memory).toBeDefined();
    expect(container.resources.limits.memory).toBeDefined();
    expect(container.readinessProbe).toBeDefined();
    expect(container.livenessProbe).toBeDefined();
  });

  test("the Service selects the Redis pods, and the infinity Service and PDB do not", () => {
    const labels = deployment.spec.template.metadata.labels;
    for (const [k, v] of Object.entries(service.spec.selector)) expect(labels[k]).toBe(v);
    expect(service.spec.ports[0].targetPort).toBe(container.ports[0].name);
    const matches = (selector: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);
    expect(matches(byKind("Service").spec.selector)).toBe(false);
    expect(matches(byKind("PodDisruptionBudget").spec.selector.matchLabels)).toBe(false);
  });

  test("the infinity container gets INFINITY_RESULT_CACHE pointing at the Service's name and port", () => {
    const [patch] = redis.patches;
    const base = byKind("Deployment");
    expect(patch.metadata.name).toBe(base.metadata.name);
    const patched = patch.spec.template.spec.containers[0];
    expect(patched.name).toBe(base.spec.template.spec.containers[0].name);
    const env = Object.fromEntries(patched.env.map((e: { name: string; value: string }) => [e.name, e.value]));
    expect(OPTIONS.some((o) => o.name === "result-cache")).toBe(true);
    expect(parseResultCache(env.INFINITY_RESULT_CACHE, 1)?.backend.kind).toBe("redis");
    const url = new URL(env.INFINITY_RESULT_CACHE);
    expect(url.hostname).toBe(service.metadata.name);
    expect(Number(url.port)).toBe(service.spec.ports[0].port);
  });
});

// kustomize itself, where kubectl is installed (it needs no cluster): the base plus both Components, as docs/deploy.md shows.
test.skipIf(!Bun.which("kubectl"))("kubectl kustomize: base + keda + redis builds without the HPA, with the cache URL", () => {
  const dir = mkdtempSync(join(tmpdir(), "infinity-kustomize-"));
  try {
    const base = relative(dir, DIR);
    writeFileSync(join(dir, "kustomization.yaml"), `resources: [${base}]\ncomponents: [${base}/keda, ${base}/redis]\n`);
    const run = Bun.spawnSync(["kubectl", "kustomize", dir], { stdout: "pipe", stderr: "pipe" });
    expect(run.stderr.toString()).toBe("");
    const docs = Bun.YAML.parse(run.stdout.toString()) as any[];
    expect(docs.map((d) => `${d.kind}/${d.metadata.name}`).sort()).toEqual(
      ["Deployment/infinity", "Deployment/infinity-redis", "PodDisruptionBudget/infinity", "ScaledObject/infinity", "Service/infinity", "Service/infinity-redis"],
    );
    const infinity = docs.find((d) => d.kind === "Deployment" && d.metadata.name === "infinity");
    const env = infinity.spec.template.spec.containers[0].env.map((e: { name: string }) => e.name);
    expect(env).toContain("INFINITY_RESULT_CACHE");
    expect(env).toContain("INFINITY_MODEL_ID");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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
