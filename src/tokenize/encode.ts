// Truncation and special tokens, in one place. The Rust `tokenizers` library (its official Node-API binding, the
// same code the Python `tokenizers` and transformers' fast tokenizers run) encodes text; the post-processor's
// template (which special tokens go where, and their type ids) is read off it once by probing, so truncation keeps
// the special tokens exactly as the Rust library does (`truncation=True`, longest-first for pairs).
// The binding encodes on its own thread pool and answers with a promise, so every encoding here is asynchronous.
import { Tokenizer, nfcNormalizer, nfdNormalizer, nfkcNormalizer, type Encoding, type Normalizer, type PreTokenizer } from "tokenizers";
import { TOKEN_SEPARATOR, bertWordChar, cutAtOrAfter, forcedByteEnd, cutAtOrBefore, cutPolicy, longestRunFrom, prefixModelJson, shortenAsciiRuns, shortenDroppedRuns, droppedKind, type Dropped, shortenSpaceRuns, shortenWordRuns, spaceChar, spaceRunWindow, unknownCut, unknownTail, normalFormUnknownTail, normalFormBoundary, normalFormStarter, tailChar, type TailChar, charKind, type CharKind, windowRunChars, wordPrefixWindow, wordSymbol, ownWindowChar, segmentWindowChar, classOf, type PrefixWindow, type UnitReader, type WindowUnit, type CutPolicy, type InWordPolicy, whitespaceRules, type WhitespaceRules } from "./prefix";
import { unigramFirstTokens, unigramWordPath, type WordPath } from "./unigram";
import { clusterBoundary, isWhitespace, precompiledWord, spaceSuffixStart } from "./clusters";

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
 * after max(this, needed tokens x FIRST_CUT_CHARS_PER_TOKEN) characters, then 4x further each time too few tokens came.
 */
const WHOLE_CHARS = 16384;
/** Distinct segments one long word may send to the library's normaliser (encode.ts segmentSymbols) before the replica gives up on it. */
const SEGMENTS_PER_WORD = 32768;
/** A segment holds more than twice this many of one mark after its first character before it is read mark by mark (unigramWord). */
const REPEATED_MARKS = 8;
/** The most code points of one normalisation segment that segmentUnit reads as a window unit. */
const SEGMENT_UNIT_POINTS = 32;
/** Runs of more marks than a segment unit holds (SEGMENT_UNIT_POINTS), which normalizeLongSegments replaces by their NFC. */
const LONG_MARK_RUN = /\p{M}{33,}/gu;
const FIRST_CUT_CHARS_PER_TOKEN = 8;

const CONTENT_ONLY = { addSpecialTokens: false } as const;
const NO_WHITESPACE_RULES: WhitespaceRules = { runs: null, after: null, before: null, vanish: null, leads: null };
const CHAR_KINDS: readonly CharKind[] = ["none", "known", "unknown"];

export class Encoder {
  private constructor(
    private readonly tokenizer: Tokenizer,
    private readonly template: Template,
    private readonly cuts: CutPolicy | null,
    /** Ids below this are valid token ids (added tokens included). */
    readonly vocabSize: number,
    /** Longest sequence, special tokens included. */
    readonly maxLength: number,
    /** Tokenizes prefixes that end inside a word (the model without its end-of-word suffix where it has one). */
    private readonly prefixTokenizer: Tokenizer,
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
    const cuts = cutPolicy(tokenizerJson);
    let prefixTokenizer = tokenizer;
    if (cuts?.inWord?.endOfWordSuffix) {
      prefixTokenizer = Tokenizer.fromString(JSON.stringify(prefixModelJson(tokenizerJson)));
      prefixTokenizer.disableTruncation();
      prefixTokenizer.disablePadding();
    }
    return new Encoder(tokenizer, template, cuts, maxTokenId(tokenizerJson) + 1, maxLength, prefixTokenizer);
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
    return (await this.tokenizer.encode(text, null, CONTENT_ONLY)).getLength();
  }

  /**
   * Content ids of texts: all of them, or at least the first `need` from a prefix (prefix.ts says why those are
   * exactly the first tokens of the whole text). Short texts go to the binding in one batch.
   */
  private async contents(texts: readonly string[], need: number, words = false, direction: TruncationDirection = "right"): Promise<Content[]> {
    const out: Content[] = new Array(texts.length);
    // texts whose long runs of marks were replaced by their NFC (normalizeLongSegments), forgotten when done
    const normalized: string[] = [];
    const whole: string[] = [];
    const wholeAt: number[] = [];
    const cut: Promise<void>[] = [];
    for (let i = 0; i < texts.length; i++) {
      let text = texts[i]!;
      if (this.cuts?.dropped && text.length > WHOLE_CHARS) text = shortenDroppedRuns(text, this.isDropped);
      if (this.cuts && text.length > WHOLE_CHARS) {
        const { runs, vanish } = this.whitespace(this.cuts);
        if (runs) text = shortenSpaceRuns(text, runs);
        if (vanish) text = shortenSpaceRuns(text, vanish);
      }
      if (this.cuts?.wordPieceMaxChars && text.length > WHOLE_CHARS) {
        text = this.anyScriptWords ? shortenWordRuns(text, this.cuts.wordPieceMaxChars, this.isWordChar, this.inWordRun) : shortenAsciiRuns(text, this.cuts.wordPieceMaxChars);
      }
      if (this.cuts?.inWord && text.length > WHOLE_CHARS) text = unknownTail(text, this.cuts.inWord, this.charKind);
      if (this.cuts?.inWord?.composes && text.length > WHOLE_CHARS) text = normalFormUnknownTail(text, this.cuts.inWord, this.tailChar, (first, mark) => this.repeatedMark(first, mark, this.cuts!.inWord!));
      if (this.cuts?.inWord?.spanForm && text.length > WHOLE_CHARS) text = this.normalizeLongSegments(text, this.cuts.inWord, normalized);
      if (this.cuts && text.length > WHOLE_CHARS) {
        const part = direction === "left" ? this.suffixContent(text, need, this.cuts) : this.prefixContent(text, need, this.cuts, words);
        // the text that `end` indexes: the input shortened as above (the same tokens)
        cut.push(part.then((c) => void (out[i] = c.end === undefined ? c : { ...c, text })));
      } else {
        whole.push(text);
        wholeAt.push(i);
      }
    }
    if (whole.length > 0) {
      const encodings = await this.tokenizer.encodeBatch(whole, CONTENT_ONLY);
      for (let j = 0; j < encodings.length; j++) out[wholeAt[j]!] = content(encodings[j]!, words, "whole");
    }
    try {
      await Promise.all(cut);
    } finally {
      for (const t of normalized) {
        const entry = this.normalRuns.get(t)!;
        if (--entry.users === 0) this.normalRuns.delete(t);
      }
    }
    return out;
  }

  /**
   * Byte-level BPE whose normaliser begins with NFC, or Unigram behind Metaspace whose normaliser begins with its
   * one normal form (InWordPolicy.spanForm; NFC below stands for that form): each run of more than
   * SEGMENT_UNIT_POINTS marks (LONG_MARK_RUN) that are not all one code point (markRunUnit and repeatedMark read
   * those as they are), with the starter before it, is replaced by the library's NFC of it, and the replaced spans
   * are remembered (normalRuns) for segmentUnit and newUnigramWord, which read them code point by code point. Such a
   * run is one normalisation segment, which NFC reorders whole: windows found nothing in it, and the Unigram replica
   * no position where a prefix may end (a letter and 999,999 marks of three classes: Qwen3, CLIP 1.4-2.4 s, mostly
   * the library's BPE on the million marks; the Unigram fixtures 0.4-0.55 s).
   * The library's normaliser makes the same text of both: the span begins and ends at normalisation boundaries
   * (normalFormBoundary of its first character, of the character after it, and of its NFC's first character), so the
   * NFC of the text is that of the part before it, then the span's, then the rest's; NFC of an NFC text is itself,
   * and the other parts of the normaliser (Lowercase, a Replace of whitespace) then see the same text. No added token
   * holds a mark of the span or a character of its NFC after the first, so a match in either text can only end at the
   * starter, and where NFC composes the starter no token ends with it or with what it becomes: the added tokens split
   * both texts alike (a KELVIN SIGN becomes K under NFC). Not where the NFC holds whitespace or the Metaspace
   * replacement (U+00A0 becomes a space under NFKC: words would change where the reader sees them). Offsets index the
   * text with the NFC spans, as the shortened runs' texts' do.
   */
  private normalizeLongSegments(text: string, policy: InWordPolicy, normalized: string[]): string {
    LONG_MARK_RUN.lastIndex = 0;
    let m = LONG_MARK_RUN.exec(text);
    if (m === null) return text;
    const parts: string[] = [];
    const runs: number[] = [];
    let copied = 0;
    let length = 0;
    const added = (this.addedChars ??= new Set(policy.added.flatMap((t) => [...t].map((c) => c.codePointAt(0)!))));
    for (; m !== null; m = LONG_MARK_RUN.exec(text)) {
      const end = m.index + m[0].length;
      if (end < text.length && !this.boundaryBefore(text.codePointAt(end)!)) continue;
      let start = m.index;
      let first = -1;
      if (start > 0) {
        const low = text.charCodeAt(start - 1);
        first = text.codePointAt(start >= 2 && low >= 0xdc00 && low <= 0xdfff ? start - 2 : start - 1)!;
        if (!this.boundaryBefore(first)) continue;
        start -= first > 0xffff ? 2 : 1;
      }
      const marks = new Set<number>();
      for (let i = m.index; i < end; ) {
        const cp = text.codePointAt(i)!;
        marks.add(cp);
        i += cp > 0xffff ? 2 : 1;
      }
      if (marks.size === 1 || [...marks].some((cp) => this.boundaryBefore(cp))) continue;
      if ([...marks].some((cp) => added.has(cp))) {
        this.nfcSpans.refused++;
        continue;
      }
      const form = policy.spanForm === "NFKC" ? (this.nfkc ??= nfkcNormalizer()) : (this.nfc ??= nfcNormalizer());
      const nfc = form.normalizeString(text.slice(start, end));
      if (nfc === "" || /[\s\u0085\u2581]/u.test(nfc)) continue;
      const head = nfc.codePointAt(0)!;
      // a match of an added token can only end at the starter (no token holds a mark): where NFC composes the
      // starter, no token may end with it or with what it becomes
      const composed = first >= 0 && head !== first;
      const ends = (cp: number) => policy.added.some((t) => t.endsWith(String.fromCodePoint(cp)));
      if (!this.boundaryBefore(head)) continue;
      if ((composed && (ends(first) || ends(head))) || [...nfc.slice(first >= 0 ? String.fromCodePoint(head).length : 0)].some((c) => added.has(c.codePointAt(0)!))) {
        this.nfcSpans.refused++;
        continue;
      }
      this.nfcSpans.replaced++;
      parts.push(text.slice(copied, start), nfc);
      length += start - copied;
      runs.push(length, length + nfc.length);
      length += nfc.length;
      copied = end;
    }
    if (parts.length === 0) return text;
    parts.push(text.slice(copied));
    const out = parts.join("");
    const entry = this.normalRuns.get(out);
    if (entry) entry.users++;
    else this.normalRuns.set(out, { runs, users: 1 });
    normalized.push(out);
    return out;
  }
  /** How many spans normalizeLongSegments replaced by their NFC, and how many it left for an added token. */
  readonly nfcSpans = { replaced: 0, refused: 0 };
  /**
   * The spans of texts that normalizeLongSegments replaced by their NFC: [start, end) pairs, in order, and how many
   * calls of `contents` are reading the text (the same text may be in two batches at once).
   */
  private readonly normalRuns = new Map<string, { runs: number[]; users: number }>();
  private addedChars: Set<number> | null = null;
  private nfc: Normalizer | null = null;
  private nfd: Normalizer | null = null;
  private nfkc: Normalizer | null = null;

  /** The span of normalRuns that holds position i of the text, or null. */
  private normalRunAt(text: string, i: number): [number, number] | null {
    if (this.normalRuns.size === 0) return null;
    const runs = this.normalRuns.get(text)?.runs;
    if (runs === undefined) return null;
    for (let k = 0; k < runs.length; k += 2) if (i >= runs[k]! && i < runs[k + 1]!) return [runs[k]!, runs[k + 1]!];
    return null;
  }

  private async prefixContent(text: string, need: number, cuts: CutPolicy, words: boolean): Promise<Content> {
    let from = Math.max(WHOLE_CHARS, need * FIRST_CUT_CHARS_PER_TOKEN);
    for (;;) {
      // cuts up to 4 from first (one further in is no nearer than a window), the rest only where no window does
      const near = 4 * from + 1;
      let at = from < text.length ? cutAtOrAfter(text, from, cuts, this.normalizeChar, this.pieces, near) : -1;
      // under Precompiled, a character it turns into whitespace inside a word (ZWJ) ends a pre-token too
      if ((at < 0 || at > 4 * from) && from < text.length && cuts.inWord?.clusters) {
        const inside = this.spaceInWordCut(text, from, cuts.inWord);
        if (inside > 0 && (at < 0 || inside < at)) at = inside;
      }
      // no cut point soon after `from`
      const far = (at < 0 || at > 4 * from) && from < text.length && Number.isFinite(need);
      if (far && cuts.spaceRuns) {
        // a long run of whitespace, cut inside (prefix.ts, SpaceRunPolicy)
        const inside = await this.spacePrefix(text, need, cuts, words);
        if (inside) return inside;
      }
      if (far && cuts.inWord) {
        // A word with marks under Precompiled, whose windows would fail: the replica on the word's first part
        const marked = cuts.inWord.clusters && this.unitCharNear(text, from, cuts.inWord);
        const first = marked ? await this.clusterPrefix(text, from, need, cuts.inWord, words) : null;
        if (first) return first;
        // A long word. For pairs the last word's count is then a lower bound
        // (countedLength), which decides most pairs (pairLengths); the others are tokenized further (encodeBatch).
        const inside = await this.wordPrefix(text, need, cuts.inWord, words);
        if (inside) return inside;
        // one unit repeated from the text's start, whose prefixes' tokens shift with their length: the run's period
        const periodic = await this.runPrefix(text, need, cuts, cuts.inWord, words);
        if (periodic) return periodic;
        // Unigram words whose prefixes never agree (one letter repeated): the model replicated on the whole word
        const replicated = cuts.inWord.unigram ? await this.unigramPrefix(text, from, need, cuts.inWord, words) : null;
        if (replicated) return replicated;
      }
      if ((at < 0 || at >= near) && near < text.length) {
        const further = cutAtOrAfter(text, near, cuts, this.normalizeChar, this.pieces, at < 0 ? text.length : at);
        if (further >= 0) at = further;
      }
      const part = at < 0 ? text : text.slice(0, at);
      const c = content(await this.tokenizer.encode(part, null, CONTENT_ONLY), words, at < 0 ? "whole" : "word end");
      if (at < 0 || c.ids.length >= need) return c;
      from = at * 4;
    }
  }

  /** The last `need` or more content ids of a text (single texts cut on the left), from a suffix where one is exact. */
  private async suffixContent(text: string, need: number, cuts: CutPolicy): Promise<Content> {
    let from = text.length - Math.max(WHOLE_CHARS, need * FIRST_CUT_CHARS_PER_TOKEN);
    for (;;) {
      // cuts down to 4 times as far from the end first, the rest only where no window does (as prefixContent)
      const near = text.length - 4 * (text.length - from);
      let at = from > 0 ? cutAtOrBefore(text, from, cuts, this.normalizeChar, this.pieces, near) : -1;
      // under Precompiled, a suffix may start after a character it turns into a space inside a word (ZWJ)
      if ((at < 0 || text.length - at > 4 * (text.length - from)) && from > 0 && cuts.leftCuts && cuts.inWord?.clusters) {
        const inside = this.spaceInWordSuffixCut(text, from, cuts.inWord);
        if (inside > at) at = inside;
      }
      // no cut point soon before `from`, where suffixes have the whole text's last tokens
      const far = (at < 0 || text.length - at > 4 * (text.length - from)) && from > 0 && cuts.leftCuts && Number.isFinite(need);
      if (far && cuts.spaceRuns?.suffixes) {
        const inside = await this.spaceSuffix(text, need, cuts);
        if (inside) return inside;
      }
      if (far && cuts.inWord?.suffixes) {
        const inside = await this.wordSuffix(text, need, cuts.inWord);
        if (inside) return inside;
        // one character repeated, whose suffixes' tokens shift with their length: the run's period
        const periodic = await this.runSuffix(text, from, need, cuts, cuts.inWord);
        if (periodic) return periodic;
      }
      if (far && cuts.inWord?.unigram) {
        // a long Unigram word near the end: the model replicated on the whole word
        const replicated = await this.unigramSuffix(text, from, need, cuts.inWord);
        if (replicated) return replicated;
      }
      if (at < near && near > 0) {
        const further = cutAtOrBefore(text, near - 1, cuts, this.normalizeChar, this.pieces, Math.max(0, at + 1));
        if (further >= 0) at = further;
      }
      const part = at < 0 ? text : text.slice(at);
      const c = content(await this.tokenizer.encode(part, null, CONTENT_ONLY), false, at < 0 ? "whole" : "word end");
      if (at < 0 || c.ids.length >= need) return c;
      from = text.length - (text.length - at) * 4;
    }
  }

  /**
   * Ids and offsets of prefixes that end inside a word. With an end-of-word suffix, the words before the last one are
   * whole words, tokenized by the model with the suffix, and the last one is unfinished, tokenized without it
   * (InWordPolicy): the same pre-tokens (word ids) in both encodings, so each part is taken from its own.
   */
  private async prefixTokens(parts: string[], policy: InWordPolicy): Promise<{ ids: number[][]; offsets: number[][][]; words: WordIds[] }> {
    const open = await this.prefixTokenizer.encodeBatch(parts, CONTENT_ONLY);
    if (!policy.endOfWordSuffix) return { ids: open.map((e) => e.getIds()), offsets: open.map((e) => e.getOffsets()), words: open.map((e) => e.getWordIds()) };
    const closed = await this.tokenizer.encodeBatch(parts, CONTENT_ONLY);
    const ids: number[][] = [];
    const offsets: number[][][] = [];
    const words: WordIds[] = [];
    for (let j = 0; j < parts.length; j++) {
      const openWords = open[j]!.getWordIds();
      const closedWords = closed[j]!.getWordIds();
      const last = openWords[openWords.length - 1];
      const a = closedWords.findIndex((w) => w === last);
      const b = openWords.findIndex((w) => w === last);
      if (last === null || last === undefined || a < 0 || b < 0) return { ids: [[]], offsets: [[]], words: [[]] };
      ids.push([...closed[j]!.getIds().slice(0, a), ...open[j]!.getIds().slice(b)]);
      offsets.push([...closed[j]!.getOffsets().slice(0, a), ...open[j]!.getOffsets().slice(b)]);
      words.push([...closedWords.slice(0, a), ...openWords.slice(b)]);
    }
    return { ids, offsets, words };
  }

  /**
   * The last `need` or more content ids of a text from suffixes that start inside a word (byte-level BPE,
   * InWordPolicy.suffixes): the tokens that every suffix starting in a window ends with, compared by id and by
   * offsets from the text's end.
   */
  private async wordSuffix(text: string, need: number, policy: InWordPolicy): Promise<Content | null> {
    let back = Math.max(64, need * 4);
    while (back < text.length) {
      const win = this.window(text, text.length - back, policy) ?? this.forcedWindow(text, text.length - back, policy);
      if (!win) {
        // no window there (spaces, marks, other classes): look further from the end
        back *= 4;
        continue;
      }
      if (!cheaperThanWhole(win.ends, text.length, text.length)) return null;
      const { ids, common } = await this.commonSuffixTokens(text, win.ends);
      if (common === 0) return null;
      if (common >= need) return { ids: Int32Array.from(ids.slice(ids.length - common)), words: null, tokens: "some" };
      back = (text.length - win.ends[0]!) * 4;
      if (back * win.ends.length * 4 > text.length) return null;
    }
    return null;
  }

  /** wordPrefixWindow with this tokenizer's normaliser and pre-tokenizer, read in units where the policy has them. */
  private window(text: string, from: number, policy: InWordPolicy, maxWidth?: number): PrefixWindow | null {
    return wordPrefixWindow(text, from, policy, this.normalizeChar, maxWidth, this.pieces, this.unitsOf(policy));
  }

  /** The UnitReader of a policy whose windows are read in normalisation segments (InWordPolicy.segments), else none. */
  private unitsOf(policy: InWordPolicy): UnitReader | undefined {
    if (!policy.segments) return undefined;
    return (this.units ??= { at: (text, i) => this.segmentUnit(text, i, policy), start: (text, p) => this.segmentUnitStart(text, p, policy) });
  }
  private units: UnitReader | null = null;

  /**
   * The window unit at i of byte-level BPE behind NFC (InWordPolicy.segments; prefix.ts WindowUnit), or null:
   * - a normalisation segment: from a character with a normalisation boundary before it (normalFormBoundary) up to
   *   the next such character (at most SEGMENT_UNIT_POINTS code points), so the normal form of the text is that of
   *   the text before it, then the segment's, then that of the rest (UAX #15, as for Unigram's segments:
   *   unigramWord). One character: a window character as before (windowChar). Several (a letter and its marks,
   *   Hangul jamo, kana and a voicing mark, decomposed): the library's normaliser makes the segment one character
   *   that is a window character itself (windowChar of it alone: a starter that joins nothing, so nothing is left
   *   to ask of its neighbours), of the class of the segment's first character.
   * - one mark of a long run of that mark (markRunUnit): after the first two marks of a segment that is a starter
   *   and the run (repeatedMark proves that each later mark stays as it is, in place), or anywhere in a run at the
   *   text's start (no starter to compose with; reordering leaves a run of one mark as it is); the run ends at the
   *   text's end or before a character with a boundary before it.
   * Every unit ends at a normalisation boundary of the whole text (the mark run's are proven by repeatedMark), so a
   * prefix ending between units is normalised as the whole text is up to there, and a suffix starting there as the
   * rest; the window argument then runs on the normalised characters.
   */
  private segmentUnit(text: string, i: number, policy: InWordPolicy): WindowUnit | null {
    const cp = text.codePointAt(i);
    if (cp === undefined || (cp >= 0xdc00 && cp <= 0xdfff)) return null;
    const run = this.normalRunAt(text, i);
    if (run !== null) {
      // an NFC span (normalizeLongSegments): NFC leaves every prefix and suffix of an NFC text as it is, so each of
      // its code points is a unit; the starter a window character as any, a mark one as in a run (markRunUnit)
      const ch = String.fromCodePoint(cp);
      const end = i + ch.length;
      if (i === run[0]) {
        const n = ownWindowChar(ch, this.normalizeChar(ch), policy);
        return n === null ? null : { n, end };
      }
      return this.normalizeChar(ch) === ch && !this.boundaryBefore(cp) && segmentWindowChar(ch, policy) ? { n: ch, end } : null;
    }
    if (!this.boundaryBefore(cp)) return this.markRunUnit(text, i, cp, policy);
    let end = i + (cp > 0xffff ? 2 : 1);
    for (let k = 1; end < text.length; k++) {
      const next = text.codePointAt(end)!;
      if (this.boundaryBefore(next)) break;
      if (k === SEGMENT_UNIT_POINTS) return null;
      end += next > 0xffff ? 2 : 1;
    }
    const raw = text.slice(i, end);
    if (end - i === (cp > 0xffff ? 2 : 1)) {
      const n = ownWindowChar(raw, this.normalizeChar(raw), policy);
      return n === null ? null : { n, end };
    }
    const n = this.normalizeUnit(raw);
    return ownWindowChar(n, n, policy) !== null && classOf(String.fromCodePoint(cp)) === classOf(n) ? { n, end } : null;
  }

  /** The start of the window unit that holds p (segmentUnit): back to a character with a boundary before it, or p. */
  private segmentUnitStart(text: string, p: number, policy: InWordPolicy): number {
    let q = p;
    if (q > 0 && q < text.length && text.charCodeAt(q) >= 0xdc00 && text.charCodeAt(q) <= 0xdfff) q--;
    if (this.normalRunAt(text, q) !== null) return q;
    for (let k = 0; q < text.length && k <= SEGMENT_UNIT_POINTS; k++) {
      const cp = text.codePointAt(q)!;
      if (this.boundaryBefore(cp) || (k === 0 && this.markRunUnit(text, q, cp, policy))) return q;
      if (q === 0) break;
      q -= q >= 2 && text.charCodeAt(q - 1) >= 0xdc00 && text.charCodeAt(q - 1) <= 0xdfff ? 2 : 1;
    }
    return p;
  }

  /**
   * segmentUnit's mark run: `mark` at i inside a run of that one code point that ends at the text's end or before a
   * character with a normalisation boundary before it, and begins at the text's start, or right after a starter
   * `first` with repeatedMark(first, mark) and at least two marks before i; the unit is the mark alone, a window
   * character as segmentWindowChar says. The run last found is remembered (a window reads many of its marks).
   */
  private markRunUnit(text: string, i: number, mark: number, policy: InWordPolicy): WindowUnit | null {
    const width = mark > 0xffff ? 2 : 1;
    const m = String.fromCodePoint(mark);
    let run = this.markRun;
    if (!run || run.text !== text || run.mark !== mark || i < run.start || i >= run.end) {
      let start = i;
      while (start >= width && text.startsWith(m, start - width)) start -= width;
      let end = i;
      while (text.startsWith(m, end)) end += width;
      let from = -1;
      if (end === text.length || this.boundaryBefore(text.codePointAt(end)!)) {
        const low = text.charCodeAt(start - 1);
        const first = start === 0 ? -1 : text.codePointAt(start >= 2 && low >= 0xdc00 && low <= 0xdfff ? start - 2 : start - 1)!;
        if (first < 0) from = m.normalize("NFD") === m && m.normalize("NFKD") === m && !normalFormStarter(m) ? 0 : -1;
        else if (this.boundaryBefore(first) && this.repeatedMark(first, mark, policy)) from = start + 2 * width;
      }
      run = this.markRun = { text, mark, start, end, from };
    }
    if (run.from < 0 || i < run.from || (i - run.start) % width !== 0) return null;
    const n = this.normalizeChar(m);
    return n === m && segmentWindowChar(m, policy) ? { n: m, end: i + width } : null;
  }
  private markRun: { text: string; mark: number; start: number; end: number; from: number } | null = null;

  /** A window of one position that no vocabulary token can cover (prefix.ts forcedByteEnd), or null. */
  private forcedWindow(text: string, from: number, policy: InWordPolicy): { ends: number[] } | null {
    const v = forcedByteEnd(text, from, policy, this.normalizeChar, this.pieces, this.unitsOf(policy));
    return v > 0 ? { ends: [v] } : null;
  }

  /**
   * How many last tokens the suffixes of a text starting at `starts` all end with (same ids, same offsets from the
   * text's end), and the first suffix's ids: the whole text's last tokens when one start is a boundary of them
   * (InWordPolicy, SpaceRunPolicy).
   */
  private async commonSuffixTokens(text: string, starts: readonly number[]): Promise<{ ids: number[]; common: number }> {
    const parts = starts.map((start) => text.slice(start));
    const encodings = await this.tokenizer.encodeBatch(parts, CONTENT_ONLY);
    const ids = encodings.map((e) => e.getIds());
    const offsets = encodings.map((e) => e.getOffsets());
    const lengths = parts.map(codePoints);
    const fromEnd = (j: number, k: number) => {
      const t = ids[j]!.length - 1 - k;
      return t < 0 ? null : { id: ids[j]![t]!, a: lengths[j]! - offsets[j]![t]![0]!, b: lengths[j]! - offsets[j]![t]![1]! };
    };
    let common = 0;
    for (;; common++) {
      const first = fromEnd(0, common);
      if (!first || !ids.every((_, j) => {
        const x = fromEnd(j, common);
        return x !== null && x.id === first.id && x.a === first.a && x.b === first.b;
      })) break;
    }
    return { ids: ids[0]!, common };
  }

  /**
   * The first `need` or more content ids of a text from prefixes that end inside a run of whitespace (prefix.ts,
   * SpaceRunPolicy): all ids of a prefix ending at a forced boundary, else the ids every prefix ending in a window
   * begins with. Windows start after 4 characters per token needed and move 4x further while too few tokens came or
   * none was found; null past the text's end. With `words`, the tokens' word ids: the last word (the run) goes on
   * (tokens "some": a lower bound for pairs).
   */
  private async spacePrefix(text: string, need: number, cuts: CutPolicy, words: boolean): Promise<Content | null> {
    for (let from = Math.max(64, need * 4); from < text.length; from *= 4) {
      const ends = spaceRunWindow(text, from, "right", cuts, this.isSpace, this.normalizeChar, this.pieces);
      if (!ends) continue;
      if (!cheaperThanWhole(ends, 0, text.length)) return null;
      const encodings = await this.tokenizer.encodeBatch(ends.map((e) => text.slice(0, e)), CONTENT_ONLY);
      const common = commonFirstTokens(encodings.map((e) => e.getIds()), encodings.map((e) => e.getOffsets()));
      if (common >= need) {
        return { ids: Int32Array.from(encodings[0]!.getIds().slice(0, common)), words: words ? encodings[0]!.getWordIds().slice(0, common) : null, tokens: "some" };
      }
      // prefixes that agree on nothing, or a next window that would cost more than the whole text
      if (common === 0 || from * 4 * ends.length * 4 > text.length) return null;
      from = Math.max(from, ends[ends.length - 1]!);
    }
    return null;
  }

  /**
   * The last `need` or more content ids of a text from suffixes that start inside a run of whitespace (SpaceRunPolicy):
   * all ids of a suffix starting at a forced boundary, else the ids every suffix starting in a window ends with.
   */
  private async spaceSuffix(text: string, need: number, cuts: CutPolicy): Promise<Content | null> {
    for (let back = Math.max(64, need * 4); back < text.length; back *= 4) {
      const starts = spaceRunWindow(text, text.length - back, "left", cuts, this.isSpace, this.normalizeChar, this.pieces);
      if (!starts) continue;
      if (!cheaperThanWhole(starts, text.length, text.length)) return null;
      const { ids, common } = await this.commonSuffixTokens(text, starts);
      if (common >= need) return { ids: Int32Array.from(ids.slice(ids.length - common)), words: null, tokens: "some" };
      // suffixes that agree on nothing (a periodic run, whose last tokens shift with the start), or a next window
      // that would cost more than the whole text
      if (common === 0 || back * 4 * starts.length * 4 > text.length) return null;
      back = Math.max(back, text.length - starts[0]!);
    }
    return null;
  }

  /** spaceChar of a UTF-16 code unit (cached: 0 not yet known, 1 yes, 2 no; surrogates never). */
  private readonly isSpace = (code: number): boolean => {
    this.spaceChars ??= new Uint8Array(0x10000);
    let v = this.spaceChars[code]!;
    if (v === 0) {
      v = code < 0xd800 || code > 0xdfff ? (spaceChar(String.fromCharCode(code), this.normalizeChar, this.pieces) ? 1 : 2) : 2;
      this.spaceChars[code] = v;
    }
    return v === 1;
  };
  private spaceChars: Uint8Array | null = null;

  /**
   * The last `need` or more content ids of a text whose long word around `from` is one unit repeated to the word's
   * end (runUnit: one character, or a few characters without whitespace, e.g. a flag's two regional indicators;
   * byte-level BPE, InWordPolicy.suffixes; the word followed by the text's end or a cut), or null.
   * A boundary of a BPE word's tokens splits it: the tokens left of it are the left part's alone and those right of
   * it the right part's alone (no merge crosses it, and each side's merges run in the same order alone). The run's
   * period (runPeriod) gives T(u^n) = [t0] + T(u^(n - q)) for every n >= n1 units, so T(u^n) ends with T(u^r) for
   * every r = n - k q >= n1 - q. The word's tokens (from the cut before it, whose few characters before the run may
   * join its first symbols) have a boundary b inside the run: the end of the tokens that all prefixes ending in a
   * window of the run begin with (wordPrefixWindow), taken only where it lies between two units (byte-level tokens
   * may end inside a character: the next token must begin where the last common one ends, and b a whole number of
   * units into the run); the run's part after b is u^L tokenized alone, which ends with T(u^r) for r = L - k q: the
   * text from there to its end is tokenized, r chosen so that it holds `need` tokens.
   * A run of one whitespace character (newlines) is one pre-token whose windows and suffixes SpaceRunPolicy gives.
   */
  private async runSuffix(text: string, from: number, need: number, cuts: CutPolicy, policy: InWordPolicy): Promise<Content | null> {
    if (!policy.suffixes || policy.ignoreMerges) return null;
    const found = runUnit(text, from);
    if (!found) return null;
    const { unit, start, end } = found;
    const space = this.isSpace(unit.charCodeAt(0));
    if (space && (unit.length > 1 || !cuts.spaceRuns?.suffixes)) return null;
    if (end < text.length && cutAtOrBefore(text, end, cuts, this.normalizeChar, undefined, end) !== end) return null;
    // the cut before the word: the characters between it and the run are tokenized with the run's first part
    const before = start === 0 ? 0 : Math.max(0, cutAtOrBefore(text, start, cuts, this.normalizeChar, undefined, start - RUN_LEAD_CHARS));
    if (start - before > RUN_LEAD_CHARS) return null;
    const period = await this.runPeriod(unit, policy, cuts);
    if (!period) return null;
    // a whitespace window a few characters in: prefixes ending at the run's first positions share no token; in a
    // word, a window at the run's start, else one further in (prefixes shorter than the period's token, e.g. 16
    // zeros on GPT-2's vocabulary, share none either)
    const lead = await this.runLead(text, before, start, end, space ? [16] : RUN_LEAD_WINDOWS, unit, policy, cuts);
    if (!lead) return null;
    const boundary = lead.boundary;
    const { token, q, n1 } = period;
    const length = (end - boundary) / unit.length;
    const rest = length < n1 ? length : length - q * Math.ceil((length - n1 + 1) / q);
    const repeats = Math.min((length - rest) / q, need);
    const run = (rest + repeats * q) * unit.length;
    const encoding = await this.tokenizer.encode(text.slice(end - run), null, CONTENT_ONLY);
    const ids = encoding.getIds();
    if (ids.length < need) return null;
    // T(u^run) begins with `repeats` times the period's token (a check of the argument, not a part of it)
    if (!this.sameIds(ids, 0, new Int32Array(repeats).fill(token), 0, repeats)) return null;
    return { ids: Int32Array.from(ids), words: null, tokens: "some" };
  }

  /** runLeadEnd from the first of the windows `into` characters into the run [start, end) that gives one, or null. */
  private async runLead(text: string, before: number, start: number, end: number, into: readonly number[], unit: string, policy: InWordPolicy, cuts: CutPolicy): Promise<RunLead | null> {
    for (const n of into) {
      const lead = await this.runLeadEnd(text, before, start, end, start + n, unit, policy, cuts);
      if (lead) return lead;
    }
    return null;
  }

  /**
   * Where the tokens common to the prefixes [before, e) for the ends e of a window at or after `from` end, when that
   * is inside the run [start, end) after a whole number of units and between two characters; else -1.
   */
  private async runLeadEnd(text: string, before: number, start: number, end: number, from: number, unit: string, policy: InWordPolicy, cuts: CutPolicy): Promise<RunLead | null> {
    if (from >= end) return null;
    const ends = this.runWindow(text, from, policy, cuts);
    if (!ends || ends[0]! <= start || ends[ends.length - 1]! >= end) return null;
    const lead = await this.prefixTokens(ends.map((e) => text.slice(before, e)), policy);
    const common = commonFirstTokens(lead.ids, lead.offsets);
    if (common === 0) return null;
    const o = lead.offsets[0]!;
    // the common tokens end between two characters (the next token begins there)
    if (common < o.length && o[common]![0] !== o[common - 1]![1]) return null;
    // code points to UTF-16: the lead may hold astral characters
    const boundary = codePointIndex(text, before, o[common - 1]![1]!);
    return boundary < start || boundary >= end || (boundary - start) % unit.length !== 0 ? null : { boundary, ids: lead.ids[0]!.slice(0, common), words: lead.words[0]!.slice(0, common) };
  }

  /**
   * The first `need` ids of a text that begins (after at most RUN_LEAD_CHARS characters) with a long run of one unit
   * that ends at a cut or at the text's end, under byte-level BPE (right truncation: wordPrefix gives up on such a
   * run, whose prefixes' tokens shift with their length). The prefixes of a window in the run share their first
   * tokens, which end at a boundary b of the whole text's tokens inside the run (runLeadEnd): those are the text's
   * first tokens, and no merge of the word crosses b, so the word's tokens right of b are those of its part right of
   * b alone (runSuffix's argument), a run of m units: by its period (runPeriod) T(u^m) = [t] + T(u^(m - q)) while
   * m >= n1, so it begins with k times t for m >= n1 + (k - 1) q. Null where that does not apply.
   * With `words` (a pair's member, counted by countedLength), the ids' word ids: the lead's own, and for the k tokens
   * of the period the lead's last one, whose token ends at b inside the run (b after the run's start), so lies in the
   * run's pre-token: one pre-token to the library for a unit the pre-tokenizer keeps together (64 units are one
   * piece); countedLength reads equal word ids at the end only as "the word goes on", a lower bound in any case, and
   * countedExactly counts the rest of the word from `end`.
   */
  private async runPrefix(text: string, need: number, cuts: CutPolicy, policy: InWordPolicy, words = false): Promise<Content | null> {
    if (!policy.suffixes || policy.ignoreMerges || text.length <= RUN_LEAD_CHARS) return null;
    const found = runUnit(text, RUN_LEAD_CHARS);
    if (!found || found.start > RUN_LEAD_CHARS) return null;
    const { unit, start, end } = found;
    if (this.isSpace(unit.charCodeAt(0))) return null;
    if (end < text.length && cutAtOrAfter(text, end, cuts, this.normalizeChar, this.pieces, end + 1) !== end) return null;
    const period = await this.runPeriod(unit, policy, cuts);
    if (!period) return null;
    const lead = await this.runLead(text, 0, start, end, RUN_LEAD_WINDOWS, unit, policy, cuts);
    if (!lead) return null;
    const { token, q, n1 } = period;
    const k = Math.max(0, need - lead.ids.length);
    const m = (end - lead.boundary) / unit.length;
    if (m < n1 + Math.max(0, k - 1) * q) return null;
    const ids = Int32Array.from([...lead.ids, ...new Array<number>(k).fill(token)]);
    if (words && (lead.boundary === start || this.pieces(unit.repeat(64)) !== 1)) return null;
    const wordIds = words ? [...lead.words, ...new Array<number | null>(k).fill(lead.words[lead.words.length - 1] ?? null)] : null;
    return { ids, words: wordIds, tokens: "some", end: lead.boundary + k * q * unit.length };
  }

  /**
   * The period of a run of one unit u (runUnit) under byte-level BPE: the first token `token` (q units) of the
   * prefixes that end in a window of the run (wordPrefixWindow), which every run of n >= n1 units (n1: the window's
   * last end, rounded up to a unit) begins with, so that T(u^n) = [token] + T(u^(n - q)). The token must end where
   * the next one begins (not inside a character's bytes) and after a whole number of units; checked on the runs of
   * n1 .. n1 + q - 1 units (a disagreement, e.g. merges the argument does not model, gives null: the text is
   * tokenized as before). Cached per unit.
   */
  private async runPeriod(unit: string, policy: InWordPolicy, cuts: CutPolicy): Promise<RunPeriod | null> {
    const cached = this.runPeriods.get(unit);
    if (cached !== undefined) return cached;
    let period: RunPeriod | null = null;
    const units = Math.ceil(RUN_PERIOD_CHARS / unit.length);
    const run = unit.repeat(units);
    const unitPoints = codePoints(unit);
    // a window 64 characters in, else 256 (65 dots on GPT-2's vocabulary are 32 + 24 + 9, 66 or more begin with 64)
    for (const into of [64, 256]) {
      period = await this.periodAt(run, into, unit, unitPoints, units, policy, cuts);
      if (period) break;
    }
    if (this.runPeriods.size >= 4096) this.runPeriods.clear();
    this.runPeriods.set(unit, period);
    return period;
  }

  /** runPeriod from the prefixes of a window `into` characters into a run of `units` units, or null. */
  private async periodAt(run: string, into: number, unit: string, unitPoints: number, units: number, policy: InWordPolicy, cuts: CutPolicy): Promise<RunPeriod | null> {
    let period: RunPeriod | null = null;
    const ends = this.runWindow(run, into, policy, cuts);
    if (ends) {
      const { ids, offsets } = await this.prefixTokens(ends.map((e) => run.slice(0, e)), policy);
      const first = offsets[0]![0];
      const next = offsets[0]![1];
      if (commonFirstTokens(ids, offsets) > 0 && first && (next === undefined || next[0] === first[1]) && first[0] === 0 && first[1]! % unitPoints === 0) {
        const token = ids[0]![0]!;
        const q = first[1]! / unitPoints;
        const n1 = Math.ceil(ends[ends.length - 1]! / unit.length);
        const sizes = Array.from({ length: q }, (_, r) => n1 + r);
        const [longer, shorter] = await Promise.all([
          this.tokenizer.encodeBatch(sizes.map((n) => unit.repeat(n)), CONTENT_ONLY),
          this.tokenizer.encodeBatch(sizes.map((n) => unit.repeat(n - q)), CONTENT_ONLY),
        ]);
        const holds = longer.every((e, r) => {
          const [a, b] = [e.getIds(), shorter[r]!.getIds()];
          return this.sameIds(a, 1, b, 0, b.length, a[0] === token && a.length === b.length + 1);
        });
        if (holds && q > 0 && n1 + q <= units) period = { token, q, n1 };
      }
    }
    return period;
  }
  private readonly runPeriods = new Map<string, RunPeriod | null>();

  /**
   * A window's prefix ends at or after `from` in a run of one character: inside a whitespace run (spaceRunWindow),
   * else inside a word (wordPrefixWindow).
   */
  private runWindow(text: string, from: number, policy: InWordPolicy, cuts: CutPolicy): number[] | null {
    if (this.isSpace(text.charCodeAt(from))) return spaceRunWindow(text, from, "right", cuts, this.isSpace, this.normalizeChar, this.pieces);
    // up to 160 positions wide: a run's prefixes are short, and 65 "=" are one of GPT-2's tokens
    return this.window(text, from, policy, 160)?.ends ?? null;
  }

  /**
   * The first `need` or more content ids of a text from prefixes that end inside a word (prefix.ts, InWordPolicy):
   * the tokens that every prefix ending in a window begin with. Windows start after 4 characters per token needed
   * and move 4x further while too few tokens are common; null when no window is found, or when the next one would
   * cost more than the whole text (which is then tokenized whole). With `words`, the word ids of the tokens kept:
   * the last of them lies inside the long word, whose count goes on past them (tokens "some": countedLength is then
   * a lower bound).
   */
  private async wordPrefix(text: string, need: number, policy: InWordPolicy, words = false): Promise<Content | null> {
    let from = Math.max(64, need * 4);
    while (from < text.length) {
      const forced = unknownCut(text, from, from * 2, policy, this.charKind);
      const win = forced > 0 ? { ends: [forced] } : (this.window(text, from, policy) ?? this.forcedWindow(text, from, policy));
      if (!win) {
        // no window there (spaces, marks, other classes): look further in
        from *= 4;
        continue;
      }
      // a window so far in that its prefixes hold more characters than the text: the text whole costs less
      if (!cheaperThanWhole(win.ends, 0, text.length)) return null;
      const { ids, offsets, words: wordIds } = await this.prefixTokens(win.ends.map((end) => text.slice(0, end)), policy);
      let common = commonFirstTokens(ids, offsets);
      // Prefixes that agree on no token (a run of one letter, whose path shifts with its length) are given up at once.
      if (common === 0) return null;
      // a fused unknown token at the end may go on in the whole text
      while (common > 0 && policy.unknownId !== null && ids[0]![common - 1] === policy.unknownId) common--;
      if (common >= need) {
        // where the ids end in the text, when that is between two characters (byte-level tokens may split one)
        const o = offsets[0]!;
        const end = common === o.length || o[common]![0] === o[common - 1]![1] ? codePointIndex(text, 0, o[common - 1]![1]!) : undefined;
        return { ids: Int32Array.from(ids[0]!.slice(0, common)), words: words ? wordIds[0]!.slice(0, common) : null, tokens: "some", end };
      }
      const last = win.ends[win.ends.length - 1]!;
      from = last * 4;
      // Prefixes that never agree (a run of one letter under Unigram can shift its whole path with its length): stop
      // before the next window would tokenize more than a quarter of the characters the whole text has.
      if (from * win.ends.length * 4 > text.length) return null;
    }
    return null;
  }

  /**
   * How often the Unigram replica (unigram.ts) or a run's period (runPeriod, runSuffix) was checked against the
   * binding on a long word: `same`, or `differ` (then the text was tokenized as before, whole where nothing else
   * cuts it).
   */
  readonly wordPathChecks = { same: 0, differ: 0 };

  /**
   * The long word around `from` (from the U+0020 space before it, or the text's start, to the next one, or the
   * end) as the Unigram pre-token the library builds, and its best path (unigram.ts); null where the replica does
   * not apply (a character that is not a window character, the marker character, an added token spelled with the
   * word's characters, an unknown node). `at[p]`: the UTF-16 index in the text of the pre-token's position p, -1
   * inside a segment. Behind NFC / NFKC (InWordPolicy.composes) the word is read in segments instead where needed:
   * from a character with a normalisation boundary before it (or the word's first one, after a space or the text's
   * start, which join nothing after them) up to the next such character; the normal form of the word is that of its
   * segments, one after another (UAX #15), and a segment that is not one window character is normalised by the
   * library whole (segmentSymbols).
   */
  private unigramWord(text: string, from: number, policy: InWordPolicy): UnigramWord | null {
    const start = text.lastIndexOf(" ", from - 1) + 1;
    let end = text.indexOf(" ", from);
    if (end < 0) end = text.length;
    if (end <= start) return null;
    // the last word asked for (the right and the left truncation, a pair's count ask for the same one)
    const last = this.lastWord;
    if (last && last.text === text && last.start === start && last.end === end && last.policy === policy) return last.word;
    const word = this.newUnigramWord(text, start, end, policy);
    this.lastWord = { text, start, end, policy, word };
    return word;
  }
  private lastWord: { text: string; start: number; end: number; policy: InWordPolicy; word: UnigramWord | null } | null = null;

  private newUnigramWord(text: string, start: number, end: number, policy: InWordPolicy): UnigramWord | null {
    const { vocab, marker } = policy.unigram!;
    const markerCp = marker.marker === null ? -1 : marker.marker.codePointAt(0)!;
    const withMarker = markerCp >= 0 && (start === 0 ? marker.atStart : marker.afterSpace);
    const m = withMarker ? 1 : 0;
    let symbols = new Int32Array(m + end - start);
    let at = new Int32Array(m + end - start + 1);
    const seen = (this.seen ??= new Int32Array(0x110000));
    const symbolOf = (this.wordSymbols ??= new Int32Array(0x110000));
    const composes = policy.composes !== null;
    const stamp = ++this.seenStamp;
    this.segmentsNew = 0;
    // segments may normalise to more symbols than they have code units (U+0E33 under NFKC): grow both arrays
    const room = (more: number): void => {
      if (n + more < symbols.length) return;
      const grown = new Int32Array(2 * (n + more) + 16);
      grown.set(symbols);
      symbols = grown;
      const grownAt = new Int32Array(grown.length + 1);
      grownAt.set(at);
      at = grownAt;
    };
    let n = 0;
    at[0] = start;
    if (withMarker) symbols[n++] = markerCp;
    at[n] = start;
    for (let i = start; i < end; ) {
      const cp = text.codePointAt(i)!;
      let v = symbolOf[cp]!;
      if (v === 0) v = this.wordSymbolOf(cp, policy);
      let next = i + (cp > 0xffff ? 2 : 1);
      // a span in normal form (normalizeLongSegments): each code point is a segment, the character itself
      if (composes && this.normalRuns.size > 0 && this.normalRunAt(text, i) !== null) {
        const ch = String.fromCodePoint(cp);
        if (cp === markerCp || this.normalizeChar(ch) !== ch) return null;
        seen[cp] = stamp;
        symbols[n++] = cp;
        i = next;
        at[n] = i;
        continue;
      }
      // cached as symbol + 1, -1 for none; a window character is its own segment unless a character without a
      // boundary before it follows
      if (v > 0 && (!composes || next >= end || this.boundaryBefore(text.codePointAt(next)!))) {
        if (v - 1 === markerCp) return null;
        seen[cp] = stamp;
        seen[v - 1] = stamp;
        symbols[n++] = v - 1;
        i = next;
        at[n] = i;
        continue;
      }
      // under Precompiled, a word with marks may still go unit by unit (clusterWord)
      if (!composes) return policy.clusters ? this.clusterWord(text, start, end, policy, withMarker ? markerCp : -1) : null;
      while (next < end && !this.boundaryBefore(text.codePointAt(next)!)) next += text.codePointAt(next)! > 0xffff ? 2 : 1;
      // a long run of one mark after the segment's first character: that character and two marks, then each mark
      // alone (repeatedMark)
      const head = i + (cp > 0xffff ? 2 : 1);
      const mark = next - head > 2 * REPEATED_MARKS ? text.codePointAt(head)! : -1;
      const width = mark > 0xffff ? 2 : 1;
      let repeated = mark >= 0 && this.repeatedMark(cp, mark, policy);
      for (let j = head; repeated && j < next; j += width) repeated = text.codePointAt(j) === mark;
      if (repeated) {
        const first = this.segmentSymbols(text.slice(i, head + 2 * width), policy)!;
        // room for these symbols and one per code unit of the rest of the word
        room(first.length + (end - head));
        seen[cp] = stamp;
        seen[mark] = stamp;
        for (const c of first) {
          seen[c] = stamp;
          symbols[n++] = c;
          at[n] = -1;
        }
        at[n] = head + 2 * width;
        for (let j = head + 2 * width; j < next; j += width) {
          symbols[n++] = mark;
          at[n] = j + width;
        }
        i = next;
        continue;
      }
      const segment = this.segmentSymbols(text.slice(i, next), policy);
      if (!segment || segment.includes(markerCp)) return null;
      for (let j = i; j < next; j++) seen[text.codePointAt(j)!] = stamp;
      // room for the segment's symbols and one per code unit of the rest of the word
      room(segment.length + (end - next));
      for (const c of segment) {
        seen[c] = stamp;
        symbols[n++] = c;
        at[n] = -1;
      }
      i = next;
      at[n] = i;
    }
    // added tokens are matched in the raw or the normalised text before the model
    for (const t of policy.added) if (t.length > 0 && [...t].every((ch) => seen[ch.codePointAt(0)!] === stamp)) return null;
    const path = unigramWordPath(symbols.subarray(0, n), vocab, withMarker ? markerCp : -1);
    return path ? { start, end, path, at: at.subarray(0, n + 1), symbols: symbols.subarray(0, n), marker: withMarker ? markerCp : -1 } : null;
  }

  /**
   * Whether a code point has a normalisation boundary before it in every normal form (prefix.ts, normalFormBoundary;
   * cached: 0 not yet known, 1 yes, 2 no).
   */
  private boundaryBefore(cp: number): boolean {
    const cache = (this.boundaries ??= new Uint8Array(0x110000));
    if (cache[cp] === 0) cache[cp] = normalFormBoundary(String.fromCodePoint(cp)) ? 1 : 2;
    return cache[cp] === 1;
  }
  private boundaries: Uint8Array | null = null;

  /**
   * The code points the library's normaliser makes of a segment of a word (unigramWord), or null where they hold a
   * U+0020 space (the pre-tokenizer would split there) or where too many distinct segments were met in one word
   * (each costs a call of the library: the word is then left to the other paths).
   */
  private segmentSymbols(segment: string, policy: InWordPolicy): Int32Array | null {
    let v = this.segments.get(segment);
    if (v === undefined) {
      if (++this.segmentsNew > SEGMENTS_PER_WORD || /\p{Cs}/u.test(segment)) return null;
      if (this.segments.size >= SEGMENTS_PER_WORD) this.segments.clear();
      const n = this.tokenizer.getNormalizer();
      const normalized = n === null ? segment : n.normalizeString(segment);
      v = normalized.length === 0 || normalized.includes(" ") || policy.added.some((t) => t.length > 0 && normalized.includes(t)) ? null : Int32Array.from(normalized, (c) => c.codePointAt(0)!);
      this.segments.set(segment, v);
    }
    return v;
  }
  private readonly segments = new Map<string, Int32Array | null>();

  /**
   * Whether a segment that is `first` followed by k >= 2 of one mark normalises to what `first` and two marks do,
   * followed by the other k - 2 marks alone (unigramWord). `first` is a starter that is its own decomposition and
   * the mark a non-starter that is its own and that the normaliser keeps alone, so the decomposed segment is the
   * segment, and reordering leaves a run of one mark as it is. Composition goes left to right without looking
   * ahead: where the library's normaliser leaves the third mark after the first two (`first` and three marks give
   * what `first` and two give and the mark), that mark neither composed nor moved, so it stays and blocks every later
   * one from the last starter (same combining class): they stay too. Cached by pair.
   */
  private repeatedMark(first: number, mark: number, policy: InWordPolicy): boolean {
    const key = first * 0x110000 + mark;
    let v = this.repeatedMarks.get(key);
    if (v === undefined) {
      const f = String.fromCodePoint(first);
      const m = String.fromCodePoint(mark);
      const own = (c: string) => c.normalize("NFD") === c && c.normalize("NFKD") === c;
      const two = this.segmentSymbols(f + m + m, policy);
      const three = this.segmentSymbols(f + m + m + m, policy);
      v =
        own(f) && own(m) && normalFormBoundary(f) && !normalFormStarter(m) && this.normalizeChar(m) === m &&
        two !== null && three !== null && three.length === two.length + 1 && three[two.length] === mark && two.every((c, k) => three[k] === c);
      if (this.repeatedMarks.size > 4096) this.repeatedMarks.clear();
      this.repeatedMarks.set(key, v);
    }
    return v;
  }
  private readonly repeatedMarks = new Map<number, boolean>();
  private segmentsNew = 0;

  /**
   * unigramWord of a word with marks under Precompiled (clusters.ts, precompiledWord): the normalised text unit by
   * unit; `at` is -1 at the positions no prefix may end at (inside a unit). Null where a normalised character is
   * whitespace or the marker (the pre-tokenizer would split there), or an added token is spelled with the word's
   * characters.
   */
  private clusterWord(text: string, start: number, end: number, policy: InWordPolicy, markerCp: number): UnigramWord | null {
    const word = this.clusterSymbols(text, start, end, policy, markerCp);
    const path = word && unigramWordPath(word.symbols, policy.unigram!.vocab, markerCp);
    return path ? { start, end, path, at: word.at, symbols: word.symbols, marker: markerCp } : null;
  }

  /**
   * The Unigram pre-token of text [start, end) with marks under Precompiled (the marker first where `markerCp` >= 0),
   * `end` a certain cluster boundary or the word's end: clusterWord.
   */
  private clusterSymbols(text: string, start: number, end: number, policy: InWordPolicy, markerCp: number, limit?: number): { symbols: Int32Array; at: Int32Array; end: number } | null {
    const word = precompiledWord(text, start, end, this.normalizeCodePoint, this.normalizeUnit, undefined, limit);
    if (!word) return null;
    end = word.end;
    const m = markerCp >= 0 ? 1 : 0;
    const symbols = new Int32Array(m + word.n);
    const at = new Int32Array(m + word.n + 1);
    at[0] = start;
    if (m) symbols[0] = markerCp;
    const seen = (this.seen ??= new Int32Array(0x110000));
    const stamp = ++this.seenStamp;
    for (let k = 0; k < word.n; k++) {
      const cp = word.symbols[k]!;
      if (seen[cp] !== stamp) {
        if (cp === markerCp || isWhitespace(cp)) return null;
        seen[cp] = stamp;
      }
    }
    symbols.set(word.symbols.subarray(0, word.n), m);
    at.set(word.at.subarray(0, word.n + 1), m);
    // added tokens are matched in the raw or the normalised text before the model: one spelled with the word's
    // characters (raw or normalised) could lie inside it
    // a part of the word (limit): also the characters an added token over its end could reach, raw and normalised
    const reach = limit === undefined ? end : Math.min(text.length, end + policy.added.reduce((m, t) => Math.max(m, t.length), 0));
    for (let i = start; i < reach; ) {
      const cp = text.codePointAt(i)!;
      seen[cp] = stamp;
      if (i >= end) for (const c of this.normalizeCodePoint(cp)) seen[c.codePointAt(0)!] = stamp;
      i += cp > 0xffff ? 2 : 1;
    }
    for (const c of reach > end ? this.normalizeUnit(text.slice(end, reach)) : "") seen[c.codePointAt(0)!] = stamp;
    for (const t of policy.added) if (t.length > 0 && [...t].every((ch) => seen[ch.codePointAt(0)!] === stamp)) return null;
    return { symbols, at, end };
  }

  /**
   * The first `need` or more content ids of a text whose long word around `from` holds marks, under Precompiled: the
   * Unigram replica on the word's first part only (unigram.ts, unigramFirstTokens: the part's paths meet where the
   * whole word's path goes), a part that ends where a prefix may end (clusters.ts), 4x longer while too few
   * tokens are known; the binding tokenizes the text up to the end of the `need`-th token (or a later one where a
   * prefix may end: clusterWord) and its last ids must be the replica's, else null (and null once the part would be
   * the whole word: unigramPrefix).
   */
  private async clusterPrefix(text: string, from: number, need: number, policy: InWordPolicy, words: boolean): Promise<Content | null> {
    if (!policy.clusters || !policy.unigram) return null;
    const { vocab, marker } = policy.unigram;
    const start = text.lastIndexOf(" ", from - 1) + 1;
    let end = text.indexOf(" ", from);
    if (end < 0) end = text.length;
    const markerCp = marker.marker === null ? -1 : marker.marker.codePointAt(0)!;
    const withMarker = markerCp >= 0 && (start === 0 ? marker.atStart : marker.afterSpace);
    for (let span = Math.max(4096, need * 16); start + span < end; span *= 4) {
      // the part ends where a prefix may end (clusters.ts), the first such position span characters in
      const part = this.clusterSymbols(text, start, end, policy, withMarker ? markerCp : -1, start + span);
      if (!part || part.end >= end) return null;
      const path = unigramFirstTokens(part.symbols, vocab, withMarker ? markerCp : -1);
      if (!path) continue;
      // the paths meet, but hardly a token is known (the word is one unknown token so far): the whole word's replica
      if (path.ids.length <= 1) return null;
      let k = Math.max(need, 2);
      while (k <= path.ends.length && part.at[path.ends[k - 1]!]! < 0) k++;
      if (k > path.ends.length) continue;
      const cut = part.at[path.ends[k - 1]!]!;
      const encoding = await this.tokenizer.encode(text.slice(0, cut), null, CONTENT_ONLY);
      const got = encoding.getIds();
      if (!this.sameIds(got, got.length - k, path.ids, 0, k)) return null;
      return { ids: Int32Array.from(got), words: words ? encoding.getWordIds() : null, tokens: "some", end: cut };
    }
    return null;
  }

  /**
   * Under Precompiled alone (InWordPolicy.clusters): the first position at or after `from` (within 65,536 characters)
   * where a prefix normalises as the whole text does (clusters.ts: a certain cluster boundary, or 6 bytes or more into
   * a known cluster) and its normalised text ends with whitespace (ZWJ inside an emoji sequence becomes a space), or
   * -1. The whole text's pre-tokens (WhitespaceSplit, Metaspace) before that whitespace are the prefix's, so the
   * prefix's tokens are all the whole text's first ones, as at a space; no added token may lie across it (each has a
   * character that is not within its length of the position, raw or normalised).
   */
  private spaceInWordCut(text: string, from: number, policy: InWordPolicy): number {
    // the walk starts at a certain cluster boundary
    let a = from;
    for (let steps = 0; a < text.length && !clusterBoundary(text, a); steps++) {
      if (steps >= 256) return -1;
      a += text.codePointAt(a)! > 0xffff ? 2 : 1;
    }
    const end = Math.min(text.length, a + 65_536);
    const word = precompiledWord(text, a, end, this.normalizeCodePoint, this.normalizeUnit, undefined, a + 1, true);
    if (!word || word.end >= end) return -1;
    const c = word.end;
    return this.addedAcross(text, c, policy) ? -1 : c;
  }

  /**
   * Whether an added token might lie across position c (spaceInWordCut, spaceInWordSuffixCut): one spelled only with
   * the characters within its length of c, raw or normalised.
   */
  private addedAcross(text: string, c: number, policy: InWordPolicy): boolean {
    const reach = policy.added.reduce((m, t) => Math.max(m, t.length), 0);
    const around = text.slice(Math.max(0, c - reach), c + reach);
    const near = new Set([...around, ...this.normalizeUnit(around)]);
    return policy.added.some((t) => t.length > 0 && [...t].every((ch) => near.has(ch)));
  }

  /**
   * Under Precompiled alone (InWordPolicy.clusters): the last position at or before `from` (within 65,536 characters)
   * right after a character the map turns into a text ending with U+0020 (ZWJ inside an emoji sequence) where the
   * suffix normalises alone as the whole text does after that space (clusters.ts spaceSuffixStart), or -1. The whole
   * text's pre-tokens (WhitespaceSplit, Metaspace) after that space are the suffix's, the first one with the same
   * marker where the pre-tokenizer gives a text's first word the marker it gives a word after a space (WordMarker:
   * atStart and afterSpace agree), so the suffix's tokens are all the whole text's last ones; no added token may lie
   * across the position (each has a character that is not within its length of it, raw or normalised).
   */
  private spaceInWordSuffixCut(text: string, from: number, policy: InWordPolicy): number {
    const marker = policy.unigram?.marker;
    if (!marker || marker.atStart !== marker.afterSpace) return -1;
    const low = Math.max(1, from - 65_536);
    for (let c = Math.min(from, text.length - 1); c >= low; c--) {
      const unit = text.charCodeAt(c - 1);
      // c - 1 is the low half of a pair: the code point begins one before
      const cp = unit >= 0xdc00 && unit <= 0xdfff && c >= 2 ? text.codePointAt(c - 2)! : unit;
      const after = text.charCodeAt(c);
      if (after >= 0xdc00 && after <= 0xdfff) continue;
      const z = this.normalizeCodePoint(cp);
      if (z.length === 0 || z.charCodeAt(z.length - 1) !== 0x20 || !spaceSuffixStart(text, c, this.normalizeCodePoint)) continue;
      if (!this.addedAcross(text, c, policy)) return c;
    }
    return -1;
  }

  /** Whether one of the 256 characters from `from` is no window character (a mark: clusterPrefix). */
  private unitCharNear(text: string, from: number, policy: InWordPolicy): boolean {
    const symbolOf = (this.wordSymbols ??= new Int32Array(0x110000));
    for (let i = from, k = 0; i < text.length && k < 256; k++) {
      const cp = text.codePointAt(i)!;
      let v = symbolOf[cp]!;
      if (v === 0) v = this.wordSymbolOf(cp, policy);
      if (v < 0 && cp !== 32) return true;
      i += cp > 0xffff ? 2 : 1;
    }
    return false;
  }

  /** normalizeChar by code point (cached in an array). */
  private readonly normalizeCodePoint = (cp: number): string => {
    let v = this.normalizedCp[cp];
    if (v === undefined) this.normalizedCp[cp] = v = this.normalizeChar(String.fromCodePoint(cp));
    return v;
  };
  private readonly normalizedCp: string[] = [];

  /** The library's normaliser on the characters between two certain cluster boundaries (cached by the text). */
  private readonly normalizeUnit = (unit: string): string => {
    let v = this.normalizedUnits.get(unit);
    if (v === undefined) {
      const n = this.tokenizer.getNormalizer();
      v = n === null ? unit : n.normalizeString(unit);
      if (this.normalizedUnits.size > 65_536) this.normalizedUnits.clear();
      this.normalizedUnits.set(unit, v);
    }
    return v;
  };
  private readonly normalizedUnits = new Map<string, string>();
  private seen: Int32Array | null = null;
  private seenStamp = 0;

  /** Fills the cache of wordSymbol by code point (0 not yet known, -1 not a window character, else the symbol + 1). */
  private wordSymbolOf(cp: number, policy: InWordPolicy): number {
    const ch = String.fromCodePoint(cp);
    const s = wordSymbol(ch, this.normalizeChar(ch), policy);
    return (this.wordSymbols![cp] = s < 0 ? -1 : s + 1);
  }
  private wordSymbols: Int32Array | null = null;

  /**
   * The first `need` or more content ids of a text whose long Unigram word around `from` the replica covers: the
   * binding tokenizes the text up to the end of the word path's `need`-th token (the tokens of a prefix ending at a
   * boundary of the whole word's best path are the whole word's first ones: prefix.ts, InWordPolicy), and its last
   * ids must be the replica's, else null.
   */
  private async unigramPrefix(text: string, from: number, need: number, policy: InWordPolicy, words: boolean): Promise<Content | null> {
    const word = this.unigramWord(text, from, policy);
    if (!word) return null;
    const { ends, ids } = word.path;
    // at least two tokens, so that the cut is past a lone marker token; a word with marks: up to a token end where a
    // prefix may end (clusterWord)
    let k = Math.max(need, 2);
    while (k < ends.length && word.at[ends[k - 1]!]! < 0) k++;
    if (ends.length <= k) {
      // a word that starts the text with fewer tokens than needed (t5's one unknown token for a Thai word): all of them
      if (word.start !== 0) return null;
      const all = await this.unigramSuffix(text, from, need, policy);
      return all?.tokens === "whole" ? all : null;
    }
    const encoding = await this.tokenizer.encode(text.slice(0, word.at[ends[k - 1]!]!), null, CONTENT_ONLY);
    const got = encoding.getIds();
    if (!this.sameIds(got, got.length - k, ids, 0, k)) return null;
    // the word goes on past the last token (a lower bound for pairs' countedLength)
    return { ids: Int32Array.from(got), words: words ? encoding.getWordIds() : null, tokens: "some", end: word.at[ends[k - 1]!]! };
  }

  /**
   * The last `need` or more content ids of a text whose last long word (around `from`) the replica covers: the
   * word's whole path, then the binding's ids of the text after it (from the space after the word: a left cut,
   * cutAtOrBefore). The binding tokenizes the word's first few hundred characters (to a boundary of the path, from
   * the space before the word so that its marker is the whole text's) and must give the path's first ids, else null.
   */
  private async unigramSuffix(text: string, from: number, need: number, policy: InWordPolicy): Promise<Content | null> {
    const word = this.unigramWord(text, from, policy);
    if (!word) return null;
    const { ends, ids } = word.path;
    let k = 1;
    while (k < ends.length && (word.at[ends[k - 1]!]! < 0 || word.at[ends[k - 1]!]! - word.start < 256)) k++;
    // the first tokens reach far (t5's one unknown token for a whole Thai word): the replica is checked on the word's
    // first few hundred characters alone instead (to a position where a prefix may end), all their ids
    let q = ends[k - 1]!;
    let expected: ArrayLike<number> = ids;
    if (word.at[q]! - word.start > 4096) {
      q = 1;
      while (q < word.symbols.length && (word.at[q]! < 0 || word.at[q]! - word.start < 256)) q++;
      const part = unigramWordPath(word.symbols.subarray(0, q), policy.unigram!.vocab, word.marker);
      if (!part) return null;
      expected = part.ids;
      k = part.ids.length;
    }
    const [check, after] = await Promise.all([
      this.tokenizer.encode(text.slice(Math.max(0, word.start - 1), word.at[q]!), null, CONTENT_ONLY),
      word.end < text.length ? this.tokenizer.encode(text.slice(word.end), null, CONTENT_ONLY) : null,
    ]);
    const got = check.getIds();
    if (!this.sameIds(got, 0, expected, 0, k, got.length === k)) return null;
    const tail = after ? after.getIds() : [];
    // fewer tokens than needed are all of the text's when the word starts it
    if (word.start > 0 && ids.length + tail.length < need) return null;
    const out = new Int32Array(ids.length + tail.length);
    out.set(ids, 0);
    out.set(tail, ids.length);
    // every token of the text when the word starts it
    return word.start === 0 ? { ids: out, words: null, tokens: "whole" } : { ids: out, words: null };
  }

  /** Whether a[i..i+n) equals b[j..j+n) (and `also` holds), counted in wordPathChecks. */
  private sameIds(a: ArrayLike<number>, i: number, b: ArrayLike<number>, j: number, n: number, also = true): boolean {
    let same = also && i >= 0;
    for (let x = 0; same && x < n; x++) same = a[i + x] === b[j + x];
    if (same) this.wordPathChecks.same++;
    else this.wordPathChecks.differ++;
    return same;
  }

  /** bertWordChar of a code point (cached: 0 not yet known, 1 yes, 2 no). */
  private readonly isWordChar = (cp: number): boolean => {
    this.wordChars ??= new Uint8Array(0x110000);
    let v = this.wordChars[cp]!;
    if (v === 0) {
      const ch = String.fromCodePoint(cp);
      v = bertWordChar(ch, () => this.normalizeChar(ch)) ? 1 : 2;
      this.wordChars[cp] = v;
    }
    return v === 1;
  };
  private wordChars: Uint8Array | null = null;

  /**
   * Whether the normaliser drops a code point (prefix.ts, shortenDroppedRuns): it makes nothing of it alone, no
   * raw-matched added token holds it, and three of it between letters, at the start and at the end normalise as
   * nothing does (a check of the argument with the library); droppedKind says which rule shortens it. Cached: the
   * kind + 1, 0 not yet known.
   */
  private readonly isDropped = (cp: number): Dropped => {
    this.droppedChars ??= new Uint8Array(0x110000);
    let v = this.droppedChars[cp]!;
    if (v === 0) {
      const ch = String.fromCodePoint(cp);
      const n = this.tokenizer.getNormalizer();
      const norm = (s: string) => (n === null ? s : n.normalizeString(s));
      const run = ch.repeat(3);
      const yes =
        this.normalizeChar(ch) === "" &&
        !this.cuts!.dropped!.some((t) => t.includes(ch)) &&
        norm("x" + run + "y") === norm("xy") &&
        norm(run + "y") === norm("y") &&
        norm("x" + run) === norm("x");
      // a non-starter to the library's NFD (the one its BertNormalizer and NFD normaliser use): moved before U+0345
      const nonStarter = yes && (this.nfd ??= nfdNormalizer()).normalizeString("\u0345" + ch) === ch + "\u0345";
      v = droppedKind(ch, yes, nonStarter) + 1;
      this.droppedChars[cp] = v;
    }
    return (v - 1) as Dropped;
  };
  private droppedChars: Uint8Array | null = null;

  /**
   * WordPiece runs of any script may be shortened: the pipeline is BERT's and every added token has a splitting
   * character (neither a word character nor one that a run goes on through: inWordRun).
   */
  private get anyScriptWords(): boolean {
    const added = this.cuts?.anyScriptWords;
    return !!added && added.every((c) => [...c].some((ch) => !this.isWordChar(ch.codePointAt(0)!) && !this.inWordRun(ch.codePointAt(0)!)));
  }

  /** Whether a run of word characters goes on through a code point (shortenWordRuns): the normaliser drops it (isDropped). */
  private readonly inWordRun = (cp: number): boolean => this.cuts?.dropped != null && this.isDropped(cp) !== 0;

  /** What a code point is to the unknown-character cuts (prefix.ts, charKind; cached by code point). */
  private readonly charKind = (cp: number): CharKind => {
    this.charKinds ??= new Uint8Array(0x110000);
    const cached = this.charKinds[cp]!;
    if (cached !== 0) return CHAR_KINDS[cached - 1]!;
    const policy = this.cuts!.inWord!;
    if (!this.vocabChars) {
      // every code point of a vocabulary piece
      const text = policy.tokenText();
      this.vocabChars = new Uint8Array(0x110000);
      for (let i = 0; i < text.length; i++) {
        const c = text.codePointAt(i)!;
        this.vocabChars[c] = 1;
        if (c > 0xffff) i++;
      }
    }
    const inVocab = this.vocabChars;
    const v = charKind(String.fromCodePoint(cp), policy, this.normalizeChar, (n) => inVocab[n.codePointAt(0)!] !== 1);
    this.charKinds[cp] = CHAR_KINDS.indexOf(v) + 1;
    return v;
  };
  private charKinds: Uint8Array | null = null;
  private vocabChars: Uint8Array | null = null;

  /** What a code point is to normalFormUnknownTail (prefix.ts, tailChar; cached by code point: the kind + 1). */
  private readonly tailChar = (cp: number): TailChar => {
    this.tailChars ??= new Uint8Array(0x110000);
    const cached = this.tailChars[cp]!;
    if (cached !== 0) return (cached - 1) as TailChar;
    this.charKind(cp);
    const inVocab = this.vocabChars!;
    const policy = this.cuts!.inWord!;
    const ch = String.fromCodePoint(cp);
    const v = tailChar(ch, this.normalizeChar(ch), policy.composes!, policy, (c) => inVocab[c.codePointAt(0)!] !== 1);
    this.tailChars[cp] = v + 1;
    return v;
  };
  private tailChars: Uint8Array | null = null;

  /** What the tokenizer's normaliser makes of one character alone (cached; windows are built from these). */
  private readonly normalizeChar = (ch: string): string => {
    let v = this.normalized.get(ch);
    if (v === undefined) {
      const n = this.tokenizer.getNormalizer();
      v = n === null ? ch : n.normalizeString(ch);
      this.normalized.set(ch, v);
    }
    return v;
  };
  private readonly normalized = new Map<string, string>();

  /**
   * What long texts' whitespace allows (prefix.ts, whitespaceRules), found with the library's normaliser and
   * pre-tokenizer on the first long text (30-50 ms); its space cuts after whitespace go into the cut policy.
   */
  private whitespace(cuts: CutPolicy): WhitespaceRules {
    if (!cuts.whitespace) return NO_WHITESPACE_RULES;
    if (!this.whitespaceFound) {
      const normalizer = this.tokenizer.getNormalizer();
      this.preTokenizer ??= this.tokenizer.getPreTokenizer();
      const pre = this.preTokenizer;
      this.whitespaceFound = whitespaceRules(
        cuts.whitespace,
        (s) => (normalizer === null ? s : normalizer.normalizeString(s)),
        (s) => (pre === null ? [s] : pre.preTokenizeString(s).map(([piece]) => piece)),
      );
      cuts.afterWhitespace = this.whitespaceFound.after;
      cuts.separators = this.whitespaceFound.before;
      cuts.separatorLeads = this.whitespaceFound.leads;
    }
    return this.whitespaceFound;
  }
  private whitespaceFound: WhitespaceRules | null = null;

  /** How many pre-tokens the tokenizer's pre-tokenizer makes of a few (normalised) characters (prefix.ts, PieceCount). */
  private readonly pieces = (s: string): number => {
    let v = this.pieceCounts.get(s);
    if (v === undefined) {
      this.preTokenizer ??= this.tokenizer.getPreTokenizer();
      v = this.preTokenizer === null ? 1 : this.preTokenizer.preTokenizeString(s).length;
      if (this.pieceCounts.size > 65536) this.pieceCounts.clear();
      this.pieceCounts.set(s, v);
    }
    return v;
  };
  private readonly pieceCounts = new Map<string, number>();
  private preTokenizer: PreTokenizer | null | undefined;

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
    if (!firsts) {
      const { prefix, suffix } = this.template.single;
      const room = this.maxLength - prefix.length - suffix.length;
      // One token past the room tells a text that fits from one that was cut (its first or last tokens).
      const contents = await this.contents(texts, room + 1, false, options.direction ?? "right");
      return contents.map((c) => this.single(c, options.direction ?? "right"));
    }
    if (firsts.length !== texts.length) throw new Error(`a pair batch needs one first text per text: ${firsts.length} firsts, ${texts.length} texts`);
    const t = this.template.pair;
    const budget = this.maxLength - t.prefix.length - t.middle.length - t.suffix.length;
    // Which side gets the odd token of a halved budget depends on the lengths the library compares, which are not
    // the full lengths: each sequence counts up to the end of the word (pre-token) in which its count reaches the
    // whole max length (measured with 0.23: all 60 fuzzed pairs per tokenizer agree, where full lengths agreed on
    // 38-46), except around added tokens at that point (1-2 of 60 on 5 of 20 tokenizers). Counting that far is enough,
    // but for a member cut inside a long word (its count is then only a lower bound: pairLengths).
    const both = await this.contents([...firsts, ...texts], this.maxLength, true);
    const n = texts.length;
    const out: Encoded[] = new Array(n);
    const undecided: Promise<void>[] = [];
    for (let i = 0; i < n; i++) {
      const lengths = pairLengths(both[i]!, both[n + i]!, this.maxLength, budget);
      if (lengths) out[i] = this.pair(both[i]!, both[n + i]!, lengths);
      else undecided.push(this.decidePair(firsts[i]!, texts[i]!, both[i]!, both[n + i]!, budget).then(([a, b, kept]) => void (out[i] = this.pair(a, b, kept))));
    }
    await Promise.all(undecided);
    return out;
  }

  /**
   * A pair whose counted lengths pairLengths cannot decide (an odd budget, whose odd token goes to the longer member:
   * a member cut inside a long word, whose count is a lower bound not past the other's exact count; or both cut
   * inside long words): both counted exactly where both are bounded (countedExactly), the bounded member tokenized
   * past the other's count where only one is, else both whole (exact, as slow as the library).
   */
  private async decidePair(first: string, second: string, a: Content, b: Content, budget: number): Promise<[Content, Content, [number, number]]> {
    const ca = countedLength(a, this.maxLength);
    const cb = countedLength(b, this.maxLength);
    if (ca?.atLeast && cb?.atLeast) {
      // both cut inside long words (an odd budget's odd token goes to the longer): the same text twice has equal
      // counts (the first is the shorter), else their counts made exact
      const [xa, xb] = first === second ? [ca.n, ca.n] : await Promise.all([this.countedExactly(a), this.countedExactly(b)]);
      if (xa !== null && xb !== null) {
        this.pairDecisions.counted++;
        return [a, b, longestFirst(xa, xb, budget)];
      }
      this.pairDecisions.whole++;
    }
    if (ca && cb && ca.atLeast !== cb.atLeast) {
      const [more] = await this.contents([ca.atLeast ? first : second], (ca.atLeast ? cb : ca).n + 1, true);
      const [x, y] = ca.atLeast ? [more!, b] : [a, more!];
      const lengths = pairLengths(x, y, this.maxLength, budget);
      if (lengths) return [x, y, lengths];
    }
    const [x, y] = await this.contents([first, second], Infinity, true);
    return [x!, y!, pairLengths(x!, y!, this.maxLength, budget)!];
  }

  /**
   * The length the Rust library compares when it truncates a pair with this text as a member (countedLength): exact,
   * or (atLeast) a lower bound where even countedExactly cannot count it without tokenizing the text whole.
   */
  async pairMemberLength(text: string): Promise<Counted> {
    const [c] = await this.contents([text], this.maxLength, true);
    const counted = countedLength(c!, this.maxLength)!;
    if (!counted.atLeast) return counted;
    const n = await this.countedExactly(c!);
    return n === null ? counted : { n, atLeast: false };
  }

  /**
   * Pairs whose members were both cut inside long words with an odd budget: `counted`, decided by their exact counts
   * (countedExactly); `whole`, where one could not be counted so (then tokenized whole).
   */
  readonly pairDecisions = { counted: 0, whole: 0 };

  /**
   * The length the library compares for a pair member whose first ids end inside a long word (countedLength's
   * lower bound, made exact): the tokens up to the end of that word, or null where that cannot be had without
   * tokenizing the text whole (then the caller does). The word holding the max-th token is the one the ids end in
   * (countedLength gave a bound), and its characters from there on are window characters (InWordPolicy):
   * - Unigram behind Metaspace (InWordPolicy.unigram): the replica's path of the whole word (unigram.ts) after the
   *   ids of the words before it; the ids held inside the word must be the path's first ones (wordPathChecks);
   * - byte-level BPE whose suffixes have the whole word's last tokens (InWordPolicy.suffixes, no ignore_merges): the
   *   ids held, which end at a boundary of the whole word's tokens, and the tokens of the rest of the word
   *   (bpeRunCount), where the word ends at the text's end or at a cut (a pre-token boundary: cutAtOrAfter);
   * - other kinds: null (WordPiece turns a long word into one [UNK], so its members are never cut inside a word).
   */
  private async countedExactly(c: Content): Promise<number | null> {
    const policy = this.cuts?.inWord;
    const text = c.text;
    if (!policy || text === undefined || c.end === undefined || c.end <= 0 || !c.words || c.tokens !== "some") return null;
    if (policy.unigram) return this.unigramCounted(text, c, policy);
    if (policy.model !== "bpe-bytes" || !policy.suffixes || policy.ignoreMerges) return null;
    const run = this.windowRun(text, c.end, policy);
    if (!run || (run.end < text.length && cutAtOrAfter(text, run.end, this.cuts!, this.normalizeChar, this.pieces, run.end + 1) !== run.end)) return null;
    const rest = await this.bpeRunCount(text, c.end, run, policy);
    return rest === null ? null : c.ids.length + rest;
  }

  /**
   * The end of the run of window characters from the character before `from` (which the held ids' last token
   * covers) on, and whether it holds astral characters; null when those characters could leave one pre-token
   * (windowRunChars).
   */
  private windowRun(text: string, from: number, policy: InWordPolicy): { end: number; astral: boolean; ascii: boolean; chars: Set<string> } | null {
    const symbolOf = (this.wordSymbols ??= new Int32Array(0x110000));
    const seen = (this.seen ??= new Int32Array(0x110000));
    const stamp = ++this.seenStamp;
    const chars = new Set<string>();
    let astral = false;
    let ascii = true;
    const low = text.charCodeAt(from - 1);
    let i = from >= 2 && low >= 0xdc00 && low <= 0xdfff ? from - 2 : from - 1;
    for (; i < text.length; ) {
      const cp = text.codePointAt(i)!;
      let v = symbolOf[cp]!;
      if (v === 0) v = this.wordSymbolOf(cp, policy);
      if (v < 0) break;
      if (seen[cp] !== stamp) {
        seen[cp] = stamp;
        chars.add(String.fromCodePoint(cp)).add(String.fromCodePoint(v - 1));
        // printable ASCII after the normaliser: one byte, byte-level BPE's symbol is the character itself
        if (v - 1 < 0x21 || v - 1 > 0x7e) ascii = false;
      }
      if (cp > 0xffff) astral = true;
      i += cp > 0xffff ? 2 : 1;
    }
    return i > from && windowRunChars(chars, policy, this.pieces) ? { end: i, astral, ascii: ascii && !astral, chars } : null;
  }

  /**
   * How many tokens byte-level BPE gives text[from, end): the rest of one pre-token (windowRun), `from` a boundary
   * of its tokens, `end` its end; null where the run cannot be split (it is then counted whole by the caller).
   * A boundary of a BPE word's tokens splits it: the tokens left of it are the left part's alone (tokenized without
   * an end-of-word suffix: prefixTokenizer) and those right of it the right part's alone (runSuffix says why; the
   * parts are pre-tokens of their own with the same symbols: InWordPolicy.suffixes). So boundaries z1 < ... < zk of
   * the word's tokens cut it into parts tokenized alone, in one batch, whose counts add up. A boundary near a point
   * r: the word's tokens have a boundary qA among the W positions of a window A at r and qB among those of a window
   * B a little further (wordPrefixWindow), and the segment [qA, qB) tokenized alone has exactly the word's tokens
   * there (two splits). Every segment [x, y), x in A, y in B, is tokenized (W x W short texts): a position z between
   * the windows where each of them has a token boundary (between two characters: the token before ends at z and the
   * one after starts there) is one of [qA, qB)'s, so one of the word's. A run of one ASCII character has no such z
   * (its tokens shift with the segment's start): its period counts it (runPeriod).
   */
  private async bpeRunCount(text: string, from: number, run: { end: number; astral: boolean; ascii: boolean; chars: Set<string> }, policy: InWordPolicy): Promise<number | null> {
    const { end, astral } = run;
    // the longest vocabulary token spelled with the run's characters (tokenWindow)
    const longest = run.ascii ? longestRunFrom(policy, run.chars, 1) : 0;
    const ch = text[from]!;
    if (ch.charCodeAt(0) < 0x80 && text.startsWith(ch.repeat(Math.min(64, end - from)), from) && isRun(text, from, end)) {
      // T(c^n) = [token] + T(c^(n - q)) for n >= n1 (runPeriod): n = k q + r, r < n1
      const period = await this.runPeriod(ch, policy, this.cuts!);
      if (!period) return null;
      const { q, n1 } = period;
      const n = end - from;
      const k = n < n1 ? 0 : Math.ceil((n - n1 + 1) / q);
      return k + (await this.tokenizer.encode(ch.repeat(n - k * q), null, CONTENT_ONLY)).getLength();
    }
    // targets every RUN_CHUNK_CHARS characters, the last part at least half a chunk; each tried with the gaps in turn
    let targets: number[] = [];
    for (let r = from + RUN_CHUNK_CHARS; r + RUN_CHUNK_CHARS / 2 < end; r += RUN_CHUNK_CHARS) targets.push(r);
    const cuts = [from];
    for (const gap of RUN_PROOF_GAPS) {
      const windows: Array<{ r: number; xs: number[]; ys: number[] }> = [];
      for (const r of targets) {
        if (run.ascii) {
          const xs = this.tokenWindow(text, r, longest, policy);
          const ys = this.tokenWindow(text, xs[xs.length - 1]! + gap, longest, policy);
          if (ys[ys.length - 1]! + 2 * longest < end) windows.push({ r, xs, ys });
          continue;
        }
        const a = this.window(text, r, policy);
        const b = a && this.window(text, a.ends[a.ends.length - 1]! + gap, policy);
        if (a && b && b.ends[b.ends.length - 1]! < end) windows.push({ r, xs: a.ends, ys: b.ends });
      }
      const segments: Array<[number, number]> = [];
      for (const { xs, ys } of windows) for (const x of xs) for (const y of ys) segments.push([x, y]);
      const encodings = segments.length ? await this.prefixTokenizer.encodeBatch(segments.map(([x, y]) => text.slice(x, y)), CONTENT_ONLY) : [];
      const failed: number[] = [];
      let base = 0;
      for (const { r, xs, ys } of windows) {
        const lo = xs[xs.length - 1]!;
        const hi = ys[0]!;
        let common: number[] | null = null;
        for (let k = 0; k < xs.length * ys.length && common?.length !== 0; k++) {
          const x = segments[base + k]![0];
          const off = encodings[base + k]!.getOffsets();
          const here: number[] = [];
          for (let t = 1; t < off.length; t++) {
            if (off[t - 1]![1] !== off[t]![0]) continue;
            const z = astral ? codePointIndex(text, x, off[t]![0]!) : x + off[t]![0]!;
            if (z > lo && z < hi && (common === null || common.includes(z))) here.push(z);
          }
          common = here;
        }
        base += xs.length * ys.length;
        if (common && common.length > 0) cuts.push(common[0]!);
        else failed.push(r);
      }
      targets = failed.concat(targets.filter((r) => !windows.some((w) => w.r === r)));
      if (targets.length === 0) break;
    }
    cuts.sort((x, y) => x - y);
    const parts = cuts.map((z, i) => text.slice(z, i + 1 < cuts.length ? cuts[i + 1] : end));
    const [inner, last] = await Promise.all([parts.length > 1 ? this.prefixTokenizer.encodeBatch(parts.slice(0, -1), CONTENT_ONLY) : [], this.tokenizer.encode(parts[parts.length - 1]!, null, CONTENT_ONLY)]);
    return inner.reduce((n, e) => n + e.getLength(), last.getLength());
  }

  /**
   * Positions c + 1 .. c + w of a run of printable ASCII symbols (windowRun: one character, one byte, one symbol; c
   * at least `longest` characters inside the run) among which the word's tokens have a boundary: the token holding
   * the character before c + 1 starts at some s <= c and ends at e >= c + 1, a vocabulary token spelled by the
   * normalised characters [s, e), at most `longest` long (the longest run of the run's characters in a vocabulary
   * token). So e is at most the furthest end R of such a spelling, and w = R - c. (The word's last token, which may
   * carry an end-of-word suffix, ends at the run's end, further away: bpeRunCount.) Usually a few positions, where
   * wordPrefixWindow's bound for every spelling of the characters gives ~16.
   */
  private tokenWindow(text: string, c: number, longest: number, policy: InWordPolicy): number[] {
    const vocab = (this.vocabulary ??= new Set(policy.tokenText().split(TOKEN_SEPARATOR)));
    const symbolOf = this.wordSymbols!;
    const base = c - longest + 1;
    const codes: number[] = [];
    for (let i = base; i < c + longest; i++) codes.push(symbolOf[text.charCodeAt(i)]! - 1);
    const spelled = String.fromCharCode(...codes);
    let reach = c + 1;
    for (let a = base; a <= c; a++) {
      for (let e = Math.max(reach + 1, c + 1); e <= a + longest; e++) if (vocab.has(spelled.slice(a - base, e - base))) reach = e;
    }
    return Array.from({ length: reach - c }, (_, k) => c + 1 + k);
  }
  private vocabulary: Set<string> | null = null;

  /**
   * countedExactly under Unigram: the ids held before the long word (their word ids differ from the last one's) and
   * the replica's path of the whole word, or null where the replica does not apply or disagrees with the ids held
   * inside the word.
   */
  private unigramCounted(text: string, c: Content, policy: InWordPolicy): number | null {
    const word = this.unigramWord(text, c.end! - 1, policy);
    if (!word || word.end < c.end!) return null;
    const last = c.words![c.ids.length - 1];
    if (last === null || last === undefined) return null;
    let first = c.ids.length - 1;
    while (first > 0 && c.words![first - 1] === last) first--;
    const inside = c.ids.length - first;
    if (!this.sameIds(c.ids, first, word.path.ids, 0, inside, inside <= word.path.ids.length)) return null;
    return first + word.path.ids.length;
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
    return c.tokens === "whole" ? { ids, typeIds: null, fullLength: full } : { ids, typeIds: null, fullLength: full, fullLengthAtLeast: true };
  }

  /** A pair with its members' kept lengths (pairLengths). */
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
    return first.tokens === "whole" && second.tokens === "whole" ? { ids, typeIds, fullLength: full } : { ids, typeIds, fullLength: full, fullLengthAtLeast: true };
  }
  /**
   * Every token of a text (not truncated) with its string, whether the post-processor added it, and its UTF-8 byte
   * offsets in the text (null for special tokens), as TEI's /tokenize reports them.
   */
  async tokens(text: string, addSpecialTokens: boolean): Promise<TokenInfo[]> {
    const enc = await this.tokenizer.encode(text, null, { addSpecialTokens });
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

/**
 * A long Unigram word (Encoder.unigramWord): UTF-16 [start, end) in the text, its pre-token's symbols (the marker
 * first where `marker` >= 0) and best path, and at[p] the UTF-16 index of the pre-token's position p (-1 where no
 * prefix may end: inside a unit of a word with marks, clusterWord).
 */
interface UnigramWord {
  start: number;
  end: number;
  path: WordPath;
  at: Int32Array;
  symbols: Int32Array;
  marker: number;
}

/** Periodic structure of a run of one character (Encoder.runPeriod). */
interface RunPeriod {
  token: number;
  q: number;
  n1: number;
}

/** Characters between the boundaries bpeRunCount cuts a long word at. */
const RUN_CHUNK_CHARS = 32768;
/** Characters between bpeRunCount's two windows around a boundary: tried in turn where no boundary is common. */
const RUN_PROOF_GAPS = [16, 64];

/** Whether text[from, end) is one character repeated. */
function isRun(text: string, from: number, end: number): boolean {
  const c = text.charCodeAt(from);
  for (let i = from + 1; i < end; i++) if (text.charCodeAt(i) !== c) return false;
  return true;
}

/** Longest unit (in code points) runUnit looks for. */
const RUN_UNIT_POINTS = 4;

/**
 * The run around `from` of one unit repeated: the shortest string u of 1..RUN_UNIT_POINTS code points starting at
 * `from` that the text repeats at least 8 times from there, and the run [start, end) of whole copies of u around
 * `from` (start: copies before it, back to where one no longer fits); null where there is none.
 */
function runUnit(text: string, from: number): { unit: string; start: number; end: number } | null {
  let len = 0;
  for (let k = 0; k < RUN_UNIT_POINTS && from + len < text.length; k++) {
    len += text.codePointAt(from + len)! > 0xffff ? 2 : 1;
    const unit = text.slice(from, from + len);
    let copies = 1;
    while (copies < 8 && text.startsWith(unit, from + copies * len)) copies++;
    if (copies < 8) continue;
    let start = from;
    while (start >= len && text.startsWith(unit, start - len)) start -= len;
    let end = from + copies * len;
    while (text.startsWith(unit, end)) end += len;
    return { unit, start, end };
  }
  return null;
}

/** Characters between the cut before a word and its run of one character that runSuffix tokenizes with the run. */
const RUN_LEAD_CHARS = 256;
/**
 * How far into a run of one unit in a word runSuffix and runPrefix look for the window of their lead: at its start,
 * else further in (prefixes shorter than the period's token, e.g. 16 zeros on GPT-2's vocabulary, share none).
 */
const RUN_LEAD_WINDOWS = [0, 64, 256] as const;
/** Length of the run runPeriod looks for its window in. */
const RUN_PERIOD_CHARS = 4096;

/**
 * Whether tokenizing the parts of a text that end (from = 0) or start (from = the text's length) at `at` costs less
 * than tokenizing the text whole (`length` characters): their characters together are fewer, or fewer than
 * WINDOW_CHARS_FREE (a few seconds at the library's slowest known rate, and no more than a text of that size costs
 * whole). A window found far into a long text whose words have few window characters (Thai with its vowel signs,
 * where the library takes 10 s a million characters) would otherwise tokenize several prefixes of most of the text.
 */
function cheaperThanWhole(at: readonly number[], from: number, length: number): boolean {
  let chars = 0;
  for (const e of at) chars += Math.abs(e - from);
  return chars < Math.max(length, WINDOW_CHARS_FREE);
}
const WINDOW_CHARS_FREE = 1 << 18;

/**
 * How many first tokens every encoding of a window's prefixes shares (same id, same offsets): those of the whole
 * text (prefix.ts, InWordPolicy).
 */
function commonFirstTokens(ids: number[][], offsets: number[][][]): number {
  let common = 0;
  for (;; common++) {
    const id = ids[0]![common];
    const at = offsets[0]![common];
    if (id === undefined || !ids.every((x, j) => x[common] === id && offsets[j]![common]![1] === at![1] && offsets[j]![common]![0] === at![0])) return common;
  }
}

/** The UTF-16 index in `text` of the code point `count` code points after UTF-16 index `from`. */
function codePointIndex(text: string, from: number, count: number): number {
  let i = from;
  for (let k = 0; k < count && i < text.length; k++) i += text.codePointAt(i)! > 0xffff ? 2 : 1;
  return i;
}

/** Code points in a string. */
function codePoints(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xdc00 && c <= 0xdfff) n--;
  }
  return n;
}

type WordIds = Array<number | null | undefined>;

/** The tokens common to the prefixes of a window in a run (runLeadEnd): where they end, their ids and word ids. */
interface RunLead {
  boundary: number;
  ids: number[];
  words: WordIds;
}

/**
 * Content ids of a text and, for pairs, the word (pre-token) each came from (null for added tokens). `tokens`: what
 * the ids are of the text's tokens: "whole", all of them; "word end", the first ones up to a word boundary of the
 * whole text (a cut); "some" (or absent), the first or last ones, possibly ending inside a word that goes on (an
 * in-word window): counts reaching their end are lower bounds.
 */
interface Content {
  ids: Int32Array;
  words: WordIds | null;
  tokens?: "whole" | "word end" | "some";
  /**
   * The first ids ("some") of a text cut inside a long word: the UTF-16 index where they end, a boundary of the whole
   * text's tokens between two characters (countedExactly goes on from there); absent where not known.
   */
  end?: number;
  /** The text `end` indexes (contents: the input after shortenings that keep its tokens). */
  text?: string;
}

function content(encoding: Encoding, words: boolean, tokens: "whole" | "word end"): Content {
  return { ids: Int32Array.from(encoding.getIds()), words: words ? encoding.getWordIds() : null, tokens };
}

/** A length the library compares, or (atLeast) a lower bound of it. */
export interface Counted {
  n: number;
  atLeast: boolean;
}

/**
 * The length the Rust library compares for longest-first: tokens up to the end of the word holding the max-th; a
 * lower bound (atLeast) when that word goes on past the ids held (cut inside it), null when the content cannot tell
 * (no word ids, or fewer ids than `max` of a text not held whole).
 */
function countedLength(c: Content, max: number): Counted | null {
  const n = c.ids.length;
  if (n <= max && c.tokens === "whole") return { n, atLeast: false };
  if (n < max || !c.words) return null;
  let k = max - 1;
  while (k + 1 < n && c.words[k + 1] !== null && c.words[k + 1] !== undefined && c.words[k + 1] === c.words[k]) k++;
  return k + 1 < n || c.tokens === "whole" || c.tokens === "word end" ? { n: k + 1, atLeast: false } : { n, atLeast: true };
}

/** The kept lengths of a pair's members (longestFirst of their counted lengths), or null when bounds leave it open. */
function pairLengths(a: Content, b: Content, max: number, budget: number): [number, number] | null {
  const ca = countedLength(a, max);
  const cb = countedLength(b, max);
  return ca && cb ? longestFirstBounded(ca, cb, budget) : null;
}

/**
 * longestFirst when either length may be a lower bound (the true value any number at least `n`): the kept lengths
 * when every value the bounds allow gives the same, else null.
 *
 * Why these conditions (B the budget, f = longestFirst). For n1 + n2 > B, f calls the member with the smaller length
 * the shorter (the first one on ties) and, with s its length: 2s <= B, the shorter keeps s and the longer gets B - s;
 * 2s > B, halves: floor(B/2) to the shorter, ceil(B/2) to the longer. For n1 + n2 <= B it keeps both.
 *
 * One bound (first a exact, second y >= b): for every y > max(a, B) the result is L = f(a, y): [a, B - a] for
 * 2a <= B, else [floor(B/2), ceil(B/2)]. Which y give L:
 * - y >= max(a, B - a): a is the shorter (ties: the first), the sum over B or at it (then y = B - a >= a, so
 *   [a, y] = [a, B - a] = L): L.
 * - y < B - a: both kept, [a, y]. For 2a <= B its second, y, is not B - a; for 2a > B its first, a, is over B/2.
 *   Not L.
 * - B - a <= y < a (so 2a > B, L the halves): the sum at B keeps [a, y], not L (a > B/2). Over B, y is the shorter:
 *   2y <= B gives [B - y, y], which is L only for y = B/2 with B even; 2y > B gives the halves with the odd token
 *   to the first, [ceil(B/2), floor(B/2)], L only for B even. So for B even every B/2 <= y < a gives L too.
 * Every y >= b gives L therefore exactly when b >= max(B - a, a) for an odd B, b >= max(B - a, B/2) for an even one
 * (for 2a <= B both are B - a; for 2a > B the even one is B/2, below a).
 *
 * One bound (first x >= a, second b exact): the same with the members' roles swapped, except that a tie now makes
 * the bounded member the shorter, so "x longer than b" needs x >= b + 1: decided exactly when a >= max(B - b, b + 1)
 * for an odd B, a >= max(B - b, B/2) for an even one (x = b <= B/2 with x + b >= B means x = b = B/2: [B/2, B/2], L).
 *
 * Both bounds: for an odd B, x = y and x = y + 1 (both large) give [floor(B/2), ceil(B/2)] and its reverse: never
 * decided. For an even B, holding x at a, every y >= b must give the same, which by the first case needs
 * b >= max(B - a, B/2) >= B/2, and likewise a >= B/2; and a, b >= B/2 suffice: the sum is at least B, at B both are
 * B/2; over B the shorter s >= B/2 keeps s = B/2 (the longer B/2) or takes the halves, [B/2, B/2] every time.
 *
 * A member cut inside a long word holds at least the max length >= B tokens, so in practice: an even budget always
 * decides; an odd one leaves open both bounded, and one bounded whose bound is not past the other's exact count
 * (the odd token of the halves goes to the longer: decidePair counts further).
 */
export function longestFirstBounded(a: Counted, b: Counted, budget: number): [number, number] | null {
  if (!a.atLeast && !b.atLeast) return longestFirst(a.n, b.n, budget);
  const even = budget % 2 === 0;
  if (a.atLeast && b.atLeast) return even && 2 * a.n >= budget && 2 * b.n >= budget ? [budget / 2, budget / 2] : null;
  const [exact, bound] = a.atLeast ? [b.n, a.n] : [a.n, b.n];
  // the bounded member must be the longer for every value (odd budget: it takes the odd token), or hold half (even)
  const longer = even ? budget / 2 : a.atLeast ? exact + 1 : exact;
  return bound >= Math.max(budget - exact, longer) ? longestFirst(a.n, b.n, budget) : null;
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
