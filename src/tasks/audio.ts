// Audio embeddings (CLAP audio towers). Preparing inputs: media/audio.ts in the media workers turns a WAV file
// into log-mel input_features [1, frames, mel bins]; reading outputs: the tower's projected audio_embeds.
import type { MediaLayout } from "../model/media-layout";
import { audioConfigFrom, featureShape } from "../media/audio";
import { projectionReader } from "./embed";

export const AUDIO_INPUT = "input_features";
export const audioReader = projectionReader("audio_embeds");

/** The per-input tensor shape the audio tower takes, from preprocessor_config.json. */
export function audioInputShape(media: MediaLayout): number[] {
  return featureShape(audioConfigFrom(media.preprocessor));
}
