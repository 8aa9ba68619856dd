// CLAP log-mel features through transformers.js's ClapFeatureExtractor (its spectrogram and mel filters match the
// Python extractor). Truncation and padding are done by audio.ts first, so the extractor always sees exactly
// max-length audio: its own repeatpad tiles one copy too few when the clip length divides the max length, and its
// rand_trunc crop is random. Only the media workers import this file.
import { ClapFeatureExtractor, env } from "@huggingface/transformers";
import { InvalidMedia } from "../errors";
import { decodeWav, fitLength, mixDown, resample, ZEROS, type AudioConfig } from "./audio";

// Nothing is ever fetched: the extractor is built from the parsed preprocessor_config.json.
env.allowRemoteModels = false;

export class AudioPreprocessor {
  private readonly extractor: ClapFeatureExtractor;
  constructor(readonly cfg: AudioConfig) {
    this.extractor = new ClapFeatureExtractor(cfg.raw);
  }

  /** WAV bytes -> [1, frames, mel bins] float32 features. */
  async process(bytes: Uint8Array): Promise<Float32Array> {
    const pcm = decodeWav(bytes);
    let source = mixDown(pcm);
    // Audio longer than the model takes is cut to its centre before resampling (with the filter's reach on each
    // side), so a long file costs no more than max length; fitLength then takes the exact centre crop.
    const needed = Math.ceil((this.cfg.maxSamples * pcm.sampleRate) / this.cfg.samplingRate) + 2 * (ZEROS * 8 + 2);
    if (source.length > needed) {
      const start = Math.floor((source.length - needed) / 2);
      source = source.subarray(start, start + needed);
    }
    const mono = resample(source, pcm.sampleRate, this.cfg.samplingRate);
    for (let i = 0; i < mono.length; i++) {
      if (!Number.isFinite(mono[i]!)) throw new InvalidMedia("the audio has samples that are not finite numbers (NaN or infinity)");
    }
    const fitted = fitLength(mono, this.cfg);
    const { input_features } = await this.extractor(fitted);
    return input_features.data as Float32Array;
  }
}
