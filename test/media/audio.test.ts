// WAV decoding, mix-down, resampling, CLAP truncation/padding and the log-mel features against the Python
// ClapFeatureExtractor reference, and the audio tower alone on the reference input_features.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { InvalidMedia } from "../../src/errors";
import { audioConfigFrom, decodeWav, fitLength, mixDown, resample } from "../../src/media/audio";
import { AudioPreprocessor } from "../../src/media/audio-features";
import { ModelSession } from "../../src/model/session";
import { cosine, fixture, fixtureBytes, l2, maxAbsDiff, reference, ROOT } from "../helpers";

const media = fixtureBytes;

/** A WAV file of the given samples (per channel arrays in [-1, 1]). */
export function wav(channels: Float32Array[], rate: number, bits: 8 | 16 | 24 | 32, float = false): Uint8Array {
  const frames = channels[0]!.length;
  const bytesPer = bits / 8;
  const dataLen = frames * channels.length * bytesPer;
  const buf = new Uint8Array(44 + dataLen);
  const v = new DataView(buf.buffer);
  const put = (o: number, s: string) => [...s].forEach((ch, i) => (buf[o + i] = ch.charCodeAt(0)));
  put(0, "RIFF"); v.setUint32(4, 36 + dataLen, true); put(8, "WAVE"); put(12, "fmt ");
  v.setUint32(16, 16, true); v.setUint16(20, float ? 3 : 1, true); v.setUint16(22, channels.length, true);
  v.setUint32(24, rate, true); v.setUint32(28, rate * channels.length * bytesPer, true);
  v.setUint16(32, channels.length * bytesPer, true); v.setUint16(34, bits, true);
  put(36, "data"); v.setUint32(40, dataLen, true);
  let o = 44;
  for (let f = 0; f < frames; f++) {
    for (const ch of channels) {
      const x = ch[f]!;
      if (float) v.setFloat32(o, x, true);
      else if (bits === 8) buf[o] = Math.round(x * 127) + 128;
      else if (bits === 16) v.setInt16(o, Math.round(x * 32767), true);
      else if (bits === 24) { const i = Math.round(x * 8388607); buf[o] = i & 255; buf[o + 1] = (i >> 8) & 255; buf[o + 2] = (i >> 16) & 255; }
      else v.setInt32(o, Math.round(x * 2147483647), true);
      o += bytesPer;
    }
  }
  return buf;
}

const sine = (n: number, rate: number, hz: number, amp = 0.5) => Float32Array.from({ length: n }, (_, i) => amp * Math.sin((2 * Math.PI * hz * i) / rate));

describe("ClapFeatureExtractor parity", async () => {
  const ref = await reference("clap");
  const cfg = audioConfigFrom(await Bun.file(join(fixture("clap"), "preprocessor_config.json")).json());

  test("input_features of the first clip within 1e-4 dB", async () => {
    const c = ref.audio_cases[0];
    const f = await new AudioPreprocessor(cfg).process(await media(c.file));
    expect(f.length).toBe(201 * 64);
    const diff = maxAbsDiff(f, c.input_features);
    console.log(`input_features max abs diff ${c.file}: ${diff.toExponential(2)} dB`);
    expect(diff).toBeLessThan(1e-4);
  });

  test("the audio tower alone on the reference input_features reproduces audio_embeds", async () => {
    const session = await ModelSession.create(join(fixture("clap"), "onnx", "audio_model.onnx"), { device: "cpu", numThreads: 1 });
    const c = ref.audio_cases[0];
    const out = await session.runFeeds({ input_features: { data: Float32Array.from(c.input_features), dims: [1, 1, 201, 64] } }, "audio_embeds");
    const cos = cosine(out.data, c.audio_embeds);
    console.log(`audio tower on reference input_features: cosine ${cos}`);
    expect(cos).toBeGreaterThanOrEqual(0.99999);
    await session.release();
  });

  test("repeatpad tiles floor(max / len) copies, then zeros (also when len divides max)", () => {
    const x = Float32Array.from([1, 2, 3]);
    expect(Array.from(fitLength(x, { ...cfg, maxSamples: 7 }))).toEqual([1, 2, 3, 1, 2, 3, 0]);
    expect(Array.from(fitLength(x, { ...cfg, maxSamples: 6 }))).toEqual([1, 2, 3, 1, 2, 3]);
    expect(Array.from(fitLength(x, { ...cfg, maxSamples: 7, padding: "repeat" }))).toEqual([1, 2, 3, 1, 2, 3, 1]);
    expect(Array.from(fitLength(x, { ...cfg, maxSamples: 5, padding: "pad" }))).toEqual([1, 2, 3, 0, 0]);
  });

  test("rand_trunc is deterministic: the centre crop", async () => {
    const x = Float32Array.from({ length: 10 }, (_, i) => i);
    expect(Array.from(fitLength(x, { ...cfg, maxSamples: 4 }))).toEqual([3, 4, 5, 6]);
    const long = wav([sine(48000 * 3, 48000, 440)], 48000, 16);
    const p = new AudioPreprocessor(cfg);
    expect(maxAbsDiff(await p.process(long), await p.process(long))).toBe(0);
  });
});

describe("WAV decoding", () => {
  const x = sine(480, 48000, 1000);
  for (const [bits, float, tol] of [[8, false, 1 / 64], [16, false, 1e-4], [24, false, 1e-6], [32, false, 1e-8], [32, true, 0]] as const) {
    test(`${float ? "float" : "PCM"} ${bits}-bit`, () => {
      const pcm = decodeWav(wav([x], 48000, bits, float));
      expect(pcm.sampleRate).toBe(48000);
      expect(pcm.frames).toBe(480);
      expect(maxAbsDiff(pcm.data[0]!, x)).toBeLessThanOrEqual(tol + 1e-7);
    });
  }

  test("stereo mixes down to the channel mean", () => {
    const pcm = decodeWav(wav([Float32Array.from([0.5, 0.5]), Float32Array.from([-0.25, 0.25])], 16000, 32, true));
    expect(Array.from(mixDown(pcm))).toEqual([0.125, 0.375]);
  });

  test("resampling keeps a tone's frequency and level", () => {
    const rate = 16000;
    const up = resample(sine(rate, rate, 440), rate, 48000);
    expect(up.length).toBe(48000);
    const ideal = sine(48000, 48000, 440);
    // Away from the edges the band-limited interpolation matches the ideal tone closely.
    expect(maxAbsDiff(up.subarray(2000, 46000), ideal.subarray(2000, 46000))).toBeLessThan(2e-3);
    const down = resample(ideal, 48000, 16000);
    expect(maxAbsDiff(down.subarray(1000, 15000), sine(rate, rate, 440).subarray(1000, 15000))).toBeLessThan(2e-3);
  });

  test("a 16 kHz file embeds close to the same sound at 48 kHz", async () => {
    const cfg = audioConfigFrom(await Bun.file(join(fixture("clap"), "preprocessor_config.json")).json());
    const p = new AudioPreprocessor(cfg);
    const a = await p.process(wav([sine(48000, 48000, 440)], 48000, 16));
    const b = await p.process(wav([sine(16000, 16000, 440)], 16000, 16));
    expect(cosine(a, b)).toBeGreaterThan(0.99);
  });

  const bad: Array<[string, Uint8Array, string]> = [
    ["empty", new Uint8Array(0), "empty"],
    ["Ogg", new TextEncoder().encode("OggS\0\0\0\0\0\0\0\0\0\0"), "Ogg"],
    ["MP3", new Uint8Array([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 0, 0, 0]), "MP3"],
    ["FLAC", new TextEncoder().encode("fLaC\0\0\0\0\0\0\0\0"), "FLAC"],
    ["header only", wav([new Float32Array(0)], 48000, 16), "no samples"],
    ["truncated before data", wav([x], 48000, 16).slice(0, 30), "truncated"],
    ["A-law", (() => { const w = wav([x], 48000, 16); new DataView(w.buffer).setUint16(20, 6, true); return w; })(), "unsupported WAV encoding"],
  ];
  for (const [name, bytes, needle] of bad) {
    test(`${name}: a clear InvalidMedia naming what is supported`, () => {
      let err: unknown;
      try { decodeWav(bytes); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(InvalidMedia);
      expect((err as Error).message).toContain(needle);
    });
  }
});
