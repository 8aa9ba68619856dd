// Hub resolution against a fake hub on loopback (HF_ENDPOINT): download into the huggingface_hub cache layout,
// revision, token, offline mode, and clear errors. Local folders are used as they are.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { filesToFetch, hubSettingsFromEnv, listFolder, progressLine, resolveModel, type HubSettings } from "../../src/model/resolve";
import { ModelLoadError } from "../../src/errors";
import { readLayout } from "../../src/model/layout";
import { fixture, l2, maxAbsDiff, postJson, reference, shardedCopy, sparseDiff, startTestServer } from "../helpers";

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const source = fixture("bert-mean-norm");
const BAAI_EXTRA = ["pytorch_model.bin", "imgs/bm25.jpg", "long.jpg", "onnx/sentencepiece.bpe.model", "sentencepiece.bpe.model"];

// A safetensors-only repository saved in shards (no ONNX export): the server builds its graph.
const sharded = join(mkdtempSync(join(tmpdir(), "infinity-sharded-")), "m");
const repoDirs: Record<string, string> = { tiny: source, "no-onnx": source, bare: source, sharded };
const listings: Record<string, (f: string) => boolean> = {
  tiny: () => true,
  "no-onnx": (f) => !f.endsWith(".onnx"),
  bare: (f) => !f.endsWith(".onnx") && !f.endsWith(".safetensors"),
  sharded: () => true,
};

let hub: ReturnType<typeof Bun.serve>;
const requests: Array<{ path: string; auth: string | null }> = [];
beforeAll(() => {
  shardedCopy(fixture("distilbert-embed"), sharded, 2);
  hub = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const url = new URL(req.url);
      requests.push({ path: url.pathname, auth: req.headers.get("authorization") });
      if (url.pathname.startsWith("/api/models/org/private")) return new Response("no", { status: 401 });
      const info = /^\/api\/models\/org\/(tiny|no-onnx|bare|sharded)\/revision\/(.+)$/.exec(url.pathname);
      if (info) {
        if (info[2] !== "main" && info[2] !== "v1") return new Response("unknown revision", { status: 404 });
        const files = listFolder(repoDirs[info[1]!]!).filter(listings[info[1]!]!);
        return Response.json({ sha: COMMIT, siblings: files.map((rfilename) => ({ rfilename })) });
      }
      // BAAI/bge-m3's layout: the fixture's files, listed with the repository's PyTorch weights and images (never fetched).
      if (url.pathname === "/api/models/org/bge-m3/revision/main") {
        return Response.json({ sha: COMMIT, siblings: [...listFolder(fixture("bge-m3-baai")), ...BAAI_EXTRA].map((rfilename) => ({ rfilename })) });
      }
      const file = new RegExp(`^/org/(tiny|no-onnx|bare|sharded|bge-m3)/resolve/${COMMIT}/(.+)$`).exec(url.pathname);
      if (file) {
        const p = join(file[1] === "bge-m3" ? fixture("bge-m3-baai") : repoDirs[file[1]!]!, decodeURIComponent(file[2]!));
        return existsSync(p) ? new Response(Bun.file(p)) : new Response("missing", { status: 404 });
      }
      return new Response("not found", { status: 404 });
    },
  });
});
afterAll(() => hub.stop(true));

const settings = (over: Partial<HubSettings> = {}): HubSettings => ({
  endpoint: `http://127.0.0.1:${hub.port}`,
  token: null,
  offline: false,
  cacheDir: mkdtempSync(join(tmpdir(), "infinity-hub-")),
  progress: () => {},
  ...over,
});

describe("hub download", () => {
  test("downloads what the model needs into the hub cache layout, then works offline from it", async () => {
    const s = settings({ token: "hf_secret" });
    const lines: string[] = [];
    s.progress = (msg, done) => done && lines.push(msg);
    const r = await resolveModel("org/tiny", "main", "auto", s, "export");
    expect(r.source).toBe("hub");
    expect(r.dir).toBe(join(s.cacheDir, "models--org--tiny", "snapshots", COMMIT));
    expect(readFileSync(join(s.cacheDir, "models--org--tiny", "refs", "main"), "utf8")).toBe(COMMIT);
    // Only the float32 export is fetched for dtype auto, with the sentence-transformers module configs.
    expect(r.files).toContain("onnx/model.onnx");
    expect(r.files).not.toContain("onnx/model_fp16.onnx");
    expect(r.files).toContain("1_Pooling/config.json");
    expect(r.files).not.toContain("model.safetensors");
    expect(readFileSync(join(r.dir, "onnx/model.onnx")).equals(readFileSync(join(source, "onnx/model.onnx")))).toBe(true);
    expect(requests.filter((q) => q.path.includes("/resolve/")).every((q) => q.auth === "Bearer hf_secret")).toBe(true);
    expect(lines.some((l) => l.includes("org/tiny/onnx/model.onnx") && l.includes("100%"))).toBe(true);

    // A second resolve downloads nothing new; offline mode reads the cache without asking the hub.
    const before = requests.filter((q) => q.path.includes("/resolve/")).length;
    await resolveModel("org/tiny", "main", "auto", s, "export");
    expect(requests.filter((q) => q.path.includes("/resolve/")).length).toBe(before);
    const offline = await resolveModel("org/tiny", "main", "auto", { ...s, offline: true, endpoint: "http://127.0.0.1:9" }, "export");
    expect(offline.source).toBe("cache");
    expect(offline.dir).toBe(r.dir);
  });

  test("dtype picks the file to download; a revision is passed to the hub", async () => {
    const s = settings();
    const r = await resolveModel("org/tiny", "v1", "int8", s);
    expect(r.files).toContain("onnx/model_quantized.onnx");
    expect(r.files).not.toContain("onnx/model.onnx");
    expect(requests.some((q) => q.path === "/api/models/org/tiny/revision/v1")).toBe(true);
  });

  test("BAAI/bge-m3's layout: the pickled heads and every external data file the graph names are fetched, and the folder serves all three outputs", async () => {
    const s = settings();
    const r = await resolveModel("org/bge-m3", "main", "auto", s, "export");
    expect(r.files).toEqual(expect.arrayContaining(["sparse_linear.pt", "colbert_linear.pt", "onnx/model.onnx", "onnx/model.onnx_data", "onnx/Constant_123_attr__value", "1_Pooling/config.json"]));
    for (const f of BAAI_EXTRA) expect(r.files).not.toContain(f);
    expect(requests.filter((q) => q.path.startsWith("/org/bge-m3/resolve/")).length).toBe(r.files.length);
    const server = await startTestServer({ "model-id": r.dir, "served-model-name": "m3" });
    try {
      const want = (await reference("bge-m3")).cases[3];
      const { status, json } = await postJson(`${server.url}/embeddings`, { model: "m3", input: want.text, output: ["dense", "sparse", "multi_vector"] });
      expect(status).toBe(200);
      expect(maxAbsDiff(json.data[0].embedding.dense, want.dense)).toBeLessThanOrEqual(1e-4);
      expect(sparseDiff(json.data[0].embedding.sparse, want.sparse)).toBeLessThanOrEqual(1e-4);
      expect(json.data[0].embedding.multi_vector.length).toBe(want.multi_vector.length);
    } finally {
      await server.shutdown();
    }
  });

  test("a repository without an ONNX export: its safetensors (a sharded one's index and shards) are fetched, and the built graph serves", async () => {
    for (const [repo, name, weights] of [["org/no-onnx", "bert-mean-norm", ["model.safetensors"]], ["org/sharded", "distilbert-embed", ["model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]]] as const) {
      const s = settings();
      const r = await resolveModel(repo, "main", "auto", s);
      expect(r.files).toEqual(expect.arrayContaining([...weights, "config.json", "tokenizer.json", "1_Pooling/config.json"]));
      expect(r.files.some((f) => f.endsWith(".onnx"))).toBe(false);
      const offline = await resolveModel(repo, "main", "auto", { ...s, offline: true, endpoint: "http://127.0.0.1:9" });
      expect(offline.dir).toBe(r.dir);
      const server = await startTestServer({ "model-id": r.dir, "served-model-name": "m", "cache-dir": s.cacheDir, "model-warmup": "false" });
      try {
        const models = (await (await fetch(`${server.url}/models`)).json()).data;
        expect(models[0].graph).toMatchObject({ source: "build", cached: false });
        const cases = (await reference(name)).cases as Array<{ text: string; embedding: number[] }>;
        const { status, json } = await postJson(`${server.url}/embeddings`, { model: "m", input: cases.map((c) => c.text), encoding_format: "float" });
        expect(status).toBe(200);
        cases.forEach((c, i) => expect(maxAbsDiff(json.data[i].embedding, l2(c.embedding))).toBeLessThanOrEqual(1e-4));
      } finally {
        await server.shutdown();
      }
    }
    // --graph build on a repository with an export fetches the weights, not the export; so does auto for an
    // architecture whose built graph is preferred (BERT; BAAI/bge-m3's XLM-R with its pickled heads), config.json
    // read first; with --dtype int8 auto keeps the export's quantized file.
    for (const [repo, graph] of [["org/tiny", "build"], ["org/tiny", "auto"], ["org/bge-m3", "auto"]] as const) {
      const built = await resolveModel(repo, "main", "auto", settings(), graph);
      expect(built.files).toContain("model.safetensors");
      expect(built.files.some((f) => f.endsWith(".onnx") || f.endsWith(".onnx_data"))).toBe(false);
      if (repo === "org/bge-m3") expect(built.files).toEqual(expect.arrayContaining(["sparse_linear.pt", "colbert_linear.pt"]));
    }
    const int8 = await resolveModel("org/tiny", "main", "int8", settings());
    expect(int8.files).toContain("onnx/model_quantized.onnx");
    expect(int8.files).not.toContain("model.safetensors");
  });

  test("clear errors: no ONNX export, unknown revision, gated model, unreachable hub, offline without cache", async () => {
    await expect(resolveModel("org/bare", "main", "auto", settings())).rejects.toThrow(/no ONNX export.*no \.onnx file/);
    await expect(resolveModel("org/no-onnx", "main", "auto", settings(), "export")).rejects.toThrow(/no ONNX export.*build the graph from its safetensors \(--graph auto or build\)/);
    await expect(resolveModel("org/tiny", "nope", "auto", settings())).rejects.toThrow(/not found on the hub/);
    await expect(resolveModel("org/private", "main", "auto", settings())).rejects.toThrow(/HF_TOKEN/);
    await expect(resolveModel("org/tiny", "main", "auto", settings({ endpoint: "http://127.0.0.1:9" }))).rejects.toThrow(/cannot reach the hub.*HF_HUB_OFFLINE/);
    await expect(resolveModel("org/tiny", "main", "auto", settings({ offline: true }))).rejects.toThrow(/HF_HUB_OFFLINE.*not in the cache/);
    await expect(resolveModel("not a valid id!", "main", "auto", settings())).rejects.toThrow(ModelLoadError);
  });
});

describe("local folders and settings", () => {
  test("a local folder is used as it is", async () => {
    const r = await resolveModel(source, "main", "auto", settings());
    expect(r.source).toBe("local");
    expect(r.dir).toBe(source);
    await expect(resolveModel("/nonexistent/folder", "main", "auto", settings())).rejects.toThrow(/not found/);
  });

  test("settings from the environment", () => {
    const s = hubSettingsFromEnv({ HF_HOME: "/h", HF_TOKEN: "t", HF_HUB_OFFLINE: "1", HF_ENDPOINT: "http://mirror/" }, null);
    expect(s).toMatchObject({ cacheDir: "/h/hub", token: "t", offline: true, endpoint: "http://mirror" });
    expect(hubSettingsFromEnv({ INFINITY_HOME: "/i" }, null).cacheDir).toBe("/i");
    expect(hubSettingsFromEnv({ INFINITY_HOME: "/i" }, "/flag").cacheDir).toBe("/flag");
  });

  test("which files are fetched", () => {
    const repo = ["config.json", "tokenizer.json", "README.md", "pytorch_model.bin", "1_Pooling/config.json", "onnx/model.onnx", "onnx/model.onnx_data", "onnx/model_fp16.onnx"];
    expect(filesToFetch(repo, "auto").sort()).toEqual(["1_Pooling/config.json", "config.json", "onnx/model.onnx", "onnx/model.onnx_data", "tokenizer.json"]);
    // Dense weights (applied by the server when the export stops at the token states); metadata inside onnx/ when
    // the root has none (protectai/deberta-v3-base-prompt-injection-v2's self-contained export folder).
    const st = ["config.json", "tokenizer.json", "modules.json", "2_Dense/config.json", "2_Dense/model.safetensors", "2_Dense/pytorch_model.bin", "onnx/model.onnx"];
    expect(filesToFetch(st, "auto").sort()).toEqual(["2_Dense/config.json", "2_Dense/model.safetensors", "config.json", "modules.json", "onnx/model.onnx", "tokenizer.json"]);
    // The older OpenSearch inference-free layout's query weights.
    expect(filesToFetch(["config.json", "idf.json", "tokenizer.json", "onnx/model.onnx"], "auto").sort()).toEqual(["config.json", "idf.json", "onnx/model.onnx", "tokenizer.json"]);
    const inside = ["README.md", "model.safetensors", "onnx/config.json", "onnx/tokenizer.json", "onnx/tokenizer_config.json", "onnx/model.onnx"];
    expect(filesToFetch(inside, "auto").sort()).toEqual(["onnx/config.json", "onnx/model.onnx", "onnx/tokenizer.json", "onnx/tokenizer_config.json"]);
    expect(() => filesToFetch(["config.json", "pytorch_model.bin"], "auto", "org/m")).toThrow(/org\/m has no ONNX export.*optimum-cli export onnx --model org\/m m-onnx/);
    // No export, safetensors weights: the graph is built, from the weights (a sharded model's index; shards follow).
    expect(filesToFetch(["config.json", "tokenizer.json", "model.safetensors", "pytorch_model.bin"], "auto").sort()).toEqual(["config.json", "model.safetensors", "tokenizer.json"]);
    expect(filesToFetch(["config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors"], "auto").sort()).toEqual(["config.json", "model.safetensors.index.json"]);
    expect(filesToFetch(repo.concat("model.safetensors"), "auto", "org/m", "build").sort()).toEqual(["1_Pooling/config.json", "config.json", "model.safetensors", "tokenizer.json"]);
    expect(filesToFetch(["config.json", "artifact.metadata", "vespa_colbert.onnx"], "auto").sort()).toEqual(["artifact.metadata", "config.json", "vespa_colbert.onnx"]);
    expect(progressLine("m/f", 50, 100)).toContain("50%");
  });

  test("the inference-free sparse layouts: the files fetched read as the whole folder does", () => {
    for (const name of ["opensearch-sparse", "opensearch-sparse-idf"]) {
      const dir = fixture(name);
      const files = listFolder(dir);
      const fetched = filesToFetch(files, "auto");
      if (name === "opensearch-sparse") {
        expect(fetched).toContain("router_config.json");
        expect(fetched).toContain("query_0_SparseStaticEmbedding/model.safetensors");
        expect(fetched).toContain("document_1_SpladePooling/config.json");
        expect(fetched).not.toContain("document_0_MLMTransformer/model.safetensors");
      }
      const copy = mkdtempSync(join(tmpdir(), `${name}-fetched-`));
      for (const f of fetched) {
        mkdirSync(dirname(join(copy, f)), { recursive: true });
        copyFileSync(join(dir, f), join(copy, f));
      }
      const whole = readLayout(dir, files, "auto", "auto");
      const got = readLayout(copy, listFolder(copy), "auto", "auto");
      expect(got.task).toBe("sparse");
      expect({ ...got.sparse, query: { ...got.sparse!.query } }).toEqual({ ...whole.sparse, query: { ...whole.sparse!.query } });
    }
  });
});
