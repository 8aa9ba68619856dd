// Audio preprocessing for CLAP-style audio towers: WAV decoding (PCM 8/16/24/32-bit, float 32/64), mono
// mix-down, resampling to the extractor's rate and CLAP's truncation/padding. The log-mel features come from
// audio-features.ts (transformers.js), which only the media workers import.
import { InvalidMedia } from "../errors";

export const SUPPORTED_AUDIO = "WAV (PCM 8/16/24/32-bit integer, 32/64-bit float; any channel count and sample rate)";

export interface Pcm {
  sampleRate: number;
  channels: number;
  /** Samples per channel. */
  frames: number;
  /** One array per channel, in [-1, 1]. */
  data: Float32Array[];
}

/** The parts of a ClapFeatureExtractor preprocessor_config.json the server reads. */
export interface AudioConfig {
  samplingRate: number;
  maxSamples: number;
  truncation: string;
  padding: string;
  featureSize: number;
  hopLength: number;
  raw: Record<string, unknown>;
}

export function audioConfigFrom(pre: Record<string, unknown>): AudioConfig {
  const samplingRate = Number(pre.sampling_rate ?? 48000);
  const maxSamples = Number(pre.nb_max_samples ?? samplingRate * Number(pre.max_length_s ?? 10));
  const truncation = String(pre.truncation ?? "rand_trunc");
  if (truncation === "fusion") {
    throw new Error('preprocessor_config.json asks for truncation "fusion" (4-channel fused features); only "rand_trunc" is supported');
  }
  const type = String(pre.feature_extractor_type ?? "ClapFeatureExtractor");
  if (type !== "ClapFeatureExtractor") throw new Error(`feature extractor ${type} is not supported; ClapFeatureExtractor is`);
  return {
    samplingRate,
    maxSamples,
    truncation,
    padding: String(pre.padding ?? "repeatpad"),
    featureSize: Number(pre.feature_size ?? 64),
    hopLength: Number(pre.hop_length ?? 480),
    raw: pre,
  };
}

/** [1, frames, mel bins] per clip: CLAP computes frames with centre padding over exactly maxSamples. */
export function featureShape(cfg: AudioConfig): [number, number, number] {
  return [1, Math.floor(cfg.maxSamples / cfg.hopLength) + 1, cfg.featureSize];
}

const ascii = (b: Uint8Array, o: number, n: number) => String.fromCharCode(...b.subarray(o, o + n));

/** Decodes a RIFF/WAVE file. */
export function decodeWav(bytes: Uint8Array): Pcm {
  if (bytes.length === 0) throw new InvalidMedia("the audio is empty (0 bytes)");
  if (bytes.length < 12 || ascii(bytes, 0, 4) !== "RIFF" || ascii(bytes, 8, 4) !== "WAVE") {
    const what = ascii(bytes, 0, 4) === "OggS" ? "Ogg" : ascii(bytes, 0, 4) === "fLaC" ? "FLAC" : ascii(bytes, 0, 3) === "ID3" || (bytes[0] === 0xff && (bytes[1]! & 0xe0) === 0xe0) ? "MP3" : "not WAV";
    throw new InvalidMedia(`unsupported audio container (${what}); supported: ${SUPPORTED_AUDIO}`, null, "unsupported_media_type");
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let fmt: { format: number; channels: number; rate: number; bits: number; align: number } | null = null;
  let data: { offset: number; length: number } | null = null;
  let o = 12;
  while (o + 8 <= bytes.length) {
    const id = ascii(bytes, o, 4);
    const size = view.getUint32(o + 4, true);
    const body = o + 8;
    if (id === "fmt ") {
      if (size < 16 || body + 16 > bytes.length) throw new InvalidMedia("the WAV fmt chunk is truncated");
      let format = view.getUint16(body, true);
      // WAVE_FORMAT_EXTENSIBLE: the real format is the first two bytes of the sub-format GUID.
      if (format === 0xfffe && size >= 40 && body + 26 <= bytes.length) format = view.getUint16(body + 24, true);
      fmt = { format, channels: view.getUint16(body + 2, true), rate: view.getUint32(body + 4, true), bits: view.getUint16(body + 14, true), align: view.getUint16(body + 12, true) };
    } else if (id === "data") {
      // A streaming writer may leave the size at 0 or 0xffffffff: take what is there.
      const length = size === 0 || size === 0xffffffff ? bytes.length - body : Math.min(size, bytes.length - body);
      data = { offset: body, length };
      if (fmt) break;
    }
    o = body + size + (size & 1);
  }
  if (!fmt) throw new InvalidMedia("the WAV file has no fmt chunk (truncated or corrupt)");
  if (!data) throw new InvalidMedia("the WAV file has no data chunk (truncated or corrupt)");
  const { format, channels, rate, bits } = fmt;
  if (channels < 1 || rate < 1) throw new InvalidMedia(`the WAV header is invalid (${channels} channels, ${rate} Hz)`);
  const pcm = format === 1 && [8, 16, 24, 32].includes(bits);
  const float = format === 3 && (bits === 32 || bits === 64);
  if (!pcm && !float) {
    throw new InvalidMedia(`unsupported WAV encoding (format ${format}, ${bits} bits); supported: ${SUPPORTED_AUDIO}`, null, "unsupported_media_type");
  }
  const bytesPer = bits / 8;
  const frameBytes = bytesPer * channels;
  const frames = Math.floor(data.length / frameBytes);
  if (frames === 0) throw new InvalidMedia("the WAV file has no samples");
  const out = Array.from({ length: channels }, () => new Float32Array(frames));
  let p = data.offset;
  for (let f = 0; f < frames; f++) {
    for (let c = 0; c < channels; c++) {
      let v: number;
      if (float) v = bits === 32 ? view.getFloat32(p, true) : view.getFloat64(p, true);
      else if (bits === 8) v = (bytes[p]! - 128) / 128;
      else if (bits === 16) v = view.getInt16(p, true) / 32768;
      else if (bits === 24) v = (((bytes[p + 2]! << 24) | (bytes[p + 1]! << 16) | (bytes[p]! << 8)) >> 8) / 8388608;
      else v = view.getInt32(p, true) / 2147483648;
      out[c]![f] = v;
      p += bytesPer;
    }
  }
  return { sampleRate: rate, channels, frames, data: out };
}

/** Mean of the channels (what librosa and torchaudio do for mono). */
export function mixDown(pcm: Pcm): Float32Array {
  if (pcm.channels === 1) return pcm.data[0]!;
  const out = new Float32Array(pcm.frames);
  for (const ch of pcm.data) for (let i = 0; i < pcm.frames; i++) out[i]! += ch[i]!;
  for (let i = 0; i < pcm.frames; i++) out[i]! /= pcm.channels;
  return out;
}

export const ZEROS = 16;

/**
 * Band-limited resampling: a Hann-windowed sinc, 16 zero crossings each side, cut off at the lower Nyquist
 * frequency (x 0.97 for the transition band).
 */
export function resample(x: Float32Array, from: number, to: number): Float32Array {
  if (from === to) return x;
  const outLength = Math.max(1, Math.round((x.length * to) / from));
  const out = new Float32Array(outLength);
  const ratio = to / from;
  const cutoff = 0.97 * Math.min(1, ratio);
  const half = ZEROS / cutoff;
  for (let n = 0; n < outLength; n++) {
    const t = n / ratio;
    const lo = Math.max(0, Math.ceil(t - half));
    const hi = Math.min(x.length - 1, Math.floor(t + half));
    let acc = 0;
    for (let k = lo; k <= hi; k++) {
      const d = k - t;
      const arg = cutoff * d;
      const s = arg === 0 ? 1 : Math.sin(Math.PI * arg) / (Math.PI * arg);
      const w = 0.5 + 0.5 * Math.cos((Math.PI * d) / half);
      acc += x[k]! * cutoff * s * w;
    }
    out[n] = acc;
  }
  return out;
}

/**
 * CLAP's fit to exactly maxSamples. Longer audio: "rand_trunc" takes a random crop in transformers; here the
 * crop is deterministic, the centre one (offset floor(overflow / 2)), so the same input always gives the same
 * embedding. Shorter audio: "repeatpad" tiles floor(max / len) copies then pads with zeros, "repeat" tiles
 * and cuts, anything else pads with zeros.
 */
export function fitLength(x: Float32Array, cfg: AudioConfig): Float64Array {
  const max = cfg.maxSamples;
  const out = new Float64Array(max);
  if (x.length >= max) {
    const start = Math.floor((x.length - max) / 2);
    for (let i = 0; i < max; i++) out[i] = x[start + i]!;
    return out;
  }
  const copies = cfg.padding === "repeatpad" ? Math.floor(max / x.length) : cfg.padding === "repeat" ? Math.ceil(max / x.length) : 1;
  for (let c = 0; c < copies; c++) {
    const at = c * x.length;
    const n = Math.min(x.length, max - at);
    for (let i = 0; i < n; i++) out[at + i] = x[i]!;
  }
  return out;
}
