// What a model family (or task kind) gives the load: engine/load-model.ts does what every model needs (tokenizer,
// graph rewrites, session, token budget) and asks the family that serves the layout for the rest, at two points:
// before the session exists (prepare: a worker head, a prompt around the text, a graph of its own) and after
// (build: its engines and its own parts); warm-up (engine/warm-up.ts) asks it how its model is warmed. Adding a
// family is a new file here and a line in index.ts.
import type { ModelConfig } from "../../config";
import type { Metrics } from "../../metrics";
import type { MediaPool } from "../../media/pool";
import type { ModelLayout } from "../../model/layout";
import type { Removable } from "../../model/scratch";
import type { ModelSession, SessionHead, WorkerOptions } from "../../model/session";
import type { SplitTowers } from "../../model/split";
import type { TaskReader } from "../../tasks/task";
import type { Encoder } from "../../tokenize/encode";
import type { Engine, EngineLimits } from "../engine";
import type { ServedBase, ServedModel } from "../served";

/** What a family settles before its model's session exists. */
export interface FamilyPlan {
  /** A graph the inference worker runs on the model's output (ColBERT's Dense projection, bge-m3's pickled heads). */
  head?: SessionHead;
  /** Tokens the text of an input is cut to, when less than the tokenizer's length (an LLM reranker's prompt takes the rest). */
  textLength?: number;
  /** The graph input, besides the text inputs, that the family feeds (pixel_values, input_features). */
  mediaInput?: string;
  /** A combined multimodal export split into one graph per tower: the text session reads its text graph. */
  split?: SplitTowers | null;
  /**
   * The graph the session reads in place of `path` (the export, or its per-input quantization rewrite), or null to
   * read `path`; removed when the model is released.
   */
  rewrite?(path: string): (Removable & { path: string }) | null;
}

/** What prepare may use: the model's settings and its tokenizer at the tokenize length. */
export interface FamilySetup {
  config: ModelConfig;
  layout: ModelLayout;
  /** The served name: the engines', logs' and tokenizer pool's key. */
  key: string;
  encoder: Encoder;
}

/** What build gets: the model's session and the parts every family shares. */
export interface FamilyLoad<P extends FamilyPlan = FamilyPlan> extends FamilySetup {
  plan: P;
  session: ModelSession;
  padId: number;
  /** The served model's common fields; memoryBytes and sessionBytes are set by the family once it has measured. */
  base: ServedBase;
  limits: EngineLimits;
  metrics: Metrics | null;
  mediaPool: MediaPool | null;
  mediaLimits: { maxImagePixels: number };
  /** One runner per session instance (the session picks a free instance). */
  each<X>(runner: X): X[];
  /** An engine over the session reading one output with `reader`, batched as the layout pads text. */
  engine<R>(reader: TaskReader<R>): Engine<R>;
  /** Resident bytes the model took since its load began (at least its weights). */
  sessionBytes(): number;
  /** A further session of the model (a media tower's), released with the model or when the load fails. */
  openSession(path: string, settings: { externalDataDir?: string }, label: string): Promise<ModelSession>;
  /** How the main thread watches a session's worker, for a session labelled `label`. */
  worker(label: string): WorkerOptions;
}

/**
 * How warm-up (engine/warm-up.ts) warms a family's models, M being the model its build returns; each part absent:
 * as a plain text model (texts about the max length, tokenized alone, every calibration).
 */
export interface FamilyWarmUp<M extends ServedModel = ServedModel> {
  /** Warm-up texts stay short: the text engine takes queries, refused rather than cut when long (ColPali). */
  shortTexts?: boolean;
  /** Warm-up texts as the text engine queues them (a pair, a prompt around the text, output flags). */
  inputs?(m: M, texts: string[]): Promise<Array<{ ids: ArrayLike<number> }>>;
  /** After the text engine is warm: one run of the model's other engine (a media tower, ColPali's images). */
  others?(m: M): Promise<void>;
  /** Why the batch token budget of the family's models is not timed. */
  untimedBudget?: string;
  /** Why session instances are not calibrated for the family's models (their engines do not all run on one session). */
  oneSession?: string;
}

export interface Family<P extends FamilyPlan = FamilyPlan, M extends ServedModel = ServedModel> {
  /** For errors and logs. */
  readonly name: string;
  /** Whether this family serves the layout; index.ts tries the families in order and the first one serves it. */
  serves(layout: ModelLayout): boolean;
  /** Tokens a text is cut to when it is tokenized; default the layout's max length. */
  tokenizeLength?(layout: ModelLayout): number;
  prepare?(setup: FamilySetup): Promise<P>;
  build(load: FamilyLoad<P>): Promise<ServedModel>;
  warmUp?: FamilyWarmUp<M>;
}
