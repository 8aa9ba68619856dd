// Messages between ModelSession (main thread) and its inference worker (session-worker.ts).
import type { Feed, OutputTensor, SessionSettings } from "./onnx";

export type SessionRequest =
  | { id: number; type: "create"; path: string; settings: SessionSettings }
  | { id: number; type: "run"; feeds: Record<string, Feed>; outputName: string }
  | { id: number; type: "release" };

export interface CreatedSession {
  provider: string;
  fallbackReason: string | null;
  inputNames: string[];
  outputNames: string[];
}

export type SessionReply =
  | { id: number; ok: true; created?: CreatedSession; output?: OutputTensor }
  | { id: number; ok: false; error: string; loadError: boolean };
