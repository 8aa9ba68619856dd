// /embeddings with CLIP (text + image) and CLAP (text + audio) on a live server: parity with the transformers
// references, ranking consistency, the openai SDK with `modality` as an extra body field, URLs from a local
// HTTP server, and a table of bad media that never disturbs other inputs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { join } from "node:path";
import sharp from "sharp";
import type { RunningServer } from "../../src/server/serve";
import { readFileSync } from "node:fs";
import { cosine, fixture, fixtureBytes, hugeHeaderPng, l2, maxAbsDiff, postJson, reference, ROOT, startTestServer } from "../helpers";

let server: RunningServer;
let url: string;
let files: ReturnType<typeof Bun.serve>;
let filesUrl: string;

const media = fixtureBytes;
const dataUri = (bytes: Uint8Array, type: string) => `data:${type};base64,${Buffer.from(bytes).toString("base64")}`;
const embed = (body: Record<string, unknown>) => postJson(`${url}/embeddings`, { encoding_format: "float", ...body });

beforeAll(async () => {
  const landscape = await media("media/landscape.png");
  const chirp = await media("media/chirp-0.5s.wav");
  files = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      switch (path) {
        case "/landscape.png": return new Response(landscape, { headers: { "content-type": "image/png" } });
        case "/landscape.bin": return new Response(landscape, { headers: { "content-type": "application/octet-stream" } });
        case "/chirp.wav": return new Response(chirp, { headers: { "content-type": "audio/wav" } });
        case "/page.html": return new Response("<html></html>", { headers: { "content-type": "text/html" } });
        case "/big.png": return new Response(new Uint8Array(300_000), { headers: { "content-type": "image/png" } });
        case "/big-chunked.png":
          return new Response(new ReadableStream({ start(c) { for (let i = 0; i < 30; i++) c.enqueue(new Uint8Array(10_000)); c.close(); } }), { headers: { "content-type": "image/png" } });
        case "/slow.png": await Bun.sleep(3000); return new Response(landscape, { headers: { "content-type": "image/png" } });
        case "/missing.png": return new Response("no", { status: 404 });
        case "/redirect": return Response.redirect("/landscape.png", 302);
        case "/redirect-metadata": return Response.redirect("http://169.254.169.254/latest/meta-data/", 302);
        default: return new Response("no", { status: 404 });
      }
    },
  });
  filesUrl = `http://127.0.0.1:${files.port}`;
  server = await startTestServer({
    "model-id": [fixture("clip"), fixture("clap"), fixture("bert-mean-norm")],
    "batch-size": "4",
    "max-media-bytes": "200000",
    "max-image-pixels": "1000000",
    "media-url-timeout": "1",
    "max-inputs-per-request": "16",
  });
  url = server.url;
});
afterAll(async () => {
  await server.shutdown();
  files.stop(true);
});

describe("text towers: parity with get_text_features (normalised) within 1e-4", () => {
  for (const name of ["clip", "clap"]) {
    test(`${name}: one request per text and all in one request`, async () => {
      const ref = await reference(name);
      for (const c of ref.text_cases) {
        const { status, json } = await embed({ model: name, input: c.text });
        expect(status).toBe(200);
        expect(maxAbsDiff(json.data[0].embedding, l2(c.text_embeds))).toBeLessThanOrEqual(1e-4);
        expect(json.usage.prompt_tokens).toBe(c.input_ids.length);
      }
      const all = await embed({ model: name, input: ref.text_cases.map((c: { text: string }) => c.text), modality: "text" });
      expect(all.status).toBe(200);
      ref.text_cases.forEach((c: { text_embeds: number[] }, i: number) => {
        expect(maxAbsDiff(all.json.data[i].embedding, l2(c.text_embeds))).toBeLessThanOrEqual(1e-4);
      });
    });
  }
});

describe("CLIP images", () => {
  test("each committed image: cosine >= 0.999 with the reference image_embeds (data: URIs)", async () => {
    const ref = await reference("clip");
    for (const c of ref.image_cases) {
      const { status, json } = await embed({ model: "clip", modality: "image", input: dataUri(await media(c.file), `image/${c.format}`) });
      expect(status).toBe(200);
      const cos = cosine(json.data[0].embedding, c.image_embeds);
      console.log(`server image embedding ${c.file}: cosine ${cos}, max abs diff (normalised) ${maxAbsDiff(json.data[0].embedding, l2(c.image_embeds)).toExponential(2)}`);
      expect(cos).toBeGreaterThanOrEqual(0.999);
      expect(json.usage).toEqual({ prompt_tokens: 1, total_tokens: 1 });
    }
  });

  test("concurrent requests batch together and keep their order", async () => {
    const ref = await reference("clip");
    const uris = await Promise.all(ref.image_cases.map(async (c: { file: string; format: string }) => dataUri(await media(c.file), `image/${c.format}`)));
    const requests = Array.from({ length: 12 }, (_, r) => {
      const order = uris.map((_: string, i: number) => (i + r) % uris.length).slice(0, 1 + (r % 4));
      return embed({ model: "clip", modality: "image", input: order.map((i: number) => uris[i]) }).then((res) => ({ res, order }));
    });
    for (const { res, order } of await Promise.all(requests)) {
      expect(res.status).toBe(200);
      expect(res.json.usage.total_tokens).toBe(order.length);
      order.forEach((refIndex: number, i: number) => expect(cosine(res.json.data[i].embedding, ref.image_cases[refIndex].image_embeds)).toBeGreaterThanOrEqual(0.999));
    }
  });

  test("ranking: every text's nearest image (and every image's nearest text) is the reference's", async () => {
    // The reference does not pair images with texts, so the check is nearest-neighbour consistency.
    const ref = await reference("clip");
    const texts = await embed({ model: "clip", input: ref.text_cases.map((c: { text: string }) => c.text) });
    const images = await embed({ model: "clip", modality: "image", input: await Promise.all(ref.image_cases.map(async (c: { file: string }) => dataUri(await media(c.file), "image/*"))) });
    const argmax = (xs: number[]) => xs.indexOf(Math.max(...xs));
    for (let t = 0; t < ref.text_cases.length; t++) {
      const ours = images.json.data.map((d: { embedding: number[] }) => cosine(texts.json.data[t].embedding, d.embedding));
      const theirs = ref.image_cases.map((c: { image_embeds: number[] }) => cosine(ref.text_cases[t].text_embeds, c.image_embeds));
      expect(argmax(ours)).toBe(argmax(theirs));
    }
    for (let i = 0; i < ref.image_cases.length; i++) {
      const ours = texts.json.data.map((d: { embedding: number[] }) => cosine(images.json.data[i].embedding, d.embedding));
      const theirs = ref.text_cases.map((c: { text_embeds: number[] }) => cosine(ref.image_cases[i].image_embeds, c.text_embeds));
      expect(argmax(ours)).toBe(argmax(theirs));
    }
  });

  test("dimensions and base64 work for images as for text", async () => {
    const uri = dataUri(await media("media/landscape.png"), "image/png");
    const full = await embed({ model: "clip", modality: "image", input: uri });
    const cut = await embed({ model: "clip", modality: "image", input: uri, dimensions: 8, encoding_format: "base64" });
    const bytes = Buffer.from(cut.json.data[0].embedding, "base64");
    const v = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    expect(v.length).toBe(8);
    expect(maxAbsDiff(v, l2(full.json.data[0].embedding.slice(0, 8)))).toBeLessThan(1e-6);
  });
});

describe("CLAP audio", () => {
  test("each committed WAV: cosine >= 0.999 with the reference audio_embeds", async () => {
    const ref = await reference("clap");
    for (const c of ref.audio_cases) {
      const { status, json } = await embed({ model: "clap", modality: "audio", input: dataUri(await media(c.file), "audio/wav") });
      expect(status).toBe(200);
      const cos = cosine(json.data[0].embedding, c.audio_embeds);
      console.log(`server audio embedding ${c.file}: cosine ${cos}, max abs diff ${maxAbsDiff(json.data[0].embedding, c.audio_embeds).toExponential(2)}`);
      expect(cos).toBeGreaterThanOrEqual(0.999);
    }
  });

  test("audio nearest neighbours among texts agree with the reference", async () => {
    const ref = await reference("clap");
    const texts = await embed({ model: "clap", input: ref.text_cases.map((c: { text: string }) => c.text) });
    const audios = await embed({ model: "clap", modality: "audio", input: await Promise.all(ref.audio_cases.map(async (c: { file: string }) => dataUri(await media(c.file), "audio/wav"))) });
    const argmax = (xs: number[]) => xs.indexOf(Math.max(...xs));
    for (let a = 0; a < ref.audio_cases.length; a++) {
      const ours = texts.json.data.map((d: { embedding: number[] }) => cosine(audios.json.data[a].embedding, d.embedding));
      const theirs = ref.text_cases.map((c: { text_embeds: number[] }) => cosine(ref.audio_cases[a].audio_embeds, c.text_embeds));
      expect(argmax(ours)).toBe(argmax(theirs));
    }
  });
});

describe("/models", () => {
  test("shows capabilities and modalities", async () => {
    const { data } = (await (await fetch(`${url}/models`)).json()) as { data: Array<{ id: string; capabilities: string[]; modalities: string[]; dimensions: number }> };
    const by = Object.fromEntries(data.map((m) => [m.id, m]));
    expect(by.clip!.capabilities).toEqual(["embed", "rerank"]);
    expect(by.clip!.modalities).toEqual(["text", "image"]);
    expect(by.clip!.dimensions).toBe(16);
    expect(by.clap!.modalities).toEqual(["text", "audio"]);
    expect(by["bert-mean-norm"]!.modalities).toEqual(["text"]);
  });
});

describe("openai SDK with modality as an extra body field", () => {
  const client = () => new OpenAI({ apiKey: "unused", baseURL: `${url}/v1`, maxRetries: 0 });

  test("images by URL (base64 default path) match the reference", async () => {
    const ref = await reference("clip");
    const res = await client().embeddings.create({
      model: "clip",
      input: [`${filesUrl}/landscape.png`, `${filesUrl}/landscape.bin`],
      // @ts-expect-error modality is this server's extension of the OpenAI request
      modality: "image",
    });
    expect(res.data).toHaveLength(2);
    for (const d of res.data) expect(cosine(d.embedding, ref.image_cases[0].image_embeds)).toBeGreaterThanOrEqual(0.999);
    expect(res.usage.prompt_tokens).toBe(2);
  });

  test("audio through the request options' extra body", async () => {
    const ref = await reference("clap");
    const res = await client().embeddings.create(
      { model: "clap", input: `${filesUrl}/chirp.wav`, encoding_format: "float" },
      { body: { model: "clap", input: `${filesUrl}/chirp.wav`, encoding_format: "float", modality: "audio" } },
    );
    expect(cosine(res.data[0]!.embedding, ref.audio_cases[1].audio_embeds)).toBeGreaterThanOrEqual(0.999);
  });

  test("wrong modality is a 400 naming what the model serves", async () => {
    // @ts-expect-error modality extension
    const err = await client().embeddings.create({ model: "clip", input: "data:audio/wav;base64,AAAA", modality: "audio" }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(String(err.message)).toContain("serves text and image");
  });
});

describe("URLs", () => {
  test("a redirect is followed", async () => {
    const r = await embed({ model: "clip", modality: "image", input: `${filesUrl}/redirect` });
    expect(r.status).toBe(200);
  });
});

describe("bad media gets a clear 4xx in the one error shape", () => {
  const png = new Uint8Array(readFileSync(join(ROOT, "test", "fixtures", "media", "landscape.png")));
  const wavBytes = new Uint8Array(readFileSync(join(ROOT, "test", "fixtures", "media", "chirp-0.5s.wav")));
  const img = (input: unknown) => ({ model: "clip", modality: "image", input });
  const cases: Array<[string, Record<string, unknown>, number, string]> = [
    ["truncated PNG", img(dataUri(png.slice(0, 100), "image/png")), 400, "could not be decoded"],
    ["text as an image", img(dataUri(new TextEncoder().encode("just text"), "image/png")), 400, "not a decodable image"],
    ["zero bytes", img("data:image/png;base64,"), 400, "empty"],
    ["huge dimensions (decompression bomb)", img(dataUri(hugeHeaderPng(50000, 50000), "image/png")), 400, "--max-image-pixels"],
    ["too many pixels", img(dataUri(hugeHeaderPng(1100, 1000), "image/png")), 400, "at most 1000000"],
    ["wrong base64", img("data:image/png;base64,%%%not-base64%%%"), 400, "base64 is invalid"],
    ["not a data: URI or URL", img("iVBORw0KGgo="), 400, "data: URIs"],
    ["data: URI past the byte limit", img(dataUri(new Uint8Array(300_000), "image/png")), 413, "--max-media-bytes"],
    ["wrong data: URI type", img(dataUri(png, "text/plain")), 415, "text/plain"],
    ["unreachable URL", img("http://127.0.0.1:1/x.png"), 400, "fetching the URL failed"],
    ["URL answering 404", img(`FILES/missing.png`), 400, "HTTP 404"],
    ["URL with the wrong content type", img(`FILES/page.html`), 415, "text/html"],
    ["URL past the byte limit (content-length)", img(`FILES/big.png`), 413, "--max-media-bytes"],
    ["URL past the byte limit (streamed)", img(`FILES/big-chunked.png`), 413, "--max-media-bytes"],
    ["URL too slow", img(`FILES/slow.png`), 400, "--media-url-timeout"],
    ["link-local metadata URL", img("http://169.254.169.254/latest/meta-data/"), 400, "metadata"],
    ["redirect to the metadata address", img(`FILES/redirect-metadata`), 400, "metadata"],
    ["metadata host name", img("http://metadata.google.internal/computeMetadata/v1/"), 400, "metadata host"],
    ["file: URL", img("file:///etc/passwd"), 400, "data: URIs"],
    ["one bad item names its index", img([dataUri(png, "image/png"), "data:image/png;base64,"]), 400, "input[1]"],
    ["token ids as an image", img([1, 2, 3]), 400, "input"],
    ["empty list", img([]), 400, "empty"],
    ["prompt_name with an image", { ...img(dataUri(png, "image/png")), prompt_name: "query" }, 400, "prompt_name"],
    ["image to an audio model", { model: "clap", modality: "image", input: dataUri(png, "image/png") }, 400, "serves text and audio"],
    ["image to a text model", { model: "bert-mean-norm", modality: "image", input: dataUri(png, "image/png") }, 400, "serves text only"],
    ["unknown modality", { model: "clip", modality: "video", input: "x" }, 400, "modality must be one of"],
    ["PNG as audio", { model: "clap", modality: "audio", input: dataUri(png, "audio/wav") }, 415, "supported: WAV"],
    ["truncated WAV", { model: "clap", modality: "audio", input: dataUri(wavBytes.slice(0, 30), "audio/wav") }, 400, "truncated"],
    ["Ogg as audio", { model: "clap", modality: "audio", input: dataUri(new TextEncoder().encode("OggS0000000000000"), "audio/ogg") }, 415, "Ogg"],
  ];
  for (const [name, body, status, needle] of cases) {
    test(name, async () => {
      const res = await postJson(`${url}/embeddings`, typeof body.input === "string" ? { ...body, input: body.input.replace("FILES", filesUrl) } : body);
      expect(res.json.error?.message ?? res.json).toContain(needle);
      expect(res.status).toBe(status);
      expect(Object.keys(res.json.error).sort()).toEqual(["code", "message", "param", "type"]);
    });
  }

  test("a 1x1 image is valid: upscaled like transformers does, a unit vector", async () => {
    const one = new Uint8Array(await sharp({ create: { width: 1, height: 1, channels: 3, background: "blue" } }).png().toBuffer());
    const r = await embed({ model: "clip", modality: "image", input: dataUri(one, "image/png") });
    expect(r.status).toBe(200);
    expect(Math.hypot(...r.json.data[0].embedding)).toBeCloseTo(1, 5);
  });

  test("bad media next to good requests leaves the good ones untouched", async () => {
    const ref = await reference("clip");
    const good = dataUri(png, "image/png");
    const mixed = await Promise.all([
      embed({ model: "clip", modality: "image", input: [good, good] }),
      embed({ model: "clip", modality: "image", input: [good, dataUri(png.slice(0, 60), "image/png")] }),
      embed({ model: "clip", modality: "image", input: dataUri(hugeHeaderPng(99999, 99999), "image/png") }),
      embed({ model: "clip", input: "a photo of a cat" }),
      embed({ model: "clip", modality: "image", input: good }),
    ]);
    expect(mixed.map((r) => r.status)).toEqual([200, 400, 400, 200, 200]);
    expect(cosine(mixed[4]!.json.data[0].embedding, ref.image_cases[0].image_embeds)).toBeGreaterThanOrEqual(0.999);
    expect(maxAbsDiff(mixed[3]!.json.data[0].embedding, l2(ref.text_cases[0].text_embeds))).toBeLessThan(1e-4);
  });
});

describe("remote fetching turned off, public-only addresses", () => {
  test("--no-allow-media-urls refuses URLs and still takes data: URIs", async () => {
    const other = await startTestServer({ "model-id": fixture("clip"), "allow-media-urls": "false", "media-url-public-only": "true", "model-warmup": "false" });
    try {
      const u = await postJson(`${other.url}/embeddings`, { modality: "image", input: `${filesUrl}/landscape.png` });
      expect(u.status).toBe(400);
      expect(u.json.error.message).toContain("--no-allow-media-urls");
      const d = await postJson(`${other.url}/embeddings`, { modality: "image", input: dataUri(await media("media/landscape.png"), "image/png") });
      expect(d.status).toBe(200);
    } finally {
      await other.shutdown();
    }
  });
});
