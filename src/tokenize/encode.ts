// Truncation and special tokens, in one place. The Rust `tokenizers` library (its official Node-API binding, the
// same code the Python `tokenizers` and transformers' fast tokenizers run) encodes text; the post-processor's
// template (which special tokens go where, and their type ids) is read off it once by probing, so truncation keeps
// the special tokens exactly as the Rust library does (`truncation=True`, longest-first for pairs). A text far longer
// than the model takes is tokenized up to a cut (cut.ts); every other text whole.
// The binding encodes on its own thread pool and answers with a promise, so every encoding here is asynchronous.
import { Tokenizer, type Encoding } from "tokenizers";
import { codePointsBefore, cutAtOrAfter, cutAtOrBefore, cutPolicy, type CutPolicy } from "./cut";

export interface Encoded {
  ids: Int32Array;
  /** token_type_ids; null when every id is 0 (single sequences of most models). */
  typeIds: Int32Array | null;
  /**
   * Set when the input was cut to fit: the tokens it had, special tokens included; exact unless fullLengthAtLeast (a
   * long text is tokenized only as far as needed, so it may have more).
   */
  fullLength?: number;
  /** fullLength is a lower bound: the input was cut before it was tokenized to its end. */
  fullLengthAtLeast?: true;
  /** The task adapter this input runs with (Jina v3 task_id); inputs of different tasks never share a batch. */
  taskId?: number;
}

/** Which end of a too-long text is cut: "right" keeps its beginning (the default), "left" keeps its end. */
export type TruncationDirection = "right" | "left";

export interface EncodeOptions {
  /** Single texts only: pairs are cut longest-first. */
  direction?: TruncationDirection;
}

/** Whether an encoding was cut to fit the model. */
export function wasTruncated(e: Encoded): boolean {
  return e.fullLength !== undefined && e.fullLength > e.ids.length;
}

/**
 * How many tokens an input had, for messages: "N", or "at least N" when fullLength is a lower bound; `less`
 * (special tokens a message leaves out) is subtracted.
 */
export function fullLengthText(e: Encoded, less = 0): string {
  const n = (e.fullLength ?? e.ids.length) - less;
  return e.fullLengthAtLeast ? `at least ${n}` : `${n}`;
}

/** One token as TEI's /tokenize reports it. */
export interface TokenInfo {
  id: number;
  text: string;
  special: boolean;
  /** UTF-8 byte offsets into the input; null for special tokens. */
  start: number | null;
  stop: number | null;
}

interface Template {
  /** Single sequence: prefix ids, suffix ids. */
  single: { prefix: number[]; suffix: number[] };
  /** Pair: prefix, middle, suffix ids, and the type ids of each part and of each sequence. */
  pair: {
    prefix: number[];
    middle: number[];
    suffix: number[];
    prefixTypes: number[];
    middleTypes: number[];
    suffixTypes: number[];
    firstType: number;
    secondType: number;
  };
}

function indexOfRun(haystack: readonly number[], needle: readonly number[], from = 0): number {
  outer: for (let i = from; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/**
 * Longest-first truncation of a pair to `budget` content tokens, the rule of the Rust tokenizers library
 * (utils/truncation.rs): the shorter sequence keeps its length when it can; otherwise both get half the budget, the
 * odd token going to the longer one. Returns the kept lengths of the first and second sequence.
 */
export function longestFirst(n1: number, n2: number, budget: number): [number, number] {
  if (n1 + n2 <= budget) return [n1, n2];
  const swap = n1 > n2;
  let short = swap ? n2 : n1;
  let long = swap ? n1 : n2;
  long = short > budget ? short : Math.max(short, budget - short);
  if (short + long > budget) {
    short = Math.floor(budget / 2);
    long = short + (budget % 2);
  }
  return swap ? [long, short] : [short, long];
}

/**
 * Texts at most this long are encoded whole: below it cutting saves little. Above it, the first cut is looked for
 * CHARS_PER_TOKEN characters per needed token in (at least WHOLE_CHARS), then GROWTH times further each time the
 * part was not enough, while that stays within half the text (past it, the whole text costs little more; the parts
 * tried before it cost at most a third of the whole, and only where a part too short had spaces).
 */
const WHOLE_CHARS = 16384;
const CHARS_PER_TOKEN = 8;
const GROWTH = 4;

const CONTENT_ONLY = { addSpecialTokens: false } as const;

export class Encoder {
  private constructor(
    private readonly tokenizer: Tokenizer,
    private readonly template: Template,
    private readonly cuts: CutPolicy | null,
    /** Ids below this are valid token ids (added tokens included). */
    readonly vocabSize: number,
    /** Longest sequence, special tokens included. */
    readonly maxLength: number,
  ) {}

  /**
   * Token ids come from tokenizer.json alone, as with the Rust library everywhere; `tokenizerConfig` is accepted for
   * what transformers reads from it around the tokenizer (padding side, model_max_length are read by the layout).
   */
  static async create(tokenizerJson: unknown, tokenizerConfig: Record<string, unknown>, maxLength: number): Promise<Encoder> {
    void tokenizerConfig;
    const tokenizer = Tokenizer.fromString(JSON.stringify(tokenizerJson));
    // tokenizer.json may carry its own truncation and padding sections (paraphrase-multilingual's: truncate to 128,
    // pad to the batch's longest), which the binding would apply to every encoding: this file decides both.
    tokenizer.disableTruncation();
    tokenizer.disablePadding();
    const template = await probeTemplate(tokenizer);
    const specials = template.pair.prefix.length + template.pair.middle.length + template.pair.suffix.length;
    if (maxLength <= specials) throw new Error(`max length ${maxLength} leaves no room for content tokens`);
    return new Encoder(tokenizer, template, cutPolicy(tokenizerJson, tokenizer), maxTokenId(tokenizerJson) + 1, maxLength);
  }

  /** How many special tokens the tokenizer puts before and after a single sequence ([CLS] / [SEP]). */
  get singleSpecials(): { before: number; after: number } {
    return { before: this.template.single.prefix.length, after: this.template.single.suffix.length };
  }

  /** Token id of a token string (for pad ids). */
  tokenId(token: string): number | undefined {
    return this.tokenizer.tokenToId(token) ?? undefined;
  }

  /** Token string of an id (an image token named by id in config.json). */
  tokenOf(id: number): string | undefined {
    return this.tokenizer.idToToken(id) ?? undefined;
  }

  /** Number of content tokens of a text, without special tokens or truncation (prompt lengths). */
  async countContent(text: string): Promise<number> {
    return (await this.serial(() => this.tokenizer.encode(text, null, CONTENT_ONLY))).getLength();
  }

  /**
   * Content ids of texts: all of them, or, for a long text, at least the first (or last) `need` and the rest of the
   * word the need-th ends in, from a part cut at whitespace (cut.ts). Short texts go to the binding in one batch.
   */
  private async contents(texts: readonly string[], need: number, words: boolean, direction: TruncationDirection = "right"): Promise<Content[]> {
    const out: Content[] = new Array(texts.length);
    const whole: string[] = [];
    const wholeAt: number[] = [];
    const cut: Promise<void>[] = [];
    for (let i = 0; i < texts.length; i++) {
      const text = texts[i]!;
      if (text.length > WHOLE_CHARS) {
        cut.push(this.longContent(text, need, words, direction).then((c) => void (out[i] = c)));
      } else {
        whole.push(text);
        wholeAt.push(i);
      }
    }
    if (whole.length > 0) {
      const encodings = await this.serial(() => this.tokenizer.encodeBatch(whole, CONTENT_ONLY));
      for (let j = 0; j < encodings.length; j++) out[wholeAt[j]!] = content(encodings[j]!, words, false);
    }
    await Promise.all(cut);
    return out;
  }

  /**
   * A long text's first (right) or last (left) tokens from the part before or after a cut, where the kept tokens and
   * the rest of the word they end in lie at least the policy's margin from the cut; else from a part GROWTH times
   * longer, and in the end the whole text.
   */
  private async longContent(text: string, need: number, words: boolean, direction: TruncationDirection): Promise<Content> {
    const cuts = this.cuts;
    const first = Math.max(WHOLE_CHARS, need * CHARS_PER_TOKEN);
    for (let from = first; cuts && from < text.length && (from === first || from <= text.length / 2); from *= GROWTH) {
      if (direction === "right") {
        const at = cutAtOrAfter(text, from, cuts);
        if (at < 0) break;
        const encoding = await this.serial(() => this.tokenizer.encode(text.slice(0, at), null, CONTENT_ONLY));
        if (prefixHolds(encoding, need, codePointsBefore(text, at) - cuts.margin)) return content(encoding, words, true);
        from = Math.max(from, at);
      } else {
        const at = cutAtOrBefore(text, text.length - from, cuts);
        if (at <= 0) break;
        const encoding = await this.serial(() => this.tokenizer.encode(text.slice(at), null, CONTENT_ONLY));
        if (suffixHolds(encoding, need, cuts.margin)) return content(encoding, words, true);
        from = Math.max(from, text.length - at);
      }
    }
    if (words) return content(await this.serial(() => this.tokenizer.encode(text, null, CONTENT_ONLY)), true, false);
    // A single text whole: the library's own truncation to `need` tokens. It keeps only those, which costs about half
    // of what holding all of a long text's tokens does (623,653 tokens: 0.9 vs 1.9 s); the count is then a lower bound.
    return this.serial(async () => {
      this.tokenizer.setTruncation(need, { direction: direction as never });
      try {
        return content(await this.tokenizer.encode(text, null, CONTENT_ONLY), false, true);
      } finally {
        this.tokenizer.disableTruncation();
      }
    });
  }

  /**
   * Calls into the tokenizer one at a time, in order: the binding reads its truncation setting when a call runs, and
   * a single text tokenized whole sets it for its own call only (encodeBatch runs its texts in parallel already).
   */
  private serial<T>(call: () => Promise<T>): Promise<T> {
    const next = this.queue.then(call, call);
    this.queue = next.catch(() => undefined);
    return next;
  }
  private queue: Promise<unknown> = Promise.resolve();

  /** One sequence, truncated to maxLength with its special tokens kept. */
  async encode(text: string, options: EncodeOptions = {}): Promise<Encoded> {
    return (await this.encodeBatch([text], undefined, options))[0]!;
  }

  /** A (query, document) pair, truncated longest-first to maxLength. */
  async encodePair(first: string, second: string): Promise<Encoded> {
    return (await this.encodeBatch([second], [first]))[0]!;
  }

  /** Texts, or pairs (firsts[i] with texts[i]), each truncated as encode / encodePair do; results in input order. */
  async encodeBatch(texts: readonly string[], firsts?: readonly string[], options: EncodeOptions = {}): Promise<Encoded[]> {
    const direction = options.direction ?? "right";
    if (!firsts) {
      const { prefix, suffix } = this.template.single;
      // One token past the room tells a text that fits from one that was cut.
      const contents = await this.contents(texts, this.maxLength - prefix.length - suffix.length + 1, false, direction);
      return contents.map((c) => this.single(c, direction));
    }
    if (firsts.length !== texts.length) throw new Error(`a pair batch needs one first text per text: ${firsts.length} firsts, ${texts.length} texts`);
    const t = this.template.pair;
    const budget = this.maxLength - t.prefix.length - t.middle.length - t.suffix.length;
    // Which side gets the odd token of a halved budget depends on the lengths the library compares, which are not
    // the full lengths: each sequence counts up to the end of the word (pre-token) in which its count reaches the
    // whole max length (measured with 0.23: all 60 fuzzed pairs per tokenizer agree, where full lengths agreed on
    // 38-46), except around added tokens at that point (1-2 of 60 on 5 of 20 tokenizers). Counting that far is enough.
    const both = await this.contents([...firsts, ...texts], this.maxLength, true);
    const n = texts.length;
    const out: Encoded[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const a = both[i]!;
      const b = both[n + i]!;
      out[i] = this.pair(a, b, longestFirst(countedLength(a, this.maxLength), countedLength(b, this.maxLength), budget));
    }
    return out;
  }

  private single(c: Content, direction: TruncationDirection): Encoded {
    const body = c.ids;
    const { prefix, suffix } = this.template.single;
    const keep = Math.min(body.length, this.maxLength - prefix.length - suffix.length);
    const ids = new Int32Array(prefix.length + keep + suffix.length);
    ids.set(prefix, 0);
    ids.set(direction === "left" ? body.subarray(body.length - keep) : body.subarray(0, keep), prefix.length);
    ids.set(suffix, prefix.length + keep);
    const full = prefix.length + body.length + suffix.length;
    if (full <= ids.length) return { ids, typeIds: null };
    return c.cut ? { ids, typeIds: null, fullLength: full, fullLengthAtLeast: true } : { ids, typeIds: null, fullLength: full };
  }

  /** A pair with its members' kept lengths. */
  private pair(first: Content, second: Content, [na, nb]: [number, number]): Encoded {
    const t = this.template.pair;
    const a = first.ids;
    const b = second.ids;
    const total = t.prefix.length + na + t.middle.length + nb + t.suffix.length;
    const ids = new Int32Array(total);
    const typeIds = new Int32Array(total);
    let o = 0;
    const put = (src: ArrayLike<number>, count: number, types: readonly number[] | number) => {
      for (let i = 0; i < count; i++, o++) {
        ids[o] = src[i]!;
        typeIds[o] = typeof types === "number" ? types : types[i]!;
      }
    };
    put(t.prefix, t.prefix.length, t.prefixTypes);
    put(a, na, t.firstType);
    put(t.middle, t.middle.length, t.middleTypes);
    put(b, nb, t.secondType);
    put(t.suffix, t.suffix.length, t.suffixTypes);
    const full = t.prefix.length + a.length + t.middle.length + b.length + t.suffix.length;
    if (full <= total) return { ids, typeIds };
    return first.cut || second.cut ? { ids, typeIds, fullLength: full, fullLengthAtLeast: true } : { ids, typeIds, fullLength: full };
  }

  /**
   * Every token of a text (not truncated) with its string, whether the post-processor added it, and its UTF-8 byte
   * offsets in the text (null for special tokens), as TEI's /tokenize reports them.
   */
  async tokens(text: string, addSpecialTokens: boolean): Promise<TokenInfo[]> {
    const enc = await this.serial(() => this.tokenizer.encode(text, null, { addSpecialTokens }));
    const ids = enc.getIds();
    const tokens = enc.getTokens();
    const offsets = enc.getOffsets();
    const special = enc.getSpecialTokensMask();
    // The binding reports offsets in characters (code points); TEI reports bytes of the UTF-8 input.
    const cps = [...text];
    const byteAt = new Int32Array(cps.length + 1);
    for (let i = 0; i < cps.length; i++) byteAt[i + 1] = byteAt[i]! + Buffer.byteLength(cps[i]!);
    const bytes = Buffer.from(text, "utf8");
    return ids.map((id, i) => {
      if (special[i] === 1) return { id, text: tokens[i]!, special: true, start: null, stop: null };
      const [a, b] = offsets[i]!;
      const start = byteAt[Math.min(a!, cps.length)]!;
      const stop = byteAt[Math.min(b!, cps.length)]!;
      return { id, text: bytes.subarray(start, stop).toString("utf8"), special: false, start, stop };
    });
  }

  /** Text of token ids (checked against the vocabulary by the caller). */
  decode(ids: readonly number[], skipSpecialTokens: boolean): Promise<string> {
    return this.tokenizer.decode([...ids], skipSpecialTokens);
  }
}

type WordIds = Array<number | null | undefined>;

/** Content ids of a text, for pairs the word (pre-token) each came from, and whether it is a cut part of the text. */
interface Content {
  ids: Int32Array;
  words: WordIds | null;
  cut: boolean;
}

function content(encoding: Encoding, words: boolean, cut: boolean): Content {
  return { ids: Int32Array.from(encoding.getIds()), words: words ? encoding.getWordIds() : null, cut };
}

const sameWord = (words: WordIds, i: number, j: number): boolean => words[i] != null && words[i] === words[j];

/**
 * A prefix holds a text's first `need` tokens when it has more, and the word the need-th ends in ends at or before
 * code point `limit` (the margin before the cut; the prefix's last word ends at the cut, so it is never that one).
 */
function prefixHolds(encoding: Encoding, need: number, limit: number): boolean {
  const n = encoding.getLength();
  if (n <= need) return false;
  const words = encoding.getWordIds();
  let k = need - 1;
  while (k + 1 < n && sameWord(words, k, k + 1)) k++;
  return encoding.getOffsets()[k]![1]! <= limit;
}

/** The mirror of prefixHolds for a suffix: its last `need` tokens' first word starts at or after code point `margin`. */
function suffixHolds(encoding: Encoding, need: number, margin: number): boolean {
  const n = encoding.getLength();
  if (n <= need) return false;
  const words = encoding.getWordIds();
  let k = n - need;
  while (k > 0 && sameWord(words, k, k - 1)) k--;
  return encoding.getOffsets()[k]![0]! >= margin;
}

/** The length the Rust library compares for longest-first: tokens up to the end of the word holding the max-th. */
function countedLength(c: Content, max: number): number {
  const n = c.ids.length;
  if (n <= max || !c.words) return Math.min(n, max);
  let k = max - 1;
  while (k + 1 < n && sameWord(c.words, k, k + 1)) k++;
  return k + 1;
}

/** Largest id of the model's vocabulary and the added tokens (read off the JSON: the binding's getVocab is slow). */
function maxTokenId(tokenizerJson: unknown): number {
  const tj = tokenizerJson as { model?: { vocab?: unknown }; added_tokens?: Array<{ id?: unknown }> };
  const vocab = tj.model?.vocab;
  // Unigram: a list of [piece, score], ids by position; WordPiece, BPE, WordLevel: token -> id.
  let max = Array.isArray(vocab) ? vocab.length - 1 : -1;
  if (!Array.isArray(vocab) && vocab && typeof vocab === "object") {
    for (const id of Object.values(vocab)) if (typeof id === "number" && id > max) max = id;
  }
  for (const t of tj.added_tokens ?? []) if (typeof t.id === "number" && t.id > max) max = t.id;
  return max;
}

/** Reads the post-processor's template off probe encodings of "a" and "b". */
async function probeTemplate(tokenizer: Tokenizer): Promise<Template> {
  const [aEnc, bEnc, singleEnc, pairEnc] = await Promise.all([
    tokenizer.encode("a", null, CONTENT_ONLY),
    tokenizer.encode("b", null, CONTENT_ONLY),
    tokenizer.encode("a", null, { addSpecialTokens: true }),
    tokenizer.encode("a", "b", { addSpecialTokens: true }),
  ]);
  const a = aEnc.getIds();
  const b = bEnc.getIds();
  const single = singleEnc.getIds();
  const at = indexOfRun(single, a);
  if (at < 0) throw new Error("tokenizer post-processor changes the content tokens; unsupported");
  const ids = pairEnc.getIds();
  const types = pairEnc.getTypeIds();
  const pa = indexOfRun(ids, a);
  const pb = indexOfRun(ids, b, pa + a.length);
  if (pa < 0 || pb < 0) throw new Error("tokenizer pair template could not be read");
  return {
    single: { prefix: single.slice(0, at), suffix: single.slice(at + a.length) },
    pair: {
      prefix: ids.slice(0, pa),
      middle: ids.slice(pa + a.length, pb),
      suffix: ids.slice(pb + b.length),
      prefixTypes: types.slice(0, pa),
      middleTypes: types.slice(pa + a.length, pb),
      suffixTypes: types.slice(pb + b.length),
      firstType: types[pa] ?? 0,
      secondType: types[pb] ?? 0,
    },
  };
}

/** The pad id: tokenizer.json's padding section, else the configured pad token, else config.json, else 0. */
export function padTokenId(tokenizerJson: unknown, tokenizerConfig: Record<string, unknown>, configJson: Record<string, unknown>, encoder: Encoder): number {
  const padding = (tokenizerJson as { padding?: { pad_id?: number } } | null)?.padding;
  if (padding && typeof padding.pad_id === "number") return padding.pad_id;
  const padToken = tokenizerConfig.pad_token;
  if (typeof padToken === "string") {
    const id = encoder.tokenId(padToken);
    if (id !== undefined) return id;
  }
  const fromConfig = Number(configJson.pad_token_id);
  return Number.isInteger(fromConfig) && fromConfig >= 0 ? fromConfig : 0;
}
