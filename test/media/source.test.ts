import { describe, expect, test } from "bun:test";
import { InvalidMedia } from "../../src/errors";
import { contentTypeAccepted, decodeDataUri, mediaBytes } from "../../src/media/source";

const settings = { maxBytes: 1000, allowUrls: false, timeoutMs: 1000, publicOnly: false };

describe("data: URIs", () => {
  test("base64 and base64url decode to the bytes", () => {
    const bytes = new Uint8Array([0, 1, 2, 250, 251, 252, 253, 254, 255]);
    const b64 = Buffer.from(bytes).toString("base64");
    expect(Array.from(decodeDataUri(`data:image/png;base64,${b64}`, "image", 1000, "x"))).toEqual(Array.from(bytes));
    const url = Buffer.from(bytes).toString("base64url");
    expect(Array.from(decodeDataUri(`data:image/png;base64,${url}`, "image", 1000, "x"))).toEqual(Array.from(bytes));
    expect(Array.from(decodeDataUri(`data:;base64,${b64}`, "image", 1000, "x"))).toEqual(Array.from(bytes));
  });

  const bad: Array<[string, string, string]> = [
    ["data:image/png;base64,@@@@", "invalid", "invalid_media"],
    ["data:image/png;base64,abcde", "invalid", "invalid_media"],
    ["data:image/png,rawbytes", "must be base64", "invalid_media"],
    ["data:image/png;base64", "no comma", "invalid_media"],
    ["data:text/plain;base64,aGVsbG8=", "text/plain", "unsupported_media_type"],
    [`data:image/png;base64,${"A".repeat(2000)}`, "--max-media-bytes", "media_too_large"],
  ];
  for (const [uri, needle, code] of bad) {
    test(`${uri.slice(0, 40)} -> ${code}`, () => {
      let err: unknown;
      try { decodeDataUri(uri, "image", 1000, "x"); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(InvalidMedia);
      expect((err as InvalidMedia).message).toContain(needle);
      expect((err as InvalidMedia).code).toBe(code);
    });
  }
});

test("content types per modality", () => {
  expect(contentTypeAccepted("image/png", "image")).toBe(true);
  expect(contentTypeAccepted("image/jpeg; charset=binary", "image")).toBe(true);
  expect(contentTypeAccepted("application/octet-stream", "audio")).toBe(true);
  expect(contentTypeAccepted(null, "audio")).toBe(true);
  expect(contentTypeAccepted("audio/wav", "image")).toBe(false);
  expect(contentTypeAccepted("text/html", "image")).toBe(false);
});

test("inputs that are neither data: URIs nor URLs, and URLs when fetching is off", async () => {
  await expect(mediaBytes("/etc/passwd", "image", settings, "x")).rejects.toThrow("data: URIs");
  await expect(mediaBytes("file:///etc/passwd", "image", settings, "x")).rejects.toThrow("data: URIs");
  await expect(mediaBytes("http://127.0.0.1/x.png", "image", settings, "x")).rejects.toThrow("--no-allow-media-urls");
  const on = { ...settings, allowUrls: true };
  // Refused before any connection: the address check runs first.
  await expect(mediaBytes("http://169.254.169.254/latest/meta-data", "image", on, "x")).rejects.toThrow("metadata");
  await expect(mediaBytes("http://[fd00:ec2::254]/latest", "image", on, "x")).rejects.toThrow("metadata");
  await expect(mediaBytes("http://metadata.google.internal/computeMetadata/v1", "image", on, "x")).rejects.toThrow("metadata host");
  await expect(mediaBytes("http://user:pw@127.0.0.1/x", "image", on, "x")).rejects.toThrow("credentials");
});
