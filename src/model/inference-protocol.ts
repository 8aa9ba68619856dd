// Messages between ModelSession (main thread) and its inference worker (inference-worker.ts).
import type { LogLevel } from "../config";
import type { Feed, InputSpec, OutputTensor, SessionHead, SessionSettings } from "./session-types";

/**
 * Test-only fault injection: what the worker does instead of the run (or session creation) it was sent. `exit` ends the worker
 * (process.exit), `throw` raises an uncaught error (the worker dies), `hang` blocks the worker's thread the way a
 * stuck native run would.
 */
export type InjectedFault = "exit" | "throw" | "hang";

export type InferenceRequest =
  | { id: number; type: "create"; path: string | Uint8Array; settings: SessionSettings; head?: SessionHead; fault?: InjectedFault; log?: { level: LogLevel; format: "text" | "json" } }
  | { id: number; type: "run"; feeds: Record<string, Feed>; outputNames: string[]; fault?: InjectedFault }
  | { id: number; type: "release" };

export interface CreatedSession {
  provider: string;
  fallbackReason: string | null;
  inputs: InputSpec[];
  outputNames: string[];
}

export type InferenceReply =
  | { id: number; ok: true; created?: CreatedSession; outputs?: OutputTensor[]; runMs?: number }
  | { id: number; ok: false; error: string; loadError: boolean };
