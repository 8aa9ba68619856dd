import { describe, expect, test } from "bun:test";
import { mediaModalityOf } from "../../src/model/media-layout";
import { readLayout } from "../../src/model/layout";
import { fixture } from "../helpers";
import { listFolder } from "../../src/model/resolve";

describe("multimodal towers", () => {
  test("config.json decides the modality; fixtures read as multimodal layouts", () => {
    expect(mediaModalityOf({ vision_config: {} })).toBe("image");
    expect(mediaModalityOf({ audio_config: {} })).toBe("audio");
    expect(mediaModalityOf({ hidden_size: 32 })).toBeNull();
    const dir = fixture("clip");
    const clip = readLayout(dir, listFolder(dir), "auto", "auto");
    expect(clip.modalities).toEqual(["text", "image"]);
    expect(clip.media).toMatchObject({ modality: "image", textFile: "onnx/text_model.onnx", mediaFile: "onnx/vision_model.onnx", combined: false, imageSize: 32 });
    expect(clip.hiddenSize).toBe(16);
    expect(clip.maxLength).toBe(77);
    const clapDir = fixture("clap");
    const clap = readLayout(clapDir, listFolder(clapDir), "auto", "auto");
    expect(clap.modalities).toEqual(["text", "audio"]);
    expect(clap.media?.mediaFile).toBe("onnx/audio_model.onnx");
    expect(readLayout(fixture("bert-mean-norm"), listFolder(fixture("bert-mean-norm")), "auto", "auto").modalities).toEqual(["text"]);
  });
});
