// Where a long text may be cut so that tokenizing the part before the cut gives exactly the first tokens of the
// whole text. Only the first max-length tokens of an input are kept, and the Rust tokenizers spend ~1-4 us on every
// token they produce (normalisation alignments, token strings, offsets), so a 1,000,000-character input took 2-14 s
// whole; its first few thousand characters take milliseconds.
//
// A cut before a U+0020 space whose preceding character is not whitespace is a word boundary of the whole text for
// the pipelines accepted below, because each of their steps is local there:
// - normalizers map that space to a space and never look across it: Unicode normal forms (the space is a starter),
//   BERT's cleaning/lowercasing/accent stripping (per character), SentencePiece's precompiled maps (per grapheme
//   cluster; a cluster does not continue into a space unless the character before it is a Prepend character, which
//   is excluded), Lowercase, Strip/Prepend (only the text's ends), and Replace of whitespace runs by one space;
// - pre-tokenizers that split there: no word of BertPreTokenizer, Whitespace(Split), Metaspace (split), the GPT-2
//   byte-level regex or the CLIP / Llama-3 / Qwen split regexes holds a non-space character followed by a space
//   (whitespace as the library's regex engine counts it: U+0085 too, which `\s+(?!\S)` joins to the spaces after it);
// - models encode word by word (WordPiece, BPE, Unigram, WordLevel);
// - no added token match spans the cut (added tokens are matched in the raw text, then in the normalised pieces
//   between those matches, before everything else): one without whitespace cannot; one with whitespace (PyLate
//   ColBERT's "[Q] " and "[D] ") is looked for around each cut (addedSpans).
// With BERT's normaliser, which surrounds CJK ideographs with spaces, the position before an ideograph is a cut too,
// and under BertPreTokenizer, which isolates punctuation, the positions before and after a punctuation mark.
// Under the regex pre-tokenizers (GPT-2 byte-level, CLIP, Llama 3, Qwen2 / Qwen3) so is the position after a letter or
// number followed by a non-space character of another class, or after a number followed by a number where the
// pre-tokenizer puts each number alone (Qwen's `\p{N}`), each checked with the pre-tokenizer itself on the two
// characters (classCut: the library's Unicode tables, not JavaScript's, say what a letter is). The library splits a
// text at its added tokens before anything else, so the end of an added token's occurrence that overlaps no other
// one is a cut too (addedCut). The part from such a cut to the end has the whole text's last tokens where nothing is
// added at a text's start (cutAtOrBefore: TEI's truncation_direction "left").
// WordPiece turns a word longer than `max_input_chars_per_word` into one [UNK], so a run of word characters longer
// than that gives the same token whatever its length: such runs are shortened before tokenizing (any script behind
// BERT's pipeline, ASCII letters and digits behind the others). Inside one long word: InWordPolicy, and Unigram's
// unknown characters (unknownTail, unknownCut); where those find nothing (a Unigram word whose prefixes never agree,
// or cut on the left), the Unigram model replicated on the whole word (unigram.ts, InWordPolicy.unigram).
// Whitespace runs where the pipeline drops whitespace or its normaliser collapses a run into one space are shortened
// to their first and last character, and under Metaspace a space after whitespace that stays apart from spaces is a
// cut too (whitespaceRules, checked with the tokenizer's own normaliser and pre-tokenizer).
// Any other pipeline or input is tokenized whole (exact, only slower).

import type { UnigramVocab, WordMarker } from "./unigram";

type Json = Record<string, unknown> | null | undefined;

/**
 * Split regexes whose matches never hold a non-space character followed by a space (CLIP, GPT-2 family, Llama 3 /
 * GPT-4's cl100k, Qwen2 / Qwen2.5 / Qwen3: cl100k's with one number per piece).
 */
const SAFE_SPLIT_REGEXES = new Set([
  "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+",
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
]);

/** Grapheme-cluster Prepend characters (UAX #29): no cluster boundary after them, so no cut after them. */
const PREPEND = /[\u0600-\u0605\u06DD\u070F\u0890\u0891\u08E2\u0D4E\u{110BD}\u{110CD}\u{111C2}\u{111C3}\u{1193F}\u{11941}\u{11A3A}\u{11A84}-\u{11A89}\u{11D46}\u{11F02}]/u;
/**
 * Whitespace as the regexes of the Rust library (Oniguruma: Unicode White_Space) and Rust's char::is_whitespace count
 * it: JavaScript's \s leaves out U+0085 (NEL), which `\s+(?!\S)` joins to the spaces after it ("a\u0085  b":
 * "a", "\u0085 ", " b"), so a cut after it is no word boundary.
 */
const WHITESPACE = /[\s\u0085]/u;
/**
 * The characters the Rust library's `char::is_whitespace` and its regex engine's White_Space count (all in the BMP):
 * WHITESPACE without U+FEFF, which is whitespace to JavaScript's `\s` only.
 */
const RUST_WHITESPACE = "\t\n\v\f\r \u0085\u00A0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200A\u2028\u2029\u202F\u205F\u3000";
/** WHITESPACE by UTF-16 code unit (all of it is in the BMP). */
function isWhitespaceCode(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13) || c === 0x85 || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}
/** CJK ideographs BERT's normaliser surrounds with spaces (the BMP blocks; longer texts find plenty of these). */
const CJK_IDEOGRAPH = /[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF]/g;
const SPACE = / /g;
/** A space after a character that is not whitespace (WHITESPACE): runs of whitespace are skipped natively. */
const SPACE_AFTER_OTHER = /(?<![\s\u0085]) /g;

export interface CutPolicy {
  /** Cuts before ideographs as well as before spaces (BERT's normaliser isolates ideographs). */
  ideographs: boolean;
  /**
   * BertPreTokenizer isolates every punctuation character: cuts before and after one (punctuationCutAt). The added
   * tokens' contents, which must not hold the two characters around the cut; null: no such cuts.
   */
  punctuation: readonly string[] | null;
  /**
   * Cuts after a letter or number followed by a character of another class (a regex pre-tokenizer splits there:
   * classCut): the added tokens' contents, which must not hold the two characters around the cut; null: no such cuts.
   */
  classCuts: readonly string[] | null;
  /**
   * Class cuts may stand before whitespace other than U+0020 (classSpaceCutAt): no added token has rstrip, which would
   * take the whitespace after an occurrence.
   */
  classSpaceCuts: boolean;
  /**
   * Suffixes from a cut (cutAtOrBefore) have the whole text's last tokens: nothing is added at a text's start
   * (no Strip or Prepend normaliser; class cuts: no prefix space either) and no added token eats the space after it.
   */
  leftCuts: boolean;
  leftClassCuts: boolean;
  /**
   * Cuts after (right) or before (left) an added token's occurrence that overlaps no other added token's
   * occurrence (addedCut): the added tokens' contents when all are plain (matched in the raw text, no lstrip, rstrip
   * or single_word), else null.
   */
  addedCuts: readonly string[] | null;
  /** WordPiece's max_input_chars_per_word when ASCII runs may be shortened, else 0. */
  wordPieceMaxChars: number;
  /**
   * WordPiece behind BertPreTokenizer (and BertNormalizer or none): runs of any characters that stay inside one word
   * may be shortened (shortenWordRuns), not only ASCII ones. The added tokens' contents, which must each hold a
   * character outside such runs.
   */
  anyScriptWords: readonly string[] | null;
  /** How a long word (no cut point) may be cut inside (wordPrefixWindow), or null when it is tokenized whole. */
  inWord: InWordPolicy | null;
  /** Added tokens that contain whitespace, which a space or ideograph cut must not split (addedSpans), or null. */
  spaced: SpacedAdded | null;
  /**
   * Whitespace characters that a space cut may follow (WhitespaceRules.after), or null: only characters that are not
   * whitespace. Set by the Encoder from the library's own normaliser and pre-tokenizer (whitespaceRules).
   */
  afterWhitespace: ReadonlySet<string> | null;
  /**
   * Characters other than U+0020 before which a cut is as good as before a space (WhitespaceRules.before:
   * separatorCutAt), or null. Set by the Encoder from the library's own normaliser and pre-tokenizer.
   */
  separators: ReadonlySet<string> | null;
  /**
   * Which control and format characters may stand before a separator cut as a letter does (WhitespaceRules.leads:
   * separatorCutAt): true for one the normaliser keeps (U+00AD), false for one it drops (most C0 controls under
   * Precompiled), which the cut looks past, null for any other character. Null: none may. Set by the Encoder with
   * `separators`.
   */
  separatorLeads: SeparatorLeads | null;
  /**
   * The contents of the added tokens with lstrip (matched in the raw text), whose match takes the whitespace before
   * it, a whole run of it: a space cut inside a run (after whitespace: afterWhitespace) must not be followed by one
   * (lstripAfter); null where one is matched in the normalised text (no cut inside a run then).
   */
  lstripped: readonly string[] | null;
  /** How the pipeline treats whitespace, for whitespaceRules, or null. */
  whitespace: WhitespaceShape | null;
  /** Cuts inside runs of whitespace under byte-level BPE (spaceRunWindow), or null. */
  spaceRuns: SpaceRunPolicy | null;
  /**
   * A normaliser that works per character and may drop characters (BertNormalizer's cleaning and accent stripping,
   * StripAccents): the added tokens matched in the raw text, none of which may hold a dropped character
   * (shortenDroppedRuns), else null.
   */
  dropped: readonly string[] | null;
}

/**
 * Added tokens whose content holds whitespace (PyLate ColBERT's "[Q] " and "[D] "), none with lstrip, rstrip or
 * single_word: `raw`, those matched in the raw text (normalized: false); `normalized`, those matched in the
 * normalised pieces, whose pattern is the content normalised (the normaliser works per character: perCharNormalizer).
 */
export interface SpacedAdded {
  raw: readonly string[];
  normalized: readonly string[];
}

/**
 * Inside one long word. BPE and Unigram give the first tokens of a word's prefix exactly when the prefix ends at a
 * token boundary of the whole word:
 * - Unigram: the tokens of a prefix ending at q are the best path to q (Viterbi: each position's best path depends
 *   only on the characters before it, ties broken the same way), and the whole word's path up to any of its own
 *   boundaries q is the best path to q. A character that is not a single piece is a one-character unknown node and
 *   consecutive unknown tokens are fused afterwards, so a prefix's last unknown token may end early: it is dropped;
 * - BPE: no merge crosses a boundary of the whole word's result (merges are never undone), so the merges left of it
 *   do not depend on the symbols right of it and run in the same (rank, position) order on the prefix alone. With an
 *   end-of-word suffix (CLIP's </w>, put on the word's last symbol only) the part left of a boundary of the whole
 *   word is what the same model without the suffix gives for the prefix ending there: prefixes go through that model.
 * The whole word has a boundary among any W + 1 consecutive positions when no vocabulary token holds W + 1
 * consecutive characters of the window's character set. Byte-level BPE with characters of several bytes: a token
 * may begin and end inside a character's bytes, so every character boundary could lie inside some token. Where no
 * vocabulary token begins inside one of the set's characters and goes on past its end (midCharCrosser), the token
 * over the window's first position begins at a character boundary, so it holds at least j whole characters where it
 * covers j positions, and where it ends inside a character the tokens after it end inside that character or at its
 * end: a boundary among W positions when no token holds W - 1 whole characters (the window is 2 wider). Where such
 * tokens exist (emoji vocabularies: A4 EF B8 8F begins inside U+2764 and ends at U+FE0F's end), the chains of tokens
 * that each begin inside a character cross at most D character boundaries (crossingDepth; no bound: no window), and
 * the window is 2 + D wider. So the tokens that the prefixes ending at the W positions of a window all begin with
 * (same ids and offsets) are the whole text's first tokens (wordPrefixWindow), however long the word. Windows hold
 * only characters that are their own unit for the normaliser and pre-tokenizer: each maps alone to one character of
 * its own class (letter, number, other) that no neighbour can join (`joiner`: what may join depends on the
 * normaliser and pre-tokenizer, joinerOf for Unigram, windowJoiner for byte-level BPE; by default no marks, Hangul
 * jamo, Prepend or other grapheme-extending characters, regional indicators, emoji modifiers, controls, spaces), one
 * class throughout for regex pre-tokenizers (which split between classes); never-unknown symbols for BPE
 * (byte-level: every byte is in the vocabulary); and no added token lies inside a window's reach (each has a
 * character outside the window's set, or occurs in neither the raw nor the normalised text read: addedAcrossWindow).
 * So the normalised text of a prefix ending in a window is the whole text's
 * normalised text up to there, and its pre-tokens the whole text's, the last one cut. Behind NFC (`segments`) a
 * window may also be read in units (WindowUnit: a normalisation segment that the normaliser makes one window
 * character, or one mark of a run proven to stay alone): the argument then runs on the units' normalised characters,
 * its positions are the units' ends, and the reach of added tokens is counted in units.
 */
export interface InWordPolicy {
  model: "bpe-bytes" | "bpe-chars" | "unigram";
  /**
   * The vocabulary's tokens joined by TOKEN_SEPARATOR (byte-level: their UTF-8 text), built on the first long word.
   */
  tokenText: () => string;
  /** Added token contents (none may be spelled with the window's characters only). */
  added: readonly string[];
  /**
   * Characters that may not be window characters under this pipeline's normaliser and pre-tokenizer: JOINER (and
   * Prepend characters neither), or for Unigram behind Metaspace / WhitespaceSplit the pipeline's own set (joinerOf),
   * for byte-level BPE behind a regex pre-tokenizer only the characters that NFC (where it runs) joins to a neighbour
   * and those the regex may count as whitespace (windowJoiner).
   */
  joiner: RegExp;
  /**
   * Byte-level BPE with windowJoiner's set (not JOINER): a window's characters must be of their JavaScript class to the
   * library's own regex too (libraryClass), so windows are only found with the pre-tokenizer's count (`pieces`).
   */
  byteWindows: boolean;
  /**
   * Byte-level BPE: the vocabulary's tokens as Latin-1 strings (one character per byte), each after U+0100, for
   * midCharCrosser (built on first use); null for other models.
   */
  tokenBytes: (() => ByteTokens) | null;
  /** Single-character tokens: characters that are never unknown to the model. */
  singles: ReadonlySet<string>;
  /**
   * Byte-level BPE behind NFC (windowJoiner's NFC_JOINER): windows may be read in normalisation segments (UnitReader,
   * Encoder.segmentUnit) as well as characters.
   */
  segments: boolean;
  /**
   * The normal form that is the normaliser's first part where a long run of marks may be replaced by it (the
   * library's) before the text is read (Encoder.normalizeLongSegments): NFC for `segments`, the `composes` form for
   * Unigram; else null.
   */
  spanForm: "NFC" | "NFKC" | null;
  /** Unigram without byte fallback: window characters may be unknown (the unknown id, dropped at a prefix's end). */
  unknownId: number | null;
  /** Window characters all of one class (letters, or other non-space characters): a regex pre-tokenizer. */
  oneClass: boolean;
  /**
   * The regex keeps a run of numbers in one pre-token (GPT-2's byte-level ` ?\p{N}+`), so window characters may be
   * numbers too; not under the Split regexes, which cut numbers into threes (Llama 3) or ones (Qwen, CLIP).
   */
  numberRuns: boolean;
  /** BPE with an end-of-word suffix: prefixes are tokenized by the model without it (Encoder: prefixModelJson). */
  endOfWordSuffix: boolean;
  /** Byte-level BPE whose vocabulary has every byte: any character is symbols that are never unknown. */
  everyByte: boolean;
  /** BPE that takes a word found whole in the vocabulary as one token before any merge (ignore_merges). */
  ignoreMerges: boolean;
  /**
   * Byte-level BPE without a prefix space or continuing-subword prefix: suffixes starting in a window have the whole
   * word's last tokens too (merges right of a boundary run as on the suffix alone; its start gets no marker).
   */
  suffixes: boolean;
  /**
   * Unigram behind Metaspace / WhitespaceSplit only: the vocabulary and marker rule for replicating the model on one
   * long word (unigram.ts, encode.ts unigramPrefix / unigramSuffix), else null.
   */
  unigram: { vocab: UnigramVocab; marker: WordMarker } | null;
  /**
   * Unigram behind Metaspace / WhitespaceSplit whose normaliser is one composing normal form (NFC or NFKC) and
   * replacements of spaces only: the form, for normalFormUnknownTail and the replica's segments (encode.ts
   * unigramWord); else null.
   */
  composes: "NFC" | "NFKC" | null;
  /**
   * Unigram (`unigram` set) behind SentencePiece's Precompiled map alone: a long word that holds marks is normalised
   * unit by unit between certain grapheme-cluster boundaries (clusters.ts).
   */
  clusters: boolean;
}

/**
 * What InWordPolicy.tokenText puts between tokens: a lone surrogate, which no token holds (tokenizer.json is valid
 * UTF-8) and no joiner lets into a window (a newline could be a window character of a pipeline that does not split
 * at it: joinerOf).
 */
export const TOKEN_SEPARATOR = "\uD800";

/** GPT-2's byte-to-character map, inverted: the bytes of a byte-level token. */
let BYTE_OF: Map<string, number> | null = null;
function byteLevelBytes(token: string): Uint8Array | null {
  if (!BYTE_OF) {
    BYTE_OF = new Map();
    let extra = 0;
    for (let b = 0; b < 256; b++) {
      const direct = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      BYTE_OF.set(String.fromCodePoint(direct ? b : 256 + extra++), b);
    }
  }
  const out: number[] = [];
  for (const ch of token) {
    const b = BYTE_OF.get(ch);
    if (b === undefined) return null;
    out.push(b);
  }
  return Uint8Array.from(out);
}

/** Whether every byte's character is a vocabulary token (byte-level BPE never meets an unknown symbol). */
function allBytes(vocab: readonly string[]): boolean {
  const have = new Set(vocab);
  byteLevelBytes("");
  for (const ch of BYTE_OF!.keys()) if (!have.has(ch)) return false;
  return true;
}

const list = (x: unknown): Json[] => (Array.isArray(x) ? (x as Json[]) : []);
/** A pre-tokenizer's parts: a Sequence's members, else the one. */
const preTokenizerParts = (p: Json): Json[] => (p?.type === "Sequence" ? list(p.pretokenizers) : [p]);

function normalizerLocal(n: Json): boolean {
  if (!n) return true;
  switch (n.type) {
    case "Sequence":
      return list(n.normalizers).every(normalizerLocal);
    case "BertNormalizer":
    case "NFC":
    case "NFD":
    case "NFKC":
    case "NFKD":
    case "Lowercase":
    case "StripAccents":
    case "Strip":
    case "Prepend":
    case "Precompiled":
      return true;
    case "Replace": {
      const p = (n.pattern ?? {}) as { String?: string; Regex?: string };
      const onlySpaces = p.String !== undefined ? /^ +$/.test(p.String) : p.Regex !== undefined && /^(\\s|[ +*]|\{\d*,?\d*\})+$/.test(p.Regex);
      return onlySpaces && n.content === " ";
    }
    default:
      return false;
  }
}

function splitsAtSpaces(p: Json): boolean {
  if (!p) return false;
  switch (p.type) {
    case "Sequence":
      return list(p.pretokenizers).some(splitsAtSpaces);
    case "BertPreTokenizer":
    case "Whitespace":
    case "WhitespaceSplit":
      return true;
    case "Metaspace":
      return p.split !== false;
    case "ByteLevel":
      return p.use_regex !== false;
    case "Split": {
      const pattern = (p.pattern ?? {}) as { String?: string; Regex?: string };
      if (pattern.String !== undefined) return pattern.String === " " && p.behavior !== "MergedWithPrevious";
      return pattern.Regex !== undefined && SAFE_SPLIT_REGEXES.has(pattern.Regex);
    }
    default:
      return false;
  }
}

/**
 * GPT-2's byte-level regex or a safe Split regex (and ByteLevel) only: every such regex ends a run of letters
 * (`\p{L}+`) at the first non-letter and a run of numbers (`\p{N}+`, `\p{N}{1,3}` or one `\p{N}`) at the first
 * non-number, so a letter or number followed by a non-space character of another class ends a pre-token there, and
 * matches before it never look past it.
 */
function regexSplitsOnly(p: Json): boolean {
  if (!p) return false;
  const parts = preTokenizerParts(p);
  return parts.some(splitsAtSpaces) && parts.every((x) => x?.type === "ByteLevel" || (x?.type === "Split" && splitsAtSpaces(x)));
}

function findBert(n: Json): Record<string, unknown> | null {
  if (!n) return null;
  if (n.type === "BertNormalizer") return n;
  if (n.type === "Sequence") for (const c of list(n.normalizers)) if (findBert(c)) return findBert(c);
  return null;
}

/** Pre-tokenizers that keep a run of letters in one word (they split at spaces, punctuation or digits at most). */
function lettersTogether(p: Json): boolean {
  if (!p) return true;
  switch (p.type) {
    case "Sequence":
      return list(p.pretokenizers).every(lettersTogether);
    case "BertPreTokenizer":
    case "Whitespace":
    case "WhitespaceSplit":
    case "Metaspace":
    case "ByteLevel":
    case "Punctuation":
    case "Digits":
      return true;
    case "Split":
      return splitsAtSpaces(p);
    default:
      return false;
  }
}

function hasByteLevel(p: Json): boolean {
  if (!p) return false;
  if (p.type === "ByteLevel") return true;
  return p.type === "Sequence" && list(p.pretokenizers).some(hasByteLevel);
}

/** The in-word policy of a BPE (no dropout) or Unigram tokenizer.json, else null. */
function inWordPolicy(tj: Record<string, unknown>, model: Record<string, unknown>, added: string[], spaced: boolean): InWordPolicy | null {
  const pre = tj.pre_tokenizer as Json;
  if (!lettersTogether(pre)) return null;
  let vocab: string[];
  let kind: InWordPolicy["model"];
  let unknownId: number | null = null;
  let endOfWordSuffix = false;
  const type = modelType(model);
  if (type === "Unigram" && Array.isArray(model.vocab)) {
    vocab = (model.vocab as unknown[]).map((e) => String((e as unknown[])[0]));
    kind = "unigram";
    if (model.byte_fallback !== true && Number.isInteger(model.unk_id)) unknownId = model.unk_id as number;
  } else if (type === "BPE" && model.vocab && typeof model.vocab === "object") {
    // dropout makes merges random
    if (model.dropout !== null && model.dropout !== undefined) return null;
    endOfWordSuffix = typeof model.end_of_word_suffix === "string" && model.end_of_word_suffix !== "";
    vocab = Object.keys(model.vocab as object);
    kind = hasByteLevel(pre) ? "bpe-bytes" : "bpe-chars";
    // a continuing-subword prefix with the suffix would change more than the last symbol
    if (endOfWordSuffix && (kind !== "bpe-bytes" || (typeof model.continuing_subword_prefix === "string" && model.continuing_subword_prefix !== ""))) return null;
  } else return null;
  let tokenText: string | null = null;
  let tokenBytes: ByteTokens | null = null;
  const byteLevel = kind === "bpe-bytes";
  const joiner = byteLevel ? windowJoiner(tj.normalizer as Json, pre) : kind === "unigram" && onlyMetaspace(pre) ? joinerOf(tj.normalizer as Json, pre) : JOINER;
  const suffix = endOfWordSuffix ? String(model.end_of_word_suffix) : "";
  // the replica reads a word from the space before it to the one after it: an added token with whitespace could
  // take those spaces (no check for that there)
  const marker = kind === "unigram" && onlyMetaspace(pre) && !spaced ? wordMarker(pre) : null;
  return {
    model: kind,
    tokenText: () => {
      if (tokenText === null) {
        const utf8 = new TextDecoder();
        const texts = byteLevel ? vocab.map((t) => { const bytes = byteLevelBytes(t); return bytes ? utf8.decode(bytes) : t; }) : vocab;
        tokenText = texts.join(TOKEN_SEPARATOR);
      }
      return tokenText;
    },
    added,
    joiner,
    byteWindows: byteLevel && joiner !== JOINER,
    segments: byteLevel && joiner === NFC_JOINER,
    spanForm: spanForm(tj.normalizer as Json, byteLevel && joiner === NFC_JOINER, kind === "unigram" && onlyMetaspace(pre)),
    tokenBytes: byteLevel
      ? () => (tokenBytes ??= byteTokens(vocab, suffix))
      : null,
    singles: new Set(vocab.filter((t) => t.length <= 2 && [...t].length === 1)),
    unknownId,
    oneClass: kind !== "unigram" || !onlyMetaspace(pre),
    numberRuns: preTokenizerParts(pre).every((p) => p?.type === "ByteLevel" && p.use_regex !== false),
    endOfWordSuffix,
    everyByte: kind === "bpe-bytes" && allBytes(vocab),
    ignoreMerges: model.ignore_merges === true,
    suffixes: kind === "bpe-bytes" && !prefixSpace(pre) && !(typeof model.continuing_subword_prefix === "string" && model.continuing_subword_prefix !== "") && !touchesStart(tj.normalizer as Json),
    clusters: marker !== null && joiner === GRAPHEME_JOINER && precompiledOnly(tj.normalizer as Json),
    unigram: marker ? { vocab: { pieces: vocab, scores: Float64Array.from(model.vocab as unknown[], (e) => Number((e as unknown[])[1])), unknownId: Number.isInteger(model.unk_id) ? (model.unk_id as number) : null, byteFallback: model.byte_fallback === true }, marker } : null,
    composes: kind === "unigram" && onlyMetaspace(pre) ? composingForm(tj.normalizer as Json) : null,
  };
}

/**
 * Where Metaspace (and WhitespaceSplit, onlyMetaspace) put the marker in front of a word: after a U+0020 space the
 * space itself becomes the marker and starts the word's pre-token (split), unless WhitespaceSplit ran first and
 * dropped it, when the prepend scheme decides ("always": every pre-token, "first": only one at the text's start);
 * at the text's start any scheme but "never" prepends it. Null when this is not clear (several Metaspaces, no split).
 */
function wordMarker(p: Json): WordMarker | null {
  const parts = p?.type === "Sequence" ? list(p.pretokenizers) : [p];
  const at = parts.findIndex((x) => x?.type === "Metaspace");
  if (at < 0) return { marker: null, afterSpace: false, atStart: false };
  const m = parts[at]!;
  if (parts.filter((x) => x?.type === "Metaspace").length > 1) return null;
  const replacement = typeof m.replacement === "string" ? m.replacement : "\u2581";
  if ([...replacement].length !== 1) return null;
  const scheme = typeof m.prepend_scheme === "string" ? m.prepend_scheme : m.add_prefix_space === false ? "never" : "always";
  if (!["always", "first", "never"].includes(scheme)) return null;
  const whitespaceFirst = parts.slice(0, at).some((x) => x?.type === "WhitespaceSplit");
  if (!whitespaceFirst && m.split === false) return null;
  return { marker: replacement, afterSpace: whitespaceFirst ? scheme === "always" : true, atStart: scheme !== "never" };
}

/** Pre-tokenizers that put a space or ▁ before a text that has none. */
function prefixSpace(p: Json): boolean {
  if (!p) return false;
  if (p.type === "Sequence") return list(p.pretokenizers).some(prefixSpace);
  if (p.type === "ByteLevel") return p.add_prefix_space === true;
  if (p.type === "Metaspace") return p.prepend_scheme !== undefined ? p.prepend_scheme !== "never" : p.add_prefix_space !== false;
  return false;
}

/** Normalisers that change a text's start (Strip, Prepend). */
function touchesStart(n: Json): boolean {
  if (!n) return false;
  if (n.type === "Sequence") return list(n.normalizers).some(touchesStart);
  return n.type === "Strip" || n.type === "Prepend";
}

/** Pre-tokenizers that split only at spaces (Metaspace, WhitespaceSplit): a word's characters may mix classes. */
function onlyMetaspace(p: Json): boolean {
  if (!p) return true;
  if (p.type === "Sequence") return list(p.pretokenizers).every(onlyMetaspace);
  return p.type === "Metaspace" || p.type === "WhitespaceSplit";
}

/** A normaliser that is NFC or NFKC, once, and replacements of spaces by a space (normalizerLocal): that form, else null. */
/** InWordPolicy.spanForm: the first normaliser part, NFC behind byte-level segments, NFC or NFKC (composingForm) for Unigram. */
function spanForm(n: Json, segments: boolean, unigram: boolean): "NFC" | "NFKC" | null {
  const first = normalizerParts(n)[0]?.type;
  if (segments) return first === "NFC" ? "NFC" : null;
  const form = unigram ? composingForm(n) : null;
  return form !== null && first === form ? form : null;
}

function composingForm(n: Json): "NFC" | "NFKC" | null {
  const parts = normalizerParts(n);
  const forms = parts.filter((x) => x?.type === "NFC" || x?.type === "NFKC");
  if (forms.length !== 1 || !parts.every((x) => forms.includes(x) || (x?.type === "Replace" && normalizerLocal(x)))) return null;
  return forms[0]!.type as "NFC" | "NFKC";
}

/** tokenizer.json for prefixes inside a word: BPE's end-of-word suffix removed (InWordPolicy says why). */
export function prefixModelJson(tokenizerJson: unknown): unknown {
  const tj = tokenizerJson as Record<string, unknown>;
  return { ...tj, model: { ...(tj.model as object), end_of_word_suffix: null } };
}

/**
 * The model kind of a tokenizer.json: its `type`, or, in files written before the field existed (roberta-base's,
 * t5-small's), what the Rust library infers from the fields, as its untagged model enum does.
 */
export function modelType(model: Record<string, unknown>): string {
  if (typeof model.type === "string") return model.type;
  if (Array.isArray(model.vocab)) return "Unigram";
  if ("merges" in model) return "BPE";
  if ("max_input_chars_per_word" in model) return "WordPiece";
  return "WordLevel";
}

/** The cut policy of a tokenizer.json, or null when its texts must be tokenized whole. */
export function cutPolicy(tokenizerJson: unknown): CutPolicy | null {
  const tj = tokenizerJson as Record<string, unknown>;
  const model = tj.model as Json;
  if (!model || !["WordPiece", "BPE", "Unigram", "WordLevel"].includes(modelType(model))) return null;
  const added = list(tj.added_tokens);
  const contents = added.map((t) => String(t?.content ?? ""));
  const spaced = spacedAdded(added, tj.normalizer as Json);
  if (spaced === undefined) return null;
  if (!normalizerLocal(tj.normalizer as Json) || !splitsAtSpaces(tj.pre_tokenizer as Json)) return null;
  const bert = findBert(tj.normalizer as Json);
  // An added token holding an ideograph could be cut in two; a single_word one sees the text's end as a boundary.
  const ideographsSafe = !contents.some((c) => /[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF]/.test(c)) && !added.some((t) => t?.single_word === true);
  // Shortening needs a pre-tokenizer that never splits inside ASCII letters and digits, and added tokens that cannot
  // lie inside such a run (each has another character) and are shorter than what is kept at both ends of a run.
  const maxChars = Number(model.max_input_chars_per_word ?? 100);
  const wordSplit = ["BertPreTokenizer", "Whitespace", "WhitespaceSplit"].includes(String((tj.pre_tokenizer as Json)?.type));
  const addedFit = contents.every((c) => /[^A-Za-z0-9]/.test(c) && [...c].length <= maxChars);
  const bertWords = (tj.pre_tokenizer as Json)?.type === "BertPreTokenizer" && (!tj.normalizer || (tj.normalizer as Json)?.type === "BertNormalizer");
  return {
    ideographs: bert !== null && bert.handle_chinese_chars !== false && ideographsSafe,
    punctuation: bertWords && !added.some((t) => t?.single_word === true) ? contents : null,
    classCuts: regexSplitsOnly(tj.pre_tokenizer as Json) && !added.some((t) => t?.single_word === true) ? contents : null,
    classSpaceCuts: !added.some((t) => t?.rstrip === true),
    leftCuts: !touchesStart(tj.normalizer as Json) && !added.some((t) => t?.rstrip === true || t?.single_word === true),
    leftClassCuts: !prefixSpace(tj.pre_tokenizer as Json),
    addedCuts: contents.length > 0 && added.every((t) => t?.normalized === false && t.lstrip !== true && t.rstrip !== true && t.single_word !== true && String(t.content ?? "") !== "") ? contents : null,
    wordPieceMaxChars: modelType(model) === "WordPiece" && wordSplit && addedFit && Number.isInteger(maxChars) && maxChars > 0 ? maxChars : 0,
    anyScriptWords: bertWords ? contents : null,
    inWord: inWordPolicy(tj, model as Record<string, unknown>, contents, spaced !== null),
    spaced,
    afterWhitespace: null,
    separators: null,
    separatorLeads: null,
    lstripped: added.some((t) => t?.lstrip === true && t.normalized !== false) ? null : added.filter((t) => t?.lstrip === true).map((t) => String(t!.content ?? "")),
    whitespace: whitespaceShape(tj),
    spaceRuns: spaceRunPolicy(tj, model as Record<string, unknown>, added),
    dropped: droppingNormalizer(tj.normalizer as Json) ? added.filter((t) => t?.normalized === false).map((t) => String(t!.content ?? "")) : null,
  };
}

/**
 * The added tokens that hold whitespace (SpacedAdded), null when there are none, undefined when a cut could not be
 * proven around them (lstrip / rstrip / single_word move or refuse a match by what lies around it; a normalised one
 * behind a normaliser that is not per character).
 */
function spacedAdded(added: Json[], normalizer: Json): SpacedAdded | null | undefined {
  // U+0085 is whitespace to the Rust library (and to BERT's cleaning, which makes it a space), not to \s: WHITESPACE
  const spaced = added.filter((t) => WHITESPACE.test(String(t?.content ?? "")));
  if (spaced.length === 0) return null;
  if (spaced.some((t) => t?.lstrip === true || t?.rstrip === true || t?.single_word === true)) return undefined;
  const normalized = spaced.filter((t) => t?.normalized !== false).map((t) => String(t!.content));
  if (normalized.length > 0 && !perCharNormalizer(normalizer)) return undefined;
  return { raw: spaced.filter((t) => t?.normalized === false).map((t) => String(t!.content)), normalized };
}

/**
 * Normalisers whose output is each character's output alone, concatenated, but for canonical reordering of
 * combining marks (NFD / NFKD: addedSpans refuses marks): BERT's (cleaning, CJK spacing, accent stripping,
 * lowercasing, all per character), Lowercase (per character, no final-sigma rule), NFD, NFKD, StripAccents.
 */
function perCharNormalizer(n: Json): boolean {
  if (!n) return true;
  if (n.type === "Sequence") return list(n.normalizers).every(perCharNormalizer);
  return ["BertNormalizer", "Lowercase", "NFD", "NFKD", "StripAccents"].includes(String(n.type));
}

/** A per-character normaliser (perCharNormalizer) with a part that drops characters. */
function droppingNormalizer(n: Json): boolean {
  if (!n || !perCharNormalizer(n)) return false;
  return preNormalizers(n).some((p) => p?.type === "StripAccents" || (p?.type === "BertNormalizer" && (p.clean_text !== false || p.strip_accents !== false || p.lowercase !== false)));
}
const preNormalizers = (n: Json): Json[] => (n?.type === "Sequence" ? list(n.normalizers).flatMap(preNormalizers) : [n]);

/** Characters looked at on each side of a cut, beyond the longest token, before addedSpans gives up. */
const SPAN_SLACK = 64;
const MARK = /\p{M}/u;

/**
 * Whether an added token with whitespace (CutPolicy.spaced) may match across position i (covering text[i - 1] and
 * text[i]), in the raw text or in the normalised one; true also when that cannot be ruled out (no normaliser given,
 * combining marks near i, whose order the normaliser may change, or more than SPAN_SLACK characters that normalise
 * to nothing). Added tokens are matched leftmost-longest (Aho-Corasick), left to right: when no occurrence of any
 * of them covers both sides of i, the matches that end by i are the same in the text and in its part before i, and
 * those that start at or after i the same in the text and in its part after i; the pieces between matches are cut
 * at i and nowhere else. The normalised text around i is each character's normalisation (perCharNormalizer), a
 * superset of what each piece normalises to (a raw match removes characters, it adds none).
 */
export function addedSpans(text: string, i: number, spaced: SpacedAdded, normalize?: (ch: string) => string): boolean {
  if (spaced.raw.some((t) => occurrenceSpans(text, t, i))) return true;
  if (spaced.normalized.length === 0) return false;
  if (!normalize) return true;
  const patterns = spaced.normalized.map((t) => [...t].map(normalize).join(""));
  // the library normalises a token's content whole: marks in it may be reordered
  if (patterns.some((t) => MARK.test(t))) return true;
  const reach = patterns.reduce((m, t) => Math.max(m, t.length), 0) - 1;
  let left = "";
  let a = i;
  for (let steps = 0; left.length < reach && a > 0; steps++) {
    if (steps > reach + SPAN_SLACK) return true;
    const low = text.charCodeAt(a - 1);
    a -= a >= 2 && low >= 0xdc00 && low <= 0xdfff ? 2 : 1;
    const n = normalize(codePointAt(text, a));
    if (MARK.test(n)) return true;
    left = n + left;
  }
  let right = "";
  let b = i;
  for (let steps = 0; right.length < reach && b < text.length; steps++) {
    if (steps > reach + SPAN_SLACK) return true;
    const ch = codePointAt(text, b);
    const n = normalize(ch);
    if (MARK.test(n)) return true;
    right += n;
    b += ch.length;
  }
  const around = left + right;
  return patterns.some((t) => occurrenceSpans(around, t, left.length));
}

/** Whether an occurrence of t in s covers both s[i - 1] and s[i]. */
function occurrenceSpans(s: string, t: string, i: number): boolean {
  for (let at = s.indexOf(t, Math.max(0, i - t.length + 1)); at >= 0 && at < i; at = s.indexOf(t, at + 1)) {
    if (at + t.length > i) return true;
  }
  return false;
}

/**
 * Characters that may join a neighbour into one unit of a normaliser (composition, grapheme clusters) or that
 * normalisers drop or turn into spaces: never in a window, whatever the pipeline (classCut, punctuationCut, and
 * windows of pipelines without a narrower set: joinerOf).
 */
const JOINER = /[\p{M}\p{Grapheme_Extend}\p{Regional_Indicator}\p{Emoji_Modifier}\p{C}\p{Z}\s\u0E33\u0EB3\u1100-\u11FF\uA960-\uA97F\uD7B0-\uD7FF]/u;

/**
 * Characters that Unicode normal forms (NFC, NFD, NFKC, NFKD; StripAccents removes only marks) may join to a
 * neighbour: a window's characters, and those on each side of a class cut, must each have a normalisation boundary
 * before them (UAX #15: the first code point of the character's canonical and of its compatibility decomposition is
 * a starter, canonical combining class 0, and the second character of no canonical composition), so that the normal
 * form of a text is the normal form of its part before such a character followed by that of the rest (reordering
 * stops at a starter; composition pairs the last starter before it with what follows it only, and a starter that is
 * no composition's second joins nothing before it). Not boundaries: non-starters (most marks; jamo), the second
 * characters of canonical compositions (a few vowel and length signs such as U+0B3E, U+0DCF, U+102E, Hangul vowel and
 * trailing jamo, and Kirat Rai's vowel signs U+16D67-16D6A, which Unicode 16 made composable and which are letters),
 * characters whose decomposition begins with such a character (U+FF9E, U+FF9F: Grapheme_Extend), Hangul jamo
 * (leading ones compose with the vowel after them), and unassigned code points. So the set is every mark and
 * grapheme extender (\p{M}, \p{Grapheme_Extend}) but those listed in NORMAL_FORM_BOUNDARY_MARKS (boundaries that
 * are marks: Thai U+0E31, U+0E34-0E37, U+0E33, Devanagari U+0900-0903, U+093E-094C, variation selectors, ...), jamo
 * and code points without a character. Canonical combining classes and decompositions of assigned characters never
 * change (Unicode's stability policy), nor does whether a pair of assigned characters composes, so a character
 * listed here is a boundary to the library's tables too, or unassigned there (then a starter with no decomposition:
 * a boundary as well); listed code points this runtime does not know stay in the set. test/tokenize/joiners.test.ts
 * checks the list and the set against the runtime's normalize() on every code point. Controls, format characters
 * (U+200B, U+FEFF), regional indicators and emoji modifiers are starters that compose with nothing: the normal forms
 * leave them and their neighbours as they are.
 */
const NORMAL_FORM_JOINER = "\\p{M}\\p{Grapheme_Extend}\\p{Cn}\\p{Cs}\\u0E33\\u0EB3\\u1100-\\u11FF\\uA960-\\uA97F\\uD7B0-\\uD7FF\\u{16D40}-\\u{16D7F}";
/**
 * The marks and grapheme extenders that have a normalisation boundary before them in all four normal forms
 * (NORMAL_FORM_JOINER says why), as ranges of hexadecimal code points; generated from, and checked against, the
 * runtime's normalize() (test/tokenize/joiners.test.ts).
 */
const NORMAL_FORM_BOUNDARY_MARKS = [
  "34f 488-489 7a6-7b0 900-903 93a-93b 93e-94c 94e-94f 955-957 962-963 981-983 9bf-9c4 9c7-9c8 9cb-9cc 9e2-9e3",
  "a01-a03 a3e-a42 a47-a48 a4b-a4c a51 a70-a71 a75 a81-a83 abe-ac5 ac7-ac9 acb-acc ae2-ae3 afa-aff b01-b03",
  "b3f-b44 b47-b48 b4b-b4c b55 b62-b63 b82 bbf-bc2 bc6-bc8 bca-bcc c00-c04 c3e-c44 c46-c48 c4a-c4c c62-c63",
  "c81-c83 cbe-cc1 cc3-cc4 cc6-cc8 cca-ccc ce2-ce3 cf3 d00-d03 d3f-d44 d46-d48 d4a-d4c d62-d63 d81-d83 dd0-dd4",
  "dd6 dd8-dde df2-df3 e31 e33-e37 e47 e4c-e4e eb1 eb3-eb7 ebb-ebc ecc-ece f3e-f3f f76-f79 f7e-f7f f8d-f97",
  "f99-fbc 102b-102d 102f-1036 1038 103b-103e 1056-1059 105e-1060 1062-1064 1067-106d 1071-1074 1082-108c 108f",
  "109a-109d 1712-1713 1732-1733 1752-1753 1772-1773 17b4-17d1 17d3 180b-180d 180f 1885-1886 1920-192b",
  "1930-1938 1a19-1a1b 1a55-1a5e 1a61-1a74 1abe 1b00-1b04 1b36-1b43 1b80-1b82 1ba1-1ba9 1bac-1bad 1be7-1bf1",
  "1c24-1c36 1ce1 1cf7 200c 20dd-20e0 20e2-20e4 a670-a672 a802 a80b a823-a827 a880-a881 a8b4-a8c3 a8c5 a8ff",
  "a926-a92a a947-a952 a980-a983 a9b4-a9bf a9e5 aa29-aa36 aa43 aa4c-aa4d aa7b-aa7d aaeb-aaef aaf5 abe3-abea",
  "abec fe00-fe0f 10a01-10a03 10a05-10a06 10a0c 10a0e 10efc 11000-11002 11038-11045 11073-11074 11080-11082",
  "110b0-110b8 110c2 11128-11132 11145-11146 11180-11182 111b3-111bf 111c9 111cb-111cc 111ce-111cf 1122c-11234",
  "11237 1123e 11241 112df-112e8 11300-11303 1133f-11344 11347-11348 1134b-1134c 11362-11363 113b9-113ba",
  "113bc-113c0 113ca 113cc-113cd 113d2 113e1-113e2 11435-11441 11443-11445 114b1-114b9 114bb-114bc 114be-114c1",
  "115b0-115b5 115b8-115be 115dc-115dd 11630-1163e 11640 116ab-116b5 1171d-1172a 1182c-11838 11931-11935",
  "11937-11938 1193b-1193c 11940 11942 119d1-119d7 119da-119df 119e4 11a01-11a0a 11a33 11a35-11a39 11a3b-11a3e",
  "11a51-11a5b 11a8a-11a98 11b60-11b67 11c2f-11c36 11c38-11c3e 11c92-11ca7 11ca9-11cb6 11d31-11d36 11d3a",
  "11d3c-11d3d 11d3f-11d41 11d43 11d47 11d8a-11d8e 11d90-11d91 11d93-11d96 11ef3-11ef6 11f00-11f01 11f03",
  "11f34-11f3a 11f3e-11f40 11f5a 13440 13447-13455 1612a-1612e 16f4f 16f51-16f87 16f8f-16f92 16fe4 1bc9d",
  "1cf00-1cf2d 1cf30-1cf46 1da00-1da36 1da3b-1da6c 1da75 1da84 1da9b-1da9f 1daa1-1daaf e0020-e007f e0100-e01ef",
].join(" ");
/**
 * A `v`-flag class of the characters in `set` (a class's contents) that are not boundary marks this runtime knows
 * (NORMAL_FORM_BOUNDARY_MARKS without unassigned code points).
 */
function withoutBoundaryMarks(set: string): RegExp {
  return new RegExp(`[[${set}]--[[${hexRanges(NORMAL_FORM_BOUNDARY_MARKS)}]--\\p{Cn}]]`, "v");
}

/**
 * JOINER without regional indicators (and with the Prepend characters), for SentencePiece's Precompiled map, which
 * transforms a grapheme cluster shorter than 6 UTF-8 bytes whole and a longer one character by character. A regional
 * indicator takes 4 bytes and every other character that a rule joins into a cluster with it (a Prepend before it,
 * a mark, ZWJ or another indicator after it) at least 2, so each indicator is transformed alone, and the others of its
 * cluster too; a window character that is not an indicator is never in a cluster with one (it is no Prepend, ZWJ,
 * mark or indicator). So a prefix ending between two indicators of a pair has the whole text's normalised characters
 * up to there, though its clusters end differently (the pair cut in two).
 * Hangul jamo and syllables (3 bytes each) join one another into clusters (L, V, T sequences), so a cluster of two
 * or more of them is transformed character by character; one alone is one character. A cluster holding one of them
 * with a character that is not Hangul (a Prepend before it, a mark after it: 5 bytes) is transformed whole, but
 * neither is a window character, and a window's cut has a window character two places before it too (its reach is
 * at least 1: wordPrefixWindow), so the prefix's last cluster is one window character, or two or more Hangul
 * characters of the window (a Prepend before the window would join the whole run, those two included), and the whole
 * text's cluster there holds it and more: both transformed character by character. unknownCut asks the same of the
 * character before an unknown one; unknownTail keeps two characters of its run, whose cluster is one of them or both.
 */
const GRAPHEME_JOINER = new RegExp(`[\\p{M}\\p{Grapheme_Extend}\\p{Emoji_Modifier}\\p{C}\\p{Z}\\s\\u0E33\\u0EB3${PREPEND.source.slice(1, -1)}]`, "u");

/**
 * How a normaliser may join neighbouring characters: "none" (no normaliser, or steps that map each character alone or
 * touch only spaces or the text's ends: Lowercase, Replace of spaces, Strip, Prepend), "normal-forms" (Unicode
 * normal forms: NORMAL_FORM_JOINER), "graphemes" (Precompiled works per grapheme cluster, BertNormalizer: JOINER).
 */
function normalizerUnits(n: Json): "none" | "normal-forms" | "graphemes" {
  if (!n) return "none";
  if (n.type === "Sequence") {
    const units = list(n.normalizers).map(normalizerUnits);
    return units.includes("graphemes") ? "graphemes" : units.includes("normal-forms") ? "normal-forms" : "none";
  }
  if (["NFC", "NFD", "NFKC", "NFKD", "StripAccents"].includes(String(n.type))) return "normal-forms";
  if (["Lowercase", "Replace", "Strip", "Prepend"].includes(String(n.type))) return "none";
  return "graphemes";
}

/** A normaliser's steps: a Sequence's members, else the one. */
const normalizerParts = (n: Json): Json[] => (n?.type === "Sequence" ? list(n.normalizers) : [n]);

function hasStrip(n: Json): boolean {
  if (!n) return false;
  return n.type === "Sequence" ? list(n.normalizers).some(hasStrip) : n.type === "Strip";
}

/**
 * The characters that may not be in a window of a Unigram model behind Metaspace / WhitespaceSplit (InWordPolicy.joiner),
 * from its normaliser (normalizerUnits) and pre-tokenizer: the characters the pre-tokenizer splits at (a U+0020 space
 * for Metaspace alone, which neither splits at nor changes other whitespace; all whitespace to the library,
 * char::is_whitespace, behind WhitespaceSplit or a Strip normaliser), and those the normaliser may join to a
 * neighbour. Every other pipeline keeps JOINER.
 */
function joinerOf(normalizer: Json, pre: Json): RegExp {
  const units = normalizerUnits(normalizer);
  if (units === "graphemes") return precompiledFirst(normalizer) && normalizerParts(normalizer).every((n) => n?.type !== "BertNormalizer") ? GRAPHEME_JOINER : JOINER;
  const parts = preTokenizerParts(pre);
  // literal characters in the class (no "-", "]" or "\\" among them)
  const spaces = parts.some((p) => p?.type === "WhitespaceSplit") || hasStrip(normalizer) ? RUST_WHITESPACE : " ";
  return withoutBoundaryMarks(`${spaces}${units === "normal-forms" ? NORMAL_FORM_JOINER : ""}\\p{Cs}`);
}
/**
 * Byte-level BPE behind a regex pre-tokenizer and no normaliser (GPT-2's, RoBERTa's): whitespace to the library
 * (RUST_WHITESPACE, \p{Z}) and code points without a character (unassigned, surrogates, private use: the library's
 * Unicode tables may know them as something else). Nothing joins characters here: ByteLevel maps each byte alone and
 * the regex decides its pieces by class (letter, number, other, whitespace), which libraryClass checks per window
 * character with the library itself (U+200B, U+180E, U+FEFF are whitespace to some tables or to JavaScript's \s).
 * So marks, controls and format characters, regional indicators and Hangul jamo may be window characters.
 */
const BYTE_JOINER = new RegExp(`[${RUST_WHITESPACE}\\p{Z}\\p{Cn}\\p{Cs}\\p{Co}]`, "u");
/**
 * BYTE_JOINER behind NFC (Qwen2 / Qwen3; CLIP's NFC, whitespace Replace and Lowercase): also every character NFC may
 * join to a neighbour (NORMAL_FORM_JOINER: non-starters, second characters of compositions, jamo; checked against
 * normalize() on every code point in test/tokenize/joiners.test.ts). A window character is then a starter that
 * composes with nothing before it and, since the next one is one too, with nothing after it: NFC of a text is NFC of
 * its parts on each side of a window position. Whitespace Replace and Lowercase work per character (Lowercase has no
 * final-sigma rule in the library).
 */
const NFC_JOINER = withoutBoundaryMarks(`${RUST_WHITESPACE}\\p{Z}\\p{Co}${NORMAL_FORM_JOINER}`);

/**
 * The characters that may not be window characters for a byte-level BPE pipeline (InWordPolicy.joiner): BYTE_JOINER
 * with no normaliser, NFC_JOINER behind NFC, Lowercase and Replace of whitespace by a space, where the pre-tokenizer
 * is a regex that splits between classes (regexSplitsOnly); JOINER for any other.
 */
function windowJoiner(normalizer: Json, pre: Json): RegExp {
  if (!regexSplitsOnly(pre)) return JOINER;
  const parts = !normalizer ? [] : normalizer.type === "Sequence" ? list(normalizer.normalizers) : [normalizer];
  const whitespaceReplace = (n: Json) => n?.type === "Replace" && normalizerLocal(n);
  if (!parts.every((n) => n?.type === "NFC" || n?.type === "Lowercase" || whitespaceReplace(n))) return JOINER;
  return parts.some((n) => n?.type === "NFC") ? NFC_JOINER : BYTE_JOINER;
}

const LETTER = /\p{L}/u;
const NUMBER = /\p{N}/u;

/** Letter, number or other (the classes regex pre-tokenizers split between). */
export function classOf(ch: string): "L" | "N" | "O" {
  return LETTER.test(ch) ? "L" : NUMBER.test(ch) ? "N" : "O";
}

/**
 * The normalised character of a window character, or null when `ch` may not be in a window (InWordPolicy):
 * `normalized` is what the tokenizer's normaliser makes of the character alone.
 */
function windowChar(ch: string, normalized: string, policy: InWordPolicy, joiner = policy.joiner): string | null {
  if (normalized.length === 0 || normalized.length > 2 || [...normalized].length !== 1) return null;
  if (joiner.test(ch) || joiner.test(normalized) || (joiner === JOINER && (PREPEND.test(ch) || PREPEND.test(normalized)))) return null;
  const cls = classOf(ch);
  if (cls !== classOf(normalized) || (policy.oneClass && cls === "N" && !policy.numberRuns)) return null;
  switch (policy.model) {
    case "bpe-bytes":
      return policy.everyByte || (normalized.charCodeAt(0) < 0x80 && policy.singles.has(normalized)) ? normalized : null;
    case "bpe-chars":
      return policy.singles.has(normalized) ? normalized : null;
    case "unigram":
      return policy.unknownId !== null || policy.singles.has(normalized) ? normalized : null;
  }
}

/**
 * The code point a Unigram pre-token holds for `ch` (its normalised form, `normalized`) when ch is a window
 * character (its own unit: InWordPolicy), else -1.
 */
export function wordSymbol(ch: string, normalized: string, policy: InWordPolicy): number {
  const n = windowChar(ch, normalized, policy);
  return n === null ? -1 : n.codePointAt(0)!;
}

/**
 * The length (in characters) of the longest run of characters of `chars` inside a vocabulary token when it is at
 * least `atLeast`, else 0. One native regex scan over the tokens, joined by TOKEN_SEPARATOR (never a window character).
 */
export function longestRunFrom(policy: InWordPolicy, chars: ReadonlySet<string>, atLeast: number): number {
  // remembered per policy (a long word asks again for each of its windows, with the same few characters)
  let memo = RUN_MEMO.get(policy);
  if (!memo) RUN_MEMO.set(policy, (memo = new Map()));
  const key = `${atLeast}:${[...chars].sort().join("")}`;
  let best = memo.get(key);
  if (best === undefined) {
    if (memo.size > 4096) memo.clear();
    memo.set(key, (best = scanLongestRun(policy, chars, atLeast)));
  }
  return best;
}
const RUN_MEMO = new WeakMap<InWordPolicy, Map<string, number>>();

function scanLongestRun(policy: InWordPolicy, chars: ReadonlySet<string>, atLeast: number): number {
  const set = [...chars].map((ch) => `\\u{${ch.codePointAt(0)!.toString(16)}}`).join("");
  let best = 0;
  for (const m of policy.tokenText().matchAll(new RegExp(`[${set}]{${Math.max(1, atLeast)},}`, "gu"))) {
    let n = 0;
    for (let i = 0; i < m[0].length; i++) if (m[0].charCodeAt(i) < 0xdc00 || m[0].charCodeAt(i) > 0xdfff) n++;
    if (n > best) best = n;
  }
  return best;
}

/** The code point of `text` that ends at UTF-16 index i (a surrogate pair whole), or "" at the start. */
function codePointBefore(text: string, i: number): string {
  const low = text.charCodeAt(i - 1);
  return text.slice(i >= 2 && low >= 0xdc00 && low <= 0xdfff ? i - 2 : Math.max(0, i - 1), i);
}

/**
 * Whether a character is its own unit for a per-character normaliser: it maps alone (to `n`) to one character, and
 * neither is a joiner (marks, controls, whitespace, ...) or a Prepend character that a neighbour could join; with
 * `joiner`, a pipeline's own narrower set (InWordPolicy.joiner) decides instead.
 */
function ownUnit(ch: string, n: string, joiner: RegExp = JOINER): boolean {
  if ([...n].length !== 1 || joiner.test(ch) || joiner.test(n)) return false;
  // a narrower set (InWordPolicy.joiner) names all its pipeline joins, Prepend characters too where it forms clusters
  return joiner !== JOINER || (!PREPEND.test(ch) && !PREPEND.test(n));
}

/** The code point of `text` at UTF-16 index i (a surrogate pair whole), or "" past the end. */
function codePointAt(text: string, i: number): string {
  const cp = text.codePointAt(i);
  return cp === undefined ? "" : String.fromCodePoint(cp);
}

/**
 * Unigram without byte fallback: the text up to the second character of the run of unknown characters that ends it,
 * which has exactly the whole text's ids, or the text itself when it does not end in such a run of two or more.
 * A character that is in no vocabulary piece (`foreign`, after the normaliser) is covered by a one-character
 * unknown node only, so every path of the Viterbi lattice has a boundary on both sides of it; from the run's second
 * character to the end every node is unknown, and the unknown tokens are fused into the one that the shorter text
 * ends with too. Run characters are window characters (their own units for the normaliser) that no added token holds.
 */
export function unknownTail(text: string, policy: InWordPolicy, kind: (codePoint: number) => CharKind): string {
  // the run must be one pre-token (unknown tokens are fused within one): a pre-tokenizer that splits at spaces only
  if (policy.model !== "unigram" || policy.unknownId === null || policy.oneClass) return text;
  let p = text.length;
  let count = 0;
  while (p > 0) {
    const low = text.charCodeAt(p - 1);
    const q = p >= 2 && low >= 0xdc00 && low <= 0xdfff ? p - 2 : p - 1;
    if (kind(text.codePointAt(q)!) !== "unknown") break;
    p = q;
    count++;
  }
  return count >= 2 ? text.slice(0, p + codePointAt(text, p).length) : text;
}

/**
 * The second characters of canonical compositions (the last code points of primary composites' canonical
 * decompositions, Hangul vowel and trailing jamo included), as ranges of hexadecimal code points; checked against
 * the runtime's normalize() on every code point (test/tokenize/joiners.test.ts). A pair of assigned characters that
 * does not compose in one Unicode version composes in none (stability policy).
 */
const COMPOSITION_SECONDS = [
  "300-304 306-30c 30f 311 313-314 31b 323-328 32d-32e 330-331 338 342 345 653-655 93c 9be 9d7 b3e b56-b57 bbe bd7",
  "c56 cc2 cd5-cd6 d3e d57 dca dcf ddf 102e 1161-1175 11a8-11c2 1b35 3099-309a 110ba 11127 1133e 11357 113b8 113bb",
  "113c2 113c9 114b0 114ba 114bd 115af 11930 1611e-16120 16129 16d67",
].join(" ");
/** A regex class's contents for ranges of hexadecimal code points ("300-304 306"). */
function hexRanges(ranges: string): string {
  return ranges.split(" ").map((r) => r.split("-").map((h) => `\\u{${h}}`).join("-")).join("");
}
let SECONDS: RegExp | null = null;
/** Whether a character is the second of a canonical composition (COMPOSITION_SECONDS) or unassigned. */
export function compositionSecond(ch: string): boolean {
  return (SECONDS ??= new RegExp(`[${hexRanges(COMPOSITION_SECONDS)}\\p{Cn}\\p{Cs}]`, "u")).test(ch);
}

/** Whether a character has canonical combining class 0 (the runtime's reordering: not moved past U+0334, class 1, nor U+0345, class 240). */
export function normalFormStarter(ch: string): boolean {
  return starter(ch);
}
function starter(ch: string): boolean {
  return (ch + "\u0334").normalize("NFD") === ch + "\u0334" && ("\u0345" + ch).normalize("NFD") === "\u0345" + ch;
}

/**
 * Whether a character has a normalisation boundary before it in every normal form (UAX #15): its canonical and its
 * compatibility decompositions begin with a starter that is the second character of no canonical composition, and it
 * is assigned. Then the normal form of a text is that of its part before the character followed by that of the rest.
 * A character the library's tables do not know yet is a starter without a decomposition there: a boundary too.
 */
export function normalFormBoundary(ch: string): boolean {
  if (/[\p{Cn}\p{Cs}]/u.test(ch)) return false;
  for (const form of ["NFD", "NFKD"] as const) {
    const first = String.fromCodePoint(ch.normalize(form).codePointAt(0)!);
    if (!starter(first) || compositionSecond(first)) return false;
  }
  return true;
}

/**
 * What a character is to normalFormUnknownTail: 0 none; 1 a tail character: what the normaliser makes of it alone
 * (`normalized`) and its decomposition in the pipeline's form (NFD for NFC, NFKD for NFKC) are one or more characters,
 * each in no vocabulary piece (`foreign`) and no whitespace, none the second character of a canonical composition,
 * and no added token holds it or any of them; 2 a tail character with a normalisation boundary before it
 * (normalFormBoundary); 3 the second character of a composition that is otherwise a tail character and its own
 * decomposition (U+0301), a tail character only right after a plain starter it does not compose with (plainStarter).
 */
export type TailChar = 0 | 1 | 2 | 3;
export function tailChar(ch: string, normalized: string, form: "NFC" | "NFKC", policy: InWordPolicy, foreign: (ch: string) => boolean): TailChar {
  if (/[\p{Cn}\p{Cs}]/u.test(ch)) return 0;
  const decomposed = [...ch.normalize(form === "NFC" ? "NFD" : "NFKD")];
  const all = [ch, ...normalized, ...decomposed];
  if (normalized.length === 0 || all.some((c) => policy.added.some((t) => t.includes(c)))) return 0;
  for (const c of [...normalized, ...decomposed]) if (!foreign(c) || WHITESPACE.test(c) || c === "\u2581") return 0;
  const second = decomposed.some(compositionSecond);
  if (second) return decomposed.length === 1 && decomposed[0] === ch && normalized === ch && !/\p{Cn}/u.test(ch) ? 3 : 0;
  return normalFormBoundary(ch) ? 2 : 1;
}

/**
 * Whether `c` (a TailChar 3: a composition's second, its own decomposition) composes with nothing right after
 * `p`: p is a starter that is its own canonical and compatibility decomposition (so the last starter before c in the
 * decomposed text, with nothing between them to block or reorder) and p followed by c is in both composed forms
 * (the runtime's tables; a pair of characters the library knows composes there only if it does here, and one it
 * does not know composes with nothing there).
 */
function plainStarter(p: string, c: string): boolean {
  return p.normalize("NFD") === p && p.normalize("NFKD") === p && starter(p) && (p + c).normalize("NFC") === p + c && (p + c).normalize("NFKC") === p + c;
}

/**
 * Unigram without byte fallback behind NFC or NFKC (InWordPolicy.composes): the text up to the first character with a
 * normalisation boundary before it in the run of tail characters (tailChar) that ends the text, and that character,
 * which has exactly the whole text's ids; else the text itself. The normal form of the text is that of its part
 * before the boundary followed by that of the run from there (UAX #15). Nothing composes in the run: its characters
 * decompose into characters that are no composition's second, but for seconds right after a starter they do not
 * compose with (plainStarter), which is then the last starter before them with nothing between. So the run's normal
 * form is those characters, reordered, each in no vocabulary piece and no whitespace (the library's decomposition of
 * a character newer than its tables is the character itself, also checked: `normalized`): one-character unknown
 * nodes after the last space. Every path of the Viterbi lattice has a boundary at the run's start, and the unknown
 * tokens from there are fused into one, as those of the shortened run (one character or more) are: the same ids.
 * Unlike unknownTail, the run's characters need not be their own units (marks that reorder, Thai U+0E33).
 */
export function normalFormUnknownTail(text: string, policy: InWordPolicy, kind: (codePoint: number) => TailChar, repeated?: (first: number, mark: number) => boolean): string {
  if (policy.composes === null || policy.model !== "unigram" || policy.unknownId === null || policy.oneClass) return text;
  const marks = repeated ? repeatedMarkTail(text, kind, repeated) : text;
  if (marks !== text) return marks;
  let p = text.length;
  let s = -1;
  // a second (3) whose character before must be checked, at `second`
  let second = -1;
  while (p > 0) {
    const low = text.charCodeAt(p - 1);
    const q = p >= 2 && low >= 0xdc00 && low <= 0xdfff ? p - 2 : p - 1;
    const k = kind(text.codePointAt(q)!);
    if (second >= 0 && (k === 0 || !plainStarter(codePointAt(text, q), codePointAt(text, second)))) break;
    second = -1;
    if (k === 0) break;
    if (k === 3) second = q;
    if (k === 2) s = q;
    p = q;
  }
  // (a second that starts the run, its character before refused, is before s: s is a tail character of kind 2)
  if (s < 0) return text;
  const end = s + codePointAt(text, s).length;
  return end < text.length ? text.slice(0, end) : text;
}

/**
 * normalFormUnknownTail's other case: a text that ends in a run of one mark (a tail character of kind 1 or 3: a
 * non-starter in no vocabulary piece) after a character `first` with a boundary before it, where `first` and k >= 2
 * marks normalise as `first` and two marks followed by the other k - 2 marks alone (`repeated`: the library's
 * normaliser, encode.ts repeatedMark). Then the text up to `first` and three marks has the whole text's ids: the
 * normal form is the same up to the third mark, and the marks from there are one-character unknown nodes, fused into
 * one unknown token either way.
 */
function repeatedMarkTail(text: string, kind: (codePoint: number) => TailChar, repeated: (first: number, mark: number) => boolean): string {
  const mark = codePointBefore(text, text.length);
  const k = kind(mark.codePointAt(0)!);
  if (k !== 1 && k !== 3) return text;
  let p = text.length;
  while (p >= mark.length && text.endsWith(mark, p)) p -= mark.length;
  const count = (text.length - p) / mark.length;
  if (p === 0 || count < 4) return text;
  const first = codePointBefore(text, p).codePointAt(0)!;
  return repeated(first, mark.codePointAt(0)!) ? text.slice(0, p + 3 * mark.length) : text;
}

/**
 * Unigram without byte fallback: the first position at or after `from` right after an unknown character (one in no
 * vocabulary piece, as unknownTail) that is followed by a window character, or -1. Every Viterbi path has a boundary
 * there, so a prefix ending there has the whole text's tokens, but for its last one when that is the unknown token
 * (fused with the unknown characters after the cut in the whole text): the caller drops it.
 */
export function unknownCut(text: string, from: number, to: number, policy: InWordPolicy, kind: (codePoint: number) => CharKind): number {
  if (policy.model !== "unigram" || policy.unknownId === null) return -1;
  for (let i = Math.max(1, from); i < Math.min(to, text.length - 1); ) {
    const cp = text.codePointAt(i)!;
    const next = i + (cp > 0xffff ? 2 : 1);
    // under Precompiled the character before it is a window character too (GRAPHEME_JOINER: Hangul clusters)
    const before = policy.joiner !== GRAPHEME_JOINER || i === 0 || kind(codePointBefore(text, i).codePointAt(0)!) !== "none";
    if (kind(cp) === "unknown" && next < text.length && kind(text.codePointAt(next)!) !== "none" && before) return next;
    i = next;
  }
  return -1;
}

/**
 * What a character is to unknownTail and unknownCut: "none" when it may not be in a window or an added token holds
 * it, "unknown" when the normalised character is in no vocabulary piece (`foreign`), else "known".
 */
export type CharKind = "none" | "known" | "unknown";
export function charKind(ch: string, policy: InWordPolicy, normalize: (ch: string) => string, foreign: (normalized: string) => boolean): CharKind {
  const n = windowChar(ch, normalize(ch), policy);
  if (n === null || policy.added.some((t) => t.includes(ch) || t.includes(n))) return "none";
  return foreign(n) ? "unknown" : "known";
}

/** A window inside a long word: the UTF-16 ends of the prefixes whose common first tokens are the whole text's. */
export interface PrefixWindow {
  ends: number[];
}

/**
 * One window unit of a text (InWordPolicy.segments): the raw characters [at, end) that make one normalised character
 * `n` (a window character: windowChar, or segmentWindowChar for a mark), with a normalisation boundary at `at` and at `end`, so that the normal
 * form of the text is that of its part before `at`, then `n`, then that of the rest (Encoder.segmentUnit says when).
 * Windows read in such units have the window argument (InWordPolicy) on the normalised text, whose characters are
 * the units' `n`, and end only between units.
 */
export interface WindowUnit {
  n: string;
  end: number;
}
/**
 * The window unit that starts at `i` or null (none starts there), and `start(text, p)`: the start of the unit that
 * holds p, or p.
 */
export interface UnitReader {
  at: (text: string, i: number) => WindowUnit | null;
  start: (text: string, p: number) => number;
}

/**
 * Whether `n`, the normalised character of a window unit (WindowUnit: a normalisation segment made one character,
 * or one mark of a run proven to stay alone), may be a window character: windowChar with BYTE_JOINER's set in place
 * of NFC_JOINER's, since the unit's boundaries already make the normal form split there; the regex still sees `n`.
 */
export function segmentWindowChar(n: string, policy: InWordPolicy): boolean {
  return policy.segments && windowChar(n, n, policy, BYTE_JOINER) !== null;
}

/** windowChar of one character, for UnitReaders (Encoder.segmentUnit). */
export function ownWindowChar(ch: string, normalized: string, policy: InWordPolicy): string | null {
  return windowChar(ch, normalized, policy);
}

/**
 * A window inside a long word at or after `from` (InWordPolicy says why it is exact), or null when no window is
 * found within `maxWidth` of the characters that decide it. `normalize(ch)` is the normaliser's output for one
 * character (cached by the caller).
 */
export function wordPrefixWindow(text: string, from: number, policy: InWordPolicy, normalize: (ch: string) => string, maxWidth = 64, pieces?: PieceCount, units?: UnitReader): PrefixWindow | null {
  const added = policy.added.filter((t) => t.length > 0);
  const read = unitOf(policy, normalize, units);
  // under Precompiled a cut has a window character two places before it too (GRAPHEME_JOINER: Hangul clusters)
  const reach = added.reduce((m, t) => Math.max(m, [...t].length), policy.joiner === GRAPHEME_JOINER ? 1 : 0);
  let c = Math.max(from, 2 * reach + 1);
  if (c < text.length && text.charCodeAt(c) >= 0xdc00 && text.charCodeAt(c) <= 0xdfff) c++;
  let w = 8;
  for (let tries = 0; tries < 16; tries++) {
    // `reach` characters before c, then w + 1 + reach from c: all window characters of one class, or start after
    // the last one that is not
    let start = c;
    // (in units where windows are read in units: an added token matched in the normalised text counts its units)
    for (let k = 0; k < reach && start > 0; k++) start = units ? units.start(text, start - 1) : start - (start >= 2 && text.charCodeAt(start - 1) >= 0xdc00 && text.charCodeAt(start - 1) <= 0xdfff ? 2 : 1);
    const chars = new Set<string>();
    const seen = new Set<string>();
    const ends: number[] = [];
    let normalized = "";
    let cls: string | null = null;
    let bad = -1;
    let i = start;
    for (;;) {
      if (i >= c && ends.length >= w + 1 + reach) break;
      if (i >= text.length) return null;
      const unit = read(text, i);
      if (unit === null || (policy.oneClass && cls !== null && classOf(unit.n) !== cls)) {
        bad = i + codePointAt(text, i).length;
        break;
      }
      cls = classOf(unit.n);
      chars.add(unit.n);
      seen.add(unit.n);
      for (const ch of text.slice(i, unit.end)) seen.add(ch);
      normalized += unit.n;
      i = unit.end;
      if (i > c) ends.push(i);
    }
    if (bad >= 0) {
      // restart `reach` characters after the offending one
      c = bad;
      for (let k = 0; k < reach && c < text.length; k++) c = (units && read(text, c)?.end) || c + codePointAt(text, c).length;
      continue;
    }
    // added tokens are matched in the raw or the normalised text
    if (addedAcrossWindow(added, seen, text.slice(start, i), normalized)) return null;
    if (policy.oneClass && pieces && !oneRegexClass(chars, pieces, policy.byteWindows)) return null;
    if (policy.byteWindows && !pieces) return null;
    let nonAscii = false;
    for (const ch of chars) if (ch.charCodeAt(0) >= 0x80) nonAscii = true;
    // byte-level BPE: tokens may begin and end inside a character's bytes (midCharCrosser, crossingDepth)
    const depth = policy.model === "bpe-bytes" && nonAscii && midCharCrosser(policy.tokenBytes!(), chars) ? crossingDepth(policy.tokenBytes!(), chars) : 0;
    if (depth < 0) return null;
    const extra = policy.model === "bpe-bytes" && nonAscii ? 2 + depth : 0;
    const run = longestRunFrom(policy, chars, w - extra + 1);
    if (run === 0) return { ends: ends.slice(0, w) };
    if (run + extra > maxWidth) return null;
    w = run + extra;
  }
  return null;
}

/**
 * Whether an added token may be matched across a position of a window (wordPrefixWindow, forcedByteEnd), given the
 * characters read around it: `seen` (raw and normalised), the raw text read and its normalised text (the window
 * characters' normalised characters, one after another). A match across a position lies inside what was read (as
 * many characters on each side as the longest added token has), in the raw text or in the normalised text, so a
 * token spelled with other characters than those seen has none; one spelled with them has one only where it occurs
 * in either text read (lstrip / rstrip extend a match over whitespace, which no window character is).
 */
function addedAcrossWindow(added: readonly string[], seen: ReadonlySet<string>, raw: string, normalized: string): boolean {
  return added.some((t) => [...t].every((ch) => seen.has(ch)) && (raw.includes(t) || normalized.includes(t)));
}

/**
 * How windows read a text (wordPrefixWindow, forcedByteEnd): by `units` where given (InWordPolicy.segments), else
 * one character at a time (windowChar).
 */
function unitOf(policy: InWordPolicy, normalize: (ch: string) => string, units?: UnitReader): (text: string, i: number) => WindowUnit | null {
  if (units) return units.at;
  return (text, i) => {
    const ch = codePointAt(text, i);
    const n = windowChar(ch, normalize(ch), policy);
    return n === null ? null : { n, end: i + ch.length };
  };
}

/** The most characters forcedByteEnd reads from its start. */
const FORCED_SCAN = 256;

/**
 * Byte-level BPE whose tokens may begin inside a character and go on past it (midCharCrosser: CLIP's vocabulary
 * holds "\xac\xeb", the last byte of 사 and the first of 나, so no window of Hangul syllables is proven there): the
 * first position v at or after `from` (within FORCED_SCAN characters) that no vocabulary token can cover, else -1.
 * Every symbol of byte-level BPE is a vocabulary token (the bytes are: everyByte; a merge's result is one), so the
 * whole word's final tokens, a partition of its bytes, cover v only with a token equal to a stretch of the word's
 * bytes that starts before v and ends after it, at most `longest` bytes long (the longest token spelled with the
 * bytes of these characters only, its end-of-word suffix left out: a superset of what can stand there). Where no such stretch is a token, v is a boundary of the
 * whole word's tokens: the text before v has the whole word's tokens before v (through the model without an
 * end-of-word suffix), the text from v those from v (InWordPolicy: no merge crosses a boundary). The stretch must be
 * the whole text's normalised bytes inside one pre-token: every character within `longest` bytes on each side of v
 * is a window character (windowChar: its own unit, one character of its class once normalised), all of one class
 * and one piece to the library's pre-tokenizer (oneRegexClass), and no added token is spelled with them alone, v
 * lying as many characters inside them as the longest added token has (as in wordPrefixWindow: an occurrence across v
 * would be spelled with them). The whole text's ids at v then follow as for a window of one position.
 */
export function forcedByteEnd(text: string, from: number, policy: InWordPolicy, normalize: (ch: string) => string, pieces: PieceCount, units?: UnitReader): number {
  if (policy.model !== "bpe-bytes" || !policy.everyByte || !policy.byteWindows || !policy.tokenBytes) return -1;
  const tokens = policy.tokenBytes();
  const set = (tokens.set ??= new Set(tokens.text.split("\u0100").filter((t) => t !== "")));
  const read = unitOf(policy, normalize, units);
  let i = from;
  if (i > 0 && i < text.length && text.charCodeAt(i) >= 0xdc00 && text.charCodeAt(i) <= 0xdfff) i++;
  if (units) i = units.start(text, i);
  // the window characters from i on: their positions (UTF-16), and their normalised bytes (Latin-1) and where each begins
  const at: number[] = [];
  const byteAt: number[] = [];
  let bytes = "";
  const chars = new Set<string>();
  const seen = new Set<string>();
  let normalizedText = "";
  let cls: string | null = null;
  while (i < text.length && at.length < FORCED_SCAN) {
    const unit = read(text, i);
    if (unit === null || (cls !== null && classOf(unit.n) !== cls)) break;
    const n = unit.n;
    cls = classOf(n);
    chars.add(n);
    seen.add(n);
    for (const ch of text.slice(i, unit.end)) seen.add(ch);
    at.push(i);
    byteAt.push(bytes.length);
    bytes += String.fromCharCode(...UTF8.encode(n));
    normalizedText += n;
    i = unit.end;
  }
  if (addedAcrossWindow(policy.added.filter((t) => t.length > 0), seen, text.slice(at[0] ?? i, i), normalizedText) || (chars.size > 0 && !oneRegexClass(chars, pieces, true))) return -1;
  // the longest token spelled with these bytes only (no other can equal a stretch of them)
  const byteSet = [...new Set(bytes)].sort().join("");
  let longest = tokens.longest.get(byteSet);
  if (longest === undefined) {
    const only = new RegExp(`\u0100[${[...byteSet].map((b) => `\\x${b.charCodeAt(0).toString(16).padStart(2, "0")}`).join("")}]+(?=\u0100|$)`, "g");
    longest = 0;
    for (const m of tokens.text.matchAll(only)) longest = Math.max(longest, m[0].length - 1);
    if (tokens.longest.size > 4096) tokens.longest.clear();
    tokens.longest.set(byteSet, longest);
  }
  // an added token's occurrence across v lies inside the characters read (so it is spelled with them alone)
  const reach = policy.added.reduce((m, t) => Math.max(m, [...t].length), 0);
  for (let j = Math.max(1, reach); j + reach <= at.length; j++) {
    const v = byteAt[j]!;
    if (v < longest) continue;
    if (bytes.length - v < longest) break;
    let covered = false;
    for (let s = v - longest + 1; s < v && !covered; s++) {
      for (let e = v + 1; e <= s + longest; e++) {
        if (set.has(bytes.slice(s, e))) {
          covered = true;
          break;
        }
      }
    }
    if (!covered) return at[j]!;
  }
  return -1;
}

/**
 * How many pre-tokens the tokenizer's own pre-tokenizer makes of a (normalised) text: the Rust library's regex
 * engine decides which characters are letters, numbers or whitespace, not JavaScript's Unicode tables (which know
 * letters added in Unicode 16 that the library's tables leave unassigned: "\u{10940}!" is one piece there).
 */
export type PieceCount = (text: string) => number;

/**
 * Window characters of one class to the library's regex too: each joins the first one into one pre-token, in either
 * order (a letter and a punctuation mark pass one order at most: "!a" is one piece, "a!" two), so a run of them is
 * one pre-token.
 */
function oneRegexClass(chars: ReadonlySet<string>, pieces: PieceCount, byClass = false): boolean {
  const [first] = chars;
  for (const c of chars) if (pieces(first + c) !== 1 || pieces(c + first) !== 1 || (byClass && !libraryClass(c, pieces))) return false;
  return true;
}

/** A character of each class: every accepted regex keeps two letters, two others (and GPT-2 two numbers) together. */
const CLASS_SAMPLE = { L: "a", N: "1", O: "!" } as const;

/**
 * Whether the library's regex counts a (normalised) character in its JavaScript class (classOf): it makes one piece
 * with a sample of that class on either side. A letter so is no other or number ("a!", "a1" are two pieces in every
 * accepted regex), an other no letter or whitespace ("a!" two; "\u200b!" would be two if U+200B were whitespace:
 * `\s+(?!\S)` stops before "!"), a number (GPT-2's ` ?\p{N}+` only: numberRuns) no letter or other.
 */
function libraryClass(c: string, pieces: PieceCount): boolean {
  const sample = CLASS_SAMPLE[classOf(c)];
  return pieces(sample + c) === 1 && pieces(c + sample) === 1;
}

/**
 * Whether a byte-level vocabulary (InWordPolicy.tokenBytes) holds a token that could begin inside a character of
 * `chars` and go on past that character's end: one spelled as a proper suffix of a character's UTF-8 bytes, any
 * number of whole characters, and a non-empty prefix of a character's bytes (characters of `chars`). Without such
 * tokens every token of a text of these characters that crosses a character boundary begins at one, and one that
 * begins inside a character ends inside it or at its end (InWordPolicy, SpaceRunPolicy use this).
 */
export function midCharCrosser(tokens: ByteTokens, chars: Iterable<string>): boolean {
  const encoded = new Set<string>();
  for (const ch of chars) encoded.add([...UTF8.encode(ch)].map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join(""));
  const key = [...encoded].sort().join("|");
  let found = tokens.crossers.get(key);
  if (found === undefined) {
    // each byte is 4 characters of `key` (\xHH)
    const suffixes = new Set<string>();
    const prefixes = new Set<string>();
    for (const e of encoded) {
      for (let k = 4; k < e.length; k += 4) suffixes.add(e.slice(k));
      for (let k = 4; k <= e.length; k += 4) prefixes.add(e.slice(0, k));
    }
    found = suffixes.size > 0 && new RegExp(`\\u0100(?:${[...suffixes].join("|")})(?:${[...encoded].join("|")})*(?:${[...prefixes].join("|")})(?=\\u0100|$)`).test(tokens.text);
    if (tokens.crossers.size > 4096) tokens.crossers.clear();
    tokens.crossers.set(key, found);
  }
  return found;
}

/**
 * How many character boundaries of a text of `chars` (UTF-8 characters of a byte-level vocabulary's text,
 * ByteTokens) can lie strictly inside a chain of tokens that each begin inside a character, one where the previous
 * one ends: 0 when no token begins inside one of the characters and goes on past its end (midCharCrosser), -1 when
 * such chains have no bound (a cycle), else the most. Where the bound is D, a stretch of a text of these characters
 * whose character boundaries are none of them a token boundary holds at most run + 1 + D boundaries (run: the most
 * whole characters of the set one token holds): the token over its first boundary holds at most run + 1 of them
 * (a proper suffix of a character, run whole ones, a prefix of one), and every later token in the stretch begins
 * inside a character (no token boundary at a character boundary there), so they form such a chain. So among
 * run + 2 + D consecutive character boundaries one is a token boundary (wordPrefixWindow's width: InWordPolicy).
 * A chain's tokens are read as spelled by the characters' bytes only (a token that holds other bytes is in no text of
 * these characters); a token ending at a character's end ends the chain (counted; an overcount only widens windows).
 * State: the character and the byte inside it where a token begins; a cycle of states means -1.
 */
export function crossingDepth(tokens: ByteTokens, chars: Iterable<string>): number {
  const encoded = [...new Set([...chars].map((ch) => String.fromCharCode(...UTF8.encode(ch))))].sort();
  const key = encoded.join("|");
  let found = tokens.depths.get(key);
  if (found !== undefined) return found;
  // the tokens that begin with a UTF-8 continuation byte (only they can begin inside a character), by that byte
  let mids = tokens.mids;
  if (!mids) {
    mids = tokens.mids = new Map();
    for (const t of tokens.text.split("\u0100")) {
      if (t.length === 0 || (t.charCodeAt(0) & 0xc0) !== 0x80) continue;
      const list = mids.get(t.charCodeAt(0));
      if (list) list.push(t);
      else mids.set(t.charCodeAt(0), [t]);
    }
  }
  const memo = new Map<string, number>();
  const CYCLE = -1;
  // the most boundaries inside a chain whose first token begins at byte k of encoded[i] (0 < k < its length)
  const longest = (i: number, k: number): number => {
    const state = `${i} ${k}`;
    const known = memo.get(state);
    if (known !== undefined) {
      if (known === -2) throw CYCLE;
      return known;
    }
    memo.set(state, -2);
    const rest = encoded[i]!.slice(k);
    let best = 0;
    // after `crossed` boundaries, what is left of the token (r) against whole characters and one's prefix
    const walk = (r: string, crossed: number): void => {
      for (let j = 0; j < encoded.length; j++) {
        const e = encoded[j]!;
        if (r.length > e.length && r.startsWith(e)) walk(r.slice(e.length), crossed + 1);
        else if (r === e) best = Math.max(best, crossed);
        else if (e.startsWith(r)) best = Math.max(best, crossed + longest(j, r.length));
      }
    };
    for (const t of mids.get(rest.charCodeAt(0)) ?? []) {
      if (rest.startsWith(t)) {
        if (t.length < rest.length) best = Math.max(best, longest(i, k + t.length));
      } else if (t.startsWith(rest)) walk(t.slice(rest.length), 1);
    }
    memo.set(state, best);
    return best;
  };
  try {
    found = 0;
    for (let i = 0; i < encoded.length; i++) for (let k = 1; k < encoded[i]!.length; k++) found = Math.max(found, longest(i, k));
  } catch (e) {
    if (e !== CYCLE) throw e;
    found = CYCLE;
  }
  if (tokens.depths.size > 4096) tokens.depths.clear();
  tokens.depths.set(key, found);
  return found;
}

/**
 * A byte-level vocabulary's tokens for midCharCrosser, crossingDepth and forcedByteEnd: each after U+0100, one
 * character per byte; their answers; the tokens that begin with a continuation byte, and the tokens as a set (built
 * on first use); the longest token spelled with each set of bytes only (forcedByteEnd).
 */
export interface ByteTokens {
  text: string;
  crossers: Map<string, boolean>;
  depths: Map<string, number>;
  mids?: Map<number, string[]>;
  set?: Set<string>;
  longest: Map<string, number>;
}

/** ByteTokens of a byte-level vocabulary (`suffix`: an end-of-word suffix, left out). */
function byteTokens(vocab: readonly string[], suffix: string): ByteTokens {
  const text = vocab.map((t) => {
    const bytes = byteLevelBytes(suffix && t.endsWith(suffix) ? t.slice(0, -suffix.length) : t);
    return bytes ? "\u0100" + String.fromCharCode(...bytes) : "";
  }).join("");
  return { text, crossers: new Map(), depths: new Map(), longest: new Map() };
}

/**
 * Whether a run of window characters (each passed wordSymbol) stays inside one pre-token as a window's characters do
 * (InWordPolicy): `chars` holds the run's characters and what the normaliser makes of each; one class throughout
 * for regex pre-tokenizers (and one piece to the pre-tokenizer itself, with `pieces`), and no added token spelled
 * with them alone.
 */
export function windowRunChars(chars: ReadonlySet<string>, policy: InWordPolicy, pieces?: PieceCount): boolean {
  if (policy.added.some((t) => t.length > 0 && [...t].every((ch) => chars.has(ch)))) return false;
  if (!policy.oneClass) return true;
  if (policy.byteWindows && !pieces) return false;
  const classes = new Set([...chars].map(classOf));
  return classes.size === 1 && (!pieces || oneRegexClass(chars, pieces, policy.byteWindows));
}

/**
 * The first cut position at or after `from` and before `limit` (0 < cut < text.length), or -1 when there is none
 * (an added token's cut is looked for up to a bound: addedCut). `normalize(ch)` is
 * the normaliser's output for one character (class cuts need it), `pieces` the pre-tokenizer's count (class cuts and
 * windows are checked against it where given).
 */
export function cutAtOrAfter(text: string, from: number, policy: CutPolicy, normalize?: (ch: string) => string, pieces?: PieceCount, limit = text.length): number {
  let cut = -1;
  const spaced = policy.spaced;
  // spaces after whitespace are cuts only where afterWhitespace names that whitespace
  const spaces = policy.afterWhitespace?.size ? SPACE : SPACE_AFTER_OTHER;
  spaces.lastIndex = Math.max(1, from);
  for (let m = spaces.exec(text); m && m.index < limit; m = spaces.exec(text)) {
    const before = text.charCodeAt(m.index - 1);
    // A low surrogate's code point is checked whole; whitespace and Prepend characters are all in the BMP.
    const prev = before >= 0xdc00 && before <= 0xdfff ? "x" : String.fromCharCode(before);
    if ((!WHITESPACE.test(prev) || (policy.afterWhitespace?.has(prev) && !lstripAfter(text, m.index, policy))) && !PREPEND.test(prev) && !(spaced && addedSpans(text, m.index, spaced, normalize))) {
      cut = m.index;
      break;
    }
  }
  if (policy.ideographs) {
    CJK_IDEOGRAPH.lastIndex = Math.max(1, from);
    for (let m = CJK_IDEOGRAPH.exec(text); m && m.index < limit && (cut < 0 || m.index < cut); m = CJK_IDEOGRAPH.exec(text)) {
      // BERT's normaliser puts a space before the ideograph, which an added token may end with
      if (!(spaced && addedSpans(text, m.index, spaced, normalize))) {
        cut = m.index;
        break;
      }
    }
  }
  if (policy.separators?.size && normalize) {
    const at = separatorCut(text, from, cut < 0 ? limit : cut, policy, normalize);
    if (at >= 0) cut = at;
  }
  if (policy.classCuts && normalize) {
    const at = classCut(text, from, cut < 0 ? limit : cut, policy.classCuts, normalize, pieces, classJoiner(policy), policy.classSpaceCuts);
    if (at >= 0) cut = at;
  }
  if (policy.punctuation && normalize && pieces) {
    const at = punctuationCut(text, from, cut < 0 ? limit : cut, policy.punctuation, normalize, pieces);
    if (at >= 0) cut = at;
  }
  if (policy.addedCuts) {
    const at = addedCut(text, from, cut < 0 ? Math.min(limit, 4 * from + 65536) : cut, policy.addedCuts, "after");
    if (at >= 0) cut = at;
  }
  return cut;
}

/**
 * Whether an added token with lstrip (CutPolicy.lstripped) follows the run of whitespace that holds position q: its
 * match would take the run's whitespace on both sides of q (the library strips every whitespace character before
 * it, char::is_whitespace), so a space cut at q after whitespace is none. True where that cannot be told (null).
 */
function lstripAfter(text: string, q: number, policy: CutPolicy): boolean {
  const tokens = policy.lstripped;
  if (tokens === null) return true;
  if (tokens.length === 0) return false;
  let j = q;
  while (j < text.length && isWhitespaceCode(text.charCodeAt(j))) j++;
  return tokens.some((t) => t !== "" && text.startsWith(t, j));
}

/** A table of the separators (CutPolicy.separators) by UTF-16 code unit (all are BMP characters), per set. */
const SEPARATOR_TABLES = new WeakMap<ReadonlySet<string>, Uint8Array>();
function separatorTable(set: ReadonlySet<string>): Uint8Array {
  let table = SEPARATOR_TABLES.get(set);
  if (!table) {
    table = new Uint8Array(0x10000);
    for (const c of set) table[c.charCodeAt(0)] = 1;
    SEPARATOR_TABLES.set(set, table);
  }
  return table;
}

/**
 * The first separator cut (separatorCutAt) in [from, before), or -1. Only [from, before) is read: a scan to the
 * text's end (a regex) cost 3 ms per million characters on every call, about 90 calls for one long text.
 */
function separatorCut(text: string, from: number, before: number, policy: CutPolicy, normalize: (ch: string) => string): number {
  const table = separatorTable(policy.separators!);
  const end = Math.min(before, text.length);
  for (let q = Math.max(1, from); q < end; q++) if (table[text.charCodeAt(q)] && separatorCutAt(text, q, policy, normalize)) return q;
  return -1;
}

/** Characters that join the one before them into a grapheme cluster in some UAX #29 version (GB9, GB9a), or may (unassigned). */
const CLUSTER_JOINS_NEXT = /[\p{Grapheme_Extend}\p{Emoji_Modifier}\p{Mc}\u200D\u0E33\u0EB3\p{Cn}\p{Cs}]/u;
/** What may stand before a separator cut: a letter, number, punctuation mark or symbol (not whitespace, a mark, a control). */
const BEFORE_SEPARATOR = /^[\p{L}\p{N}\p{P}\p{S}]$/u;

/**
 * Whether q, before a separator c (CutPolicy.separators, from whitespaceRules: whitespace other than U+0020, and
 * under Precompiled controls such as U+200B, that the normaliser makes a space Metaspace splits at, or that the
 * pre-tokenizer drops), is a cut as a space would be: the text before q has the whole text's pre-tokens before q,
 * the text from q those from q. The normalisers accepted (normalizerLocal) leave the text on the two sides of q
 * apart: c is a starter that composes with nothing and decomposes to whitespace (a normal form has a boundary
 * before it); under Precompiled, which transforms each grapheme cluster, c is a cluster of its own: no Prepend
 * character stands before it (GB9b; c is no mark, ZWJ or spacing mark), none before the character before it
 * either (so that cluster ends as it does alone), and no character that may join it follows (CLUSTER_JOINS_NEXT;
 * CR before LF is one cluster). So the normalised text is the normalised part before q, then what c makes alone
 * (whitespace), then the normalised rest. The character before q is a letter, number, punctuation mark or symbol
 * whose normalised form does not end in whitespace, so the normalised part before q ends in none and a Replace of
 * ` {2,}` cannot take whitespace on both sides of q. whitespaceRules checked with the library that the pre-tokens of
 * such a text are those of its two parts (the pre-tokenizer splits at c: Metaspace at the space it becomes,
 * WhitespaceSplit and BertPreTokenizer at the whitespace, which they drop; Metaspace prepends no replacement to a
 * part that begins with one). Added tokens: one that holds whitespace must not match across q (addedSpans); one
 * with lstrip takes only whitespace, all after q; with rstrip, left cuts are not taken (leftCuts) and the right
 * part's ids are the same. Texts whose words were separated by tabs, line breaks, U+00A0 or U+3000 and no U+0020
 * had no cut under Metaspace (T5, XLM-R, bge-m3, Gemma, DeBERTa-v3, ColPali).
 * A control or format character (CutPolicy.separatorLeads, checked by whitespaceRules with the library) may stand
 * where the letter does: it is a grapheme cluster of its own (GB4, GB5, before Prepend's GB9b) and a starter that
 * composes with nothing, so the text on its two sides normalises apart. One the normaliser keeps (U+00AD) ends the
 * normalised part before q in itself, no whitespace; one it drops leaves that part as it was without it, so the cut
 * looks past up to SEPARATOR_LEAD_REACH of them to what stands before them, which must be a letter, number,
 * punctuation mark, symbol or kept lead (not whitespace, which a Replace of ` {2,}` would join across q; nor the text's
 * start, where the part before q would hold no token). The input made only of controls, formats and soft hyphens took the library's whole time (t5, XLM-R).
 */
function separatorCutAt(text: string, q: number, policy: CutPolicy, normalize: (ch: string) => string): boolean {
  const c = text[q]!;
  const next = codePointAt(text, q + 1);
  let p = q;
  let prev = codePointBefore(text, p);
  const leads = policy.separatorLeads;
  for (let k = 0; leads !== null && leads(prev) === false; k++) {
    if (k === SEPARATOR_LEAD_REACH) return false;
    p -= prev.length;
    prev = codePointBefore(text, p);
  }
  // a kept control or format character is a cluster of its own whatever stands before it
  const keptLead = leads !== null && leads(prev) === true;
  if (!keptLead && (prev === "" || !BEFORE_SEPARATOR.test(prev) || PREPEND.test(codePointBefore(text, p - prev.length)) || /\s$/u.test(normalize(prev)))) return false;
  if (next !== "" && (CLUSTER_JOINS_NEXT.test(next) || (c === "\r" && next === "\n"))) return false;
  return !(policy.spaced && addedSpans(text, q, policy.spaced, normalize));
}

/**
 * The library splits a text at its added tokens first (plain ones: in the raw text, leftmost-longest, never
 * overlapping) and normalises, pre-tokenizes and tokenizes each part between them alone. An occurrence that overlaps
 * no other occurrence of an added token is matched in any text that holds it whole, so the text up to its end (or
 * from its start) is the whole text's parts up to (from) there: its end is a cut, its start a left cut. The first
 * such end in [from, before) ("after"), or the last such start in (before - 4 (text.length - before), before]
 * ("before"); -1 when there is none.
 */
function addedCut(text: string, from: number, before: number, contents: readonly string[], side: "after" | "before"): number {
  const longest = contents.reduce((m, c) => Math.max(m, c.length), 0);
  const lo = side === "after" ? Math.max(0, from - longest) : Math.max(0, before - 4 * (text.length - before));
  const hi = Math.min(text.length, before + longest);
  if (hi <= lo) return -1;
  const part = text.slice(lo, hi);
  let best = -1;
  for (const c of contents) {
    for (let i = part.indexOf(c); i >= 0; i = part.indexOf(c, i + 1)) {
      const s = lo + i;
      const e = s + c.length;
      const at = side === "after" ? e : s;
      if (side === "after" && (at >= before || (best >= 0 && at >= best))) break;
      if (at <= 0 || at >= text.length || (side === "after" ? at < from : at > before || at <= best)) continue;
      if (isolatedOccurrence(text, s, e, contents, longest)) {
        best = at;
        if (side === "after") break;
      }
    }
  }
  return best;
}

/** Whether no added token's occurrence but [s, e) itself overlaps [s, e) (`longest`: the longest content's length). */
function isolatedOccurrence(text: string, s: number, e: number, contents: readonly string[], longest: number): boolean {
  const lo = Math.max(0, s - longest + 1);
  const near = text.slice(lo, e + longest);
  for (const c of contents) {
    for (let i = near.indexOf(c); i >= 0 && lo + i < e; i = near.indexOf(c, i + 1)) {
      if (lo + i + c.length > s && !(lo + i === s && c.length === e - s)) return false;
    }
  }
  return true;
}

/**
 * A letter or number followed by a character of another class or by whitespace other than U+0020 (a tab, U+00A0,
 * U+3000: classSpaceCutAt; a U+0020 space is a space cut), or a number followed by a number (a cut only where the
 * pre-tokenizer puts each number alone: Qwen's `\p{N}`).
 */
const CLASS_CHANGE = /\p{L}(?=[^\p{L} ])|\p{N}(?=[^ ])/gu;
/** CLASS_CHANGE without a number followed by a number, where the pre-tokenizer keeps numbers together (a long run of digits then costs no call per digit). */
const CLASS_CHANGE_NOT_DIGITS = /\p{L}(?=[^\p{L} ])|\p{N}(?=[^ \p{N}])/gu;

/**
 * The characters that may not stand on either side of a class cut: the pipeline's window joiners
 * (InWordPolicy.joiner: for byte-level BPE behind a regex with no normaliser, only whitespace and code points
 * without a character, so a letter followed by a combining mark or a zero-width space is a cut where the regex
 * splits them), else JOINER.
 */
const classJoiner = (policy: CutPolicy): RegExp => policy.inWord?.joiner ?? JOINER;

/** Whether the pre-tokenizer puts two numbers in different pieces (Qwen's `\p{N}`), so that a cut between them is possible. */
const numbersApart = (pieces?: PieceCount): boolean => pieces !== undefined && pieces("12") >= 2;

/**
 * The first class cut in [from, before) (CutPolicy.classCuts), or -1: both characters around it are their own units
 * for the normaliser (each maps alone to one character of its own class that joins no neighbour), and no added
 * token holds them (so no added token match spans the cut).
 */
function classCut(text: string, from: number, before: number, added: readonly string[], normalize: (ch: string) => string, pieces: PieceCount | undefined, joiner: RegExp, spaces: boolean): number {
  const changes = numbersApart(pieces) ? CLASS_CHANGE : CLASS_CHANGE_NOT_DIGITS;
  changes.lastIndex = Math.max(1, from - 1);
  const pairs: ClassPairs = new Map();
  for (let m = changes.exec(text); m && m.index < before; m = changes.exec(text)) {
    const q = m.index + m[0].length;
    if (q >= from && classCutAt(text, q, added, normalize, pieces, joiner, spaces, pairs)) return q < before ? q : -1;
  }
  return -1;
}

/**
 * What classCutAt found for the two characters around a position (the key, both of them) within one scan, whose
 * arguments stay the same: a cut or none whatever follows, or "segment" where the verdict depends on the characters
 * after them (markCutAt). A long text of few characters asks about the same pairs again and again (a decomposed
 * text: a letter and U+0308 or U+3099 at every second position).
 */
type ClassPairs = Map<string, boolean | "segment">;

/**
 * Whether q is a class cut (classCut): the characters around it are of different classes (or both numbers, which
 * only the pre-tokenizer's count can accept) and their own units (ownUnit under the pipeline's `joiner`: each maps
 * alone to one character that no neighbour joins, so the normalised text is the normalised parts on each side of
 * q); with `pieces`, the pre-tokenizer splits the two
 * (normalised) characters apart. That is enough for the accepted regexes: a letter's pre-token goes on only into
 * letters (or after an apostrophe's contraction, which is one piece alone), a number's only into numbers, other
 * characters' only into others, letters after them, or line breaks, and each of these is one piece alone.
 */
function classCutAt(text: string, q: number, added: readonly string[], normalize: (ch: string) => string, pieces: PieceCount | undefined, joiner: RegExp, spaces: boolean, pairs?: ClassPairs): boolean {
  const a = codePointBefore(text, q);
  const b = codePointAt(text, q);
  if (b === "") return false;
  let pair = pairs?.get(a + b);
  if (pair === undefined) {
    pair = classPairCut(a, b, added, normalize, pieces, joiner, spaces);
    if (pairs && pairs.size >= 65_536) pairs.clear();
    pairs?.set(a + b, pair);
  }
  return pair === "segment" ? markCutAt(text, q, normalize(a), added, normalize, pieces!) : pair;
}

/** classCutAt for the characters a, b around the position: true or false, or "segment" where markCutAt decides. */
function classPairCut(a: string, b: string, added: readonly string[], normalize: (ch: string) => string, pieces: PieceCount | undefined, joiner: RegExp, spaces: boolean): boolean | "segment" {
  const ca = classOf(a);
  if (ca === "O") return false;
  const space = WHITESPACE.test(b);
  if (space ? b === " " || !isWhitespaceCode(b.codePointAt(0)!) || !pieces : classOf(b) === ca && !(ca === "N" && pieces)) return false;
  const na = normalize(a);
  const nb = normalize(b);
  const own = (ch: string, n: string) => ownUnit(ch, n, joiner) && classOf(ch) === classOf(n);
  if (!own(a, na) || added.some((t) => t.includes(a + b))) return false;
  if (space) return spaces && !added.some((t) => t.includes(na + nb)) && classSpaceCutAt(na, nb, pieces!);
  if (own(b, nb)) return !added.some((t) => t.includes(na + nb)) && (!pieces || pieces(na + nb) >= 2);
  // markCutAt's conditions on the two characters alone first (a mark that composes: no cut whatever follows)
  return joiner === NFC_JOINER && pieces !== undefined && !composesAfter(b) && !composesAfter(nb) && plainStarterAlone(a) && plainStarterAlone(na) && "segment";
}

/** The most code points markCutAt reads from its cut to the next normalisation boundary (past it: no cut). */
const MARK_SEGMENT = 32;

/**
 * Whether q is a class cut behind NFC (classCutAt, NFC_JOINER: NFC, Lowercase, whitespace Replace, then one of the
 * accepted regexes and byte-level BPE) where the character b after it is not its own unit: a letter or number `a`
 * followed by a non-starter mark (Arabic harakat U+064E-0651, ccc 30-33; Hebrew niqqud; U+0316). classCutAt has
 * checked that `a` is its own unit (one character `na` of its class once normalised, with a normalisation boundary
 * before it) and that no added token holds a + b.
 *
 * Normalisation. Let W = X a S Y, where the segment S runs from b (at q) up to the first character c after it with a
 * normalisation boundary before it in the pipeline's output too (normalFormBoundary of c and of normalize(c)), or to
 * the text's end, at most MARK_SEGMENT code points (past that: no cut). Conditions:
 * (1) `a` and `na` are plain starters (plainStarter: one code point, canonical combining class 0, their own canonical
 *     and compatibility decompositions, no composition's second character);
 * (2) no character of the decompositions (canonical and compatibility) of S's characters, and of what the normaliser
 *     makes of each alone, is the second character of a canonical composition (COMPOSITION_SECONDS; U+064E-0651 are
 *     not, U+0653-0655 are: alef + U+0653 is U+0622).
 * Lowercase and whitespace Replace work per character (Replace touches only whitespace, and neither a, S nor the
 * positions around q hold any), so wherever they stand in the sequence, NFC sees X' a' S' Y', each part mapped alone,
 * where a' decomposes to `na` (1: NFD(NFC(x)) = NFD(x)), S' has no composition second in its decomposition (2) and Y'
 * starts with a boundary (c's output). NFC is decomposition, canonical reordering and composition:
 * - decomposition works per character: D(W') = D(X') na D(S') D(Y');
 * - reordering sorts each run of non-starters and stops at starters: na is one, so no mark of S' moves before it, and
 *   Y' begins with a starter, so R(D(W')) = R(D(X') na) R(D(S')) R(D(Y'));
 * - composition joins a character to the last starter before it only when the pair is a canonical composition, whose
 *   second it then is: no character of R(D(S')) is one, so none joins anything (nothing composes with `na` after it:
 *   it composes with nothing that follows in the segment); `na` is no second either, so it joins nothing before it;
 *   Y' starts with a starter that is no second, and every later character's last starter is at or after it. So each
 *   character of X' na composes as in X' na alone, and each from S' on as in S' Y' alone.
 * Hence NF(W) = NF(X a) + NF(S Y), and NF(X a) ends with `na`: the normalised text splits at q.
 * (Under NFC the plainness of `a` is stronger than needed: every letter whose NFC is one character gives the same
 * with one more mark after it, by a scan of all code points; the proof above needs it, and Arabic, Hebrew and Latin
 * base letters have it.)
 *
 * Pre-tokens. The first character f of NF(S) (after reordering: shadda U+0651, ccc 33, written before fatha U+064E,
 * ccc 30, goes after it) must be no letter, number or whitespace to JavaScript, and the library's pre-tokenizer must
 * split `na` + f in two (`pieces`): then the text splits at q as for any class cut (classCutAt: a letter's or a
 * number's pre-token never goes on into such a character under the accepted regexes, and the pre-token after q is
 * matched from q, the regexes having no look-behind). An added token matched in the raw text across q would hold a + b
 * (classCutAt refused that), one matched in the normalised text `na` + f. Byte-level BPE and CLIP's end-of-word suffix
 * ("</w>", at the end of each pre-token) work per pre-token: the text before q has the whole text's tokens before q,
 * the text from q those from q. The other way, a mark followed by a letter, is no cut here: Qwen's
 * `[^\r\n\p{L}\p{N}]?\p{L}+` takes one non-letter before the letters after it.
 */
function markCutAt(text: string, q: number, na: string, added: readonly string[], normalize: (ch: string) => string, pieces: PieceCount): boolean {
  // (1), and (2) for the mark at q: classPairCut has asked them of the two characters around q
  let e = q;
  for (let n = 0; e < text.length; n++) {
    const c = codePointAt(text, e);
    const nc = normalize(c);
    if (e > q && nc !== "" && normalFormBoundary(c) && normalFormBoundary(nc)) break;
    if (n >= MARK_SEGMENT || composesAfter(c) || composesAfter(nc)) return false;
    e += c.length;
  }
  const f = codePointAt(normalize(text.slice(q, e)), 0);
  return f !== "" && classOf(f) === "O" && !WHITESPACE.test(f) && !added.some((t) => t.includes(na + f)) && pieces(na + f) >= 2;
}

/** A plain starter (markCutAt): one code point of canonical combining class 0, its own NFD and NFKD, no composition's second. */
const plainStarterAlone = memoized((ch) => [...ch].length === 1 && starter(ch) && ch.normalize("NFD") === ch && ch.normalize("NFKD") === ch && !compositionSecond(ch));

/** Whether the canonical or compatibility decomposition of `s` holds a composition's second (or an unassigned code point). */
const composesAfter = memoized((s) => [...s.normalize("NFD"), ...s.normalize("NFKD")].some(compositionSecond));

/**
 * A predicate of short strings (characters) remembered by its argument: the Unicode properties markCutAt asks of
 * each character of a long text cost several normalize() calls each (a decomposed text asks them at every letter).
 */
function memoized(f: (s: string) => boolean): (s: string) => boolean {
  const memo = new Map<string, boolean>();
  return (s) => {
    let v = memo.get(s);
    if (v === undefined) {
      if (memo.size >= 65_536) memo.clear();
      memo.set(s, (v = f(s)));
    }
    return v;
  };
}

/**
 * Whether a letter or number `a` (its own unit, in no added token with the character after it: classCutAt) and the
 * whitespace character after it other than U+0020 are a class cut, given what the normaliser makes of that character
 * alone (`nb`). The regexes accepted (regexSplitsOnly) end a letter's or number's pre-token at the first character
 * that is no letter (number), and whitespace is neither to the library (`pieces` of a, the whitespace and a again is
 * at least 2: CLIP's regex drops the whitespace, GPT-2's makes it a piece), so a pre-token ends at the position,
 * where `a` is a letter or number to the library too: not another character (`a!` is two pieces; a letter of Unicode
 * 16 that the library's tables do not know is one piece with "!", and Qwen's ` ?[^\s\p{L}\p{N}]+[\r\n]*` would take
 * the line breaks after it) and never whitespace (White_Space is a fixed set of no letters or numbers), and matches before it never look past it; the regexes have no
 * look-behind, so the whole text's pre-tokens from the position on are those of the text from there alone. The
 * normalisers accepted (normalizerLocal) leave the two sides apart: the character is whitespace to the library
 * (RUST_WHITESPACE), a starter that composes with nothing, so a normal form has a boundary before it and after `a`
 * (its own unit); Lowercase works per character; a Replace of whitespace matches runs of whitespace, which `a` is
 * not; Strip and Prepend touch only the text's ends, which the prefix before the position shares with the whole
 * text, and left cuts are not taken behind them (leftCuts). The character alone must normalise to whitespace (CLIP
 * makes a space of it). An added token with rstrip would take the whitespace after it: `spaces` is false then
 * (CutPolicy.classSpaceCuts). Texts whose words are separated by tabs, U+00A0 or U+3000 and no U+0020 had no cut under byte-level
 * BPE (0.9-1.8 s at 1M characters on roberta-base).
 */
function classSpaceCutAt(na: string, nb: string, pieces: PieceCount): boolean {
  return nb.length > 0 && [...nb].every((c) => isWhitespaceCode(c.codePointAt(0)!)) && pieces(na + "!") === 2 && pieces(na + nb + na) >= 2;
}

/** Punctuation as BertPreTokenizer counts it (ASCII symbols too), in JavaScript's tables (the library's decides). */
const IS_PUNCTUATION = /[\p{P}!-\/:-@[-`{-~]/u;
/**
 * Where punctuationCut looks: punctuation, and the characters that are punctuation once NFD and accent stripping
 * have made them so (U+2260 NOT EQUAL TO is "=" and U+0338, which accent stripping removes; U+226E, U+226F, U+1FEF
 * GREEK VARIA: every such character of Unicode 14, from a scan of all code points). Only where to look: each
 * candidate is decided by punctuationCutAt with the tokenizer's own normaliser and pre-tokenizer.
 */
const MAYBE_PUNCTUATION = new RegExp(`[${IS_PUNCTUATION.source.slice(1, -1)}\u1fef\u2260\u226e\u226f]`, "u");
/**
 * Where punctuationCut looks: MAYBE_PUNCTUATION, and whitespace other than U+0020 (a tab, U+00A0, U+3000: BERT's
 * normaliser makes a space of each, which the pre-tokenizer drops; space cuts are taken at U+0020 only).
 */
const PUNCTUATION = new RegExp(`[${IS_PUNCTUATION.source.slice(1, -1)}\u1fef\u2260\u226e\u226f\t-\r\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]`, "gu");

/** The first punctuation cut in [from, before) (CutPolicy.punctuation), or -1: before or after a punctuation mark. */
function punctuationCut(text: string, from: number, before: number, added: readonly string[], normalize: (ch: string) => string, pieces: PieceCount): number {
  PUNCTUATION.lastIndex = Math.max(0, from - 2);
  for (let m = PUNCTUATION.exec(text); m && m.index <= before; m = PUNCTUATION.exec(text)) {
    for (const q of [m.index, m.index + m[0].length]) {
      if (q >= Math.max(1, from) && q < before && punctuationCutAt(text, q, added, normalize, pieces)) return q;
    }
  }
  return -1;
}

/**
 * Whether q is a punctuation cut: the characters around it are each their own unit for BERT's normaliser (per
 * character: each maps alone to one character that is not whitespace, a mark, a control or another joiner; canonical
 * reordering moves marks only among marks, and punctuation is a starter), one of them is punctuation (normalised: U+2260
 * is "=" behind accent stripping; MAYBE_PUNCTUATION finds the candidates), no added
 * token holds the two, raw or normalised (so no added token match spans q), and the library's pre-tokenizer splits the two normalised
 * characters apart: BertPreTokenizer decides each split by the character alone (whitespace, or punctuation isolated),
 * so the two are in different pre-tokens of any text that holds them, and the text before q is the whole text's
 * pre-tokens before q (after q: from q on).
 */
function punctuationCutAt(text: string, q: number, added: readonly string[], normalize: (ch: string) => string, pieces: PieceCount): boolean {
  const a = codePointBefore(text, q);
  const b = codePointAt(text, q);
  if (b === "" || a === "") return false;
  if (WHITESPACE.test(a)) return whitespaceCutAt(a, b, added, normalize, pieces);
  if (!MAYBE_PUNCTUATION.test(a) && !MAYBE_PUNCTUATION.test(b)) return false;
  const na = normalize(a);
  const nb = normalize(b);
  // punctuation to the pre-tokenizer, which sees the normalised text (U+2260 is "=" there)
  if (!IS_PUNCTUATION.test(na) && !IS_PUNCTUATION.test(nb)) return false;
  // an added token is matched in the raw text or, normalised (PyLate's "[Q] " as "[q] "), in the normalised one
  return ownUnit(a, na) && ownUnit(b, nb) && !added.some((t) => t.includes(a + b) || t.includes(na + nb) || [...t].map(normalize).join("").includes(na + nb)) && pieces(na + nb) >= 2;
}

/**
 * Whether the position between a whitespace character `a` and `b` is a cut under BERT's pipeline (punctuationCut
 * finds them): BertNormalizer makes each whitespace character alone a space (clean_text, per character; a space is a
 * starter that composes with nothing, so accent stripping's NFD leaves the text on its two sides apart), and
 * BertPreTokenizer drops it (the library's pre-tokenizer gives no piece for `a` normalised) and splits there whatever
 * stands around it; `b` is no whitespace and its own unit; no added token holds the two, raw or normalised (an
 * occurrence across the position would). So the text before the position has the whole text's pre-tokens before it,
 * the text after it those after it. Texts whose words are separated by tabs, U+00A0 or U+3000 and no U+0020 space had
 * no cut at all.
 */
function whitespaceCutAt(a: string, b: string, added: readonly string[], normalize: (ch: string) => string, pieces: PieceCount): boolean {
  if (WHITESPACE.test(b)) return false;
  const na = normalize(a);
  const nb = normalize(b);
  return (
    /^ +$/.test(na) &&
    pieces(na) === 0 &&
    ownUnit(b, nb) &&
    !added.some((t) => t.includes(a + b) || t.includes(na + nb) || [...t].map(normalize).join("").includes(na + nb))
  );
}

/** Cheap class codes by code point for the backward scan (0 not yet known, 1 letter, 2 number, 3 other, 4 space). */
let CLASS_CODES: Uint8Array | null = null;
function classCode(cp: number): number {
  CLASS_CODES ??= new Uint8Array(0x110000);
  let v = CLASS_CODES[cp]!;
  if (v === 0) {
    const ch = String.fromCodePoint(cp);
    v = WHITESPACE.test(ch) ? 4 : { L: 1, N: 2, O: 3 }[classOf(ch)];
    CLASS_CODES[cp] = v;
  }
  return v;
}

/**
 * The last cut position at or before `before` and at or after `floor` (0 < cut < text.length) from which the text's suffix has the whole
 * text's last tokens (CutPolicy.leftCuts), or -1: a space cut, an ideograph cut, or a class cut. At a space cut
 * the suffix starts with the space, which a prefix space, Metaspace's ▁ and byte-level BPE treat as the whole text
 * does; class cuts need no prefix space added (leftClassCuts).
 */
export function cutAtOrBefore(text: string, before: number, policy: CutPolicy, normalize?: (ch: string) => string, pieces?: PieceCount, floor = 0): number {
  const cut = policy.leftCuts ? textCutAtOrBefore(text, before, policy, normalize, pieces, floor) : -1;
  const added = policy.addedCuts ? addedCut(text, 0, before, policy.addedCuts, "before") : -1;
  return Math.max(cut, added >= floor ? added : -1);
}

/** cutAtOrBefore's space, ideograph and class cuts, at or after `floor`. */
function textCutAtOrBefore(text: string, before: number, policy: CutPolicy, normalize: ((ch: string) => string) | undefined, pieces: PieceCount | undefined, floor: number): number {
  let cut = -1;
  const spaced = policy.spaced;
  for (let i = text.lastIndexOf(" ", Math.min(before, text.length - 1)); i > 0 && i >= floor; i = text.lastIndexOf(" ", i - 1)) {
    const low = text.charCodeAt(i - 1);
    const prev = low >= 0xdc00 && low <= 0xdfff ? "x" : String.fromCharCode(low);
    if (WHITESPACE.test(prev) && !policy.afterWhitespace?.has(prev)) {
      // inside a run of whitespace: where no whitespace may come before a space cut, only the run's first character
      // may be a space after something else
      if (!policy.afterWhitespace?.size) while (i > 1 && isWhitespaceCode(text.charCodeAt(i - 2))) i--;
      continue;
    }
    if (!PREPEND.test(prev) && !(spaced && addedSpans(text, i, spaced, normalize)) && !(WHITESPACE.test(prev) && lstripAfter(text, i, policy))) {
      cut = i;
      break;
    }
  }
  if (policy.separators?.size && normalize) {
    const table = separatorTable(policy.separators);
    for (let q = Math.min(before, text.length - 1); q > cut && q > 0 && q >= floor; q--) {
      if (table[text.charCodeAt(q)] && separatorCutAt(text, q, policy, normalize)) {
        cut = q;
        break;
      }
    }
  }
  const classes = policy.classCuts && policy.leftClassCuts && normalize ? policy.classCuts : null;
  const joiner = classJoiner(policy);
  const punctuation = policy.punctuation && normalize && pieces ? policy.punctuation : null;
  const digits = numbersApart(pieces);
  const pairs: ClassPairs = new Map();
  if (!policy.ideographs && !classes && !punctuation) return cut;
  for (let q = Math.min(before, text.length - 1); q > cut && q > 0 && q >= floor; q--) {
    const c = text.charCodeAt(q);
    if (c >= 0xdc00 && c <= 0xdfff) continue;
    if (policy.ideographs && ((c >= 0x3400 && c <= 0x4dbf) || (c >= 0x4e00 && c <= 0x9fff) || (c >= 0xf900 && c <= 0xfaff)) && !(spaced && addedSpans(text, q, spaced, normalize))) return q;
    if (punctuation && punctuationCutAt(text, q, punctuation, normalize!, pieces!)) return q;
    if (classes) {
      const low = text.charCodeAt(q - 1);
      const prev = low >= 0xdc00 && low <= 0xdfff && q >= 2 ? text.codePointAt(q - 2)! : low;
      const ca = classCode(prev);
      const cb = classCode(text.codePointAt(q)!);
      if ((ca === 1 || ca === 2) && (cb !== 4 || (c !== 32 && policy.classSpaceCuts)) && (cb !== ca || (ca === 2 && digits)) && classCutAt(text, q, classes, normalize!, pieces, joiner, policy.classSpaceCuts, pairs)) return q;
    }
  }
  return cut;
}

/**
 * Cuts inside a run of whitespace, for byte-level BPE behind GPT-2's regex (ByteLevel with use_regex) or the Llama 3 /
 * Qwen2 / Qwen3 Split regex (Isolated, then ByteLevel without its regex). The space cut (cutAtOrAfter) is never taken
 * after whitespace, because a run of whitespace is one pre-token (`\s+(?!\S)`): a text of a million spaces or
 * newlines had no cut at all and was tokenized whole. A position v with run characters on both sides (spaceChar:
 * whitespace to the library's pre-tokenizer, kept by the normaliser) is exact when the text on one side of v
 * pre-tokenizes as the whole text does there but for the pre-token P around v, which it holds cut at v, and P's BPE
 * tokens have a boundary at v.
 *
 * Pre-tokens. Call the run [s, k) (no run character at s - 1 or k, and no character there that might be whitespace to
 * the library: MAYBE_SPACE). No match of either regex that starts before s reaches into the run, but for Qwen's
 * ` ?[^\s\p{L}\p{N}]+[\r\n]*`, which takes the line breaks at a run's start after punctuation: when the run starts
 * with a line break after a character that the pre-tokenizer does not keep apart from a line break (`pieces` of the
 * two is not 2: punctuation, not a letter or number), v must lie past the run's first character that is not a line
 * break, or, where the two are one piece, in those line breaks as takenLineBreak says. In the run:
 * - GPT-2: `\s+(?!\S)` takes [s, k - 1) (all of it at the text's end); the last character goes alone or with the
 *   word after it. A prefix ending at v in (s, k) ends with the pre-token [s, v), a prefix of P; a suffix starting at
 *   v begins with [v, k - 1) (v < k - 1), a suffix of P, or with the same last piece (v = k - 1, a boundary).
 * - Qwen: `\s*[\r\n]+` takes the run up to its last line break L (the greedy \s* backs off to it), then the rest goes
 *   as in GPT-2 (a last character that is not a line break may join the letters after it: `[^\r\n\p{L}\p{N}]?\p{L}+`).
 *   A suffix starting at v in (s, k) begins with [v, L] or [v, k - 1): a suffix of the whole text's pre-token. A
 *   prefix ending at v ends with a prefix of the whole text's pre-token only when text[v - 1] is a line break (its
 *   `\s*[\r\n]+` ends at v) or no line break follows in [v, k) (v is past L); otherwise it ends with two pre-tokens
 *   ([s, l] and (l, v), l its last line break) where the whole text has one.
 * Added tokens are matched before all this: one holding whitespace must not match across v (addedSpans), one with
 * lstrip must not follow the run (its match takes the run's whitespace), none may have rstrip (spaceRunPolicy); the
 * others hold no whitespace and cannot meet v.
 *
 * BPE. Every byte is a vocabulary token (everyByte), so P's tokens are vocabulary tokens over P's bytes. When no
 * vocabulary token equals a stretch of the run's bytes that starts before v and ends after it, v is a boundary of
 * P's tokens (forced). Otherwise, with `reach` the furthest end of such a stretch, the token that holds the byte
 * before v ends at v or by `reach`; where the characters from v to there are single bytes, that end is a character
 * position, so P's tokens have a boundary among v .. p (p = reach): a window, as in InWordPolicy. With characters of
 * several bytes (U+00A0, U+3000) that token may end inside one; where no vocabulary token begins inside one of the
 * run's characters and goes on past its end (midCharCrosser), the token over v begins at a character boundary and the
 * tokens after one that ends inside a character end inside it or at its end, so P's tokens have a boundary among the
 * character positions from v to the first at or after `reach`: the window. BPE's tokens on
 * each side of a boundary of P are that side's alone (no merge crosses it, and each side's merges run in the same
 * order alone), so the prefix (suffix) ending (starting) at the boundary has exactly the whole text's tokens before
 * (after) it, and the tokens that the prefixes (suffixes) of every window position begin (end) with, by id and
 * offsets, are among them. Not with ignore_merges (a pre-token found whole in the vocabulary is one token),
 * dropout, a continuing-subword prefix or an end-of-word suffix; suffixes need no prefix space either (ByteLevel's
 * add_prefix_space puts one before a suffix that starts with other whitespace). The normaliser must map the run's
 * characters to themselves and treat them alone (Unicode normal forms: whitespace is a starter that composes with
 * nothing; Lowercase).
 */
export interface SpaceRunPolicy {
  /** The Llama 3 / Qwen regex, whose `\s*[\r\n]+` ends a whitespace pre-token at the run's last line break. */
  lineBreaks: boolean;
  /** Suffixes from a position in a run have the whole text's last tokens (no prefix space is added). */
  suffixes: boolean;
  /** Contents of added tokens with lstrip: none may follow a run (its match would take the run). */
  lstrip: readonly string[];
  /**
   * The vocabulary's tokens (byte-level strings), the longest one's length, and the longest holding an ASCII
   * whitespace byte (bytes; built on first use).
   */
  vocab: () => SpaceRunVocab;
}

interface SpaceRunVocab {
  tokens: ReadonlySet<string>;
  longest: number;
  longestAscii: number;
  /** The tokens' bytes for midCharCrosser (built on first use). */
  bytes: () => ByteTokens;
}

/** GPT-2's regex, and the Llama 3 / Qwen ones with `\s*[\r\n]+` (SAFE_SPLIT_REGEXES). */
const GPT2_REGEX = [...SAFE_SPLIT_REGEXES][1]!;
const LINE_BREAK_REGEXES = [...SAFE_SPLIT_REGEXES].slice(2);

const SPACE_KEEPING = ["NFC", "NFD", "NFKC", "NFKD", "Lowercase"];
/** Normalisers that keep whitespace and treat each whitespace character alone (SpaceRunPolicy). */
function spaceKeepingNormalizer(n: Json): boolean {
  if (!n) return true;
  if (n.type === "Sequence") return list(n.normalizers).every(spaceKeepingNormalizer);
  return SPACE_KEEPING.includes(String(n.type));
}

const nonEmpty = (x: unknown) => typeof x === "string" && x !== "";

/** The whitespace-run policy of a byte-level BPE tokenizer.json (SpaceRunPolicy), else null. */
function spaceRunPolicy(tj: Record<string, unknown>, model: Record<string, unknown>, added: Json[]): SpaceRunPolicy | null {
  if (modelType(model) !== "BPE" || !model.vocab || typeof model.vocab !== "object" || Array.isArray(model.vocab)) return null;
  if ((model.dropout !== null && model.dropout !== undefined) || model.ignore_merges === true) return null;
  if (nonEmpty(model.continuing_subword_prefix) || nonEmpty(model.end_of_word_suffix)) return null;
  if (!spaceKeepingNormalizer(tj.normalizer as Json)) return null;
  const pre = tj.pre_tokenizer as Json;
  const parts = preTokenizerParts(pre);
  let lineBreaks: boolean;
  if (parts.length === 1 && parts[0]?.type === "ByteLevel" && parts[0].use_regex !== false) lineBreaks = false;
  else if (
    parts.length === 2 && parts[0]?.type === "Split" && parts[0].behavior === "Isolated" && parts[0].invert !== true &&
    parts[1]?.type === "ByteLevel" && parts[1].use_regex === false
  ) {
    const regex = ((parts[0].pattern ?? {}) as { Regex?: string }).Regex;
    if (regex === GPT2_REGEX) lineBreaks = false;
    else if (regex !== undefined && LINE_BREAK_REGEXES.includes(regex)) lineBreaks = true;
    else return null;
  } else return null;
  if (added.some((t) => t?.rstrip === true)) return null;
  const lstrip = added.filter((t) => t?.lstrip === true);
  // an lstrip token matched in the normalised text: its content is not what the raw text holds
  if (tj.normalizer && lstrip.some((t) => t?.normalized !== false)) return null;
  const vocab = Object.keys(model.vocab as object);
  if (!allBytes(vocab)) return null;
  let built: SpaceRunVocab | null = null;
  return {
    lineBreaks,
    suffixes: !prefixSpace(pre),
    lstrip: lstrip.map((t) => String(t?.content ?? "")).filter((c) => c !== ""),
    vocab: () => {
      if (!built) {
        const ascii = /[\u0120\u0109\u010a\u010b\u010c\u010d]/;
        let longest = 0;
        let longestAscii = 0;
        for (const t of vocab) {
          if (t.length > longest) longest = t.length;
          if (t.length > longestAscii && ascii.test(t)) longestAscii = t.length;
        }
        let bytes: ByteTokens | null = null;
        built = { tokens: new Set(vocab), longest, longestAscii, bytes: () => (bytes ??= byteTokens(vocab, "")) };
      }
      return built;
    },
  };
}

/**
 * Characters a run of whitespace may hold: whitespace to the library's regex engine (Unicode White_Space: U+0085
 * too, JavaScript's U+FEFF not), all in the BMP. spaceChar also asks the tokenizer.
 */
const RUN_SPACE = new RegExp(`^[${RUST_WHITESPACE}]$`);
/** Characters that may be whitespace to JavaScript, the library or older Unicode tables: no run ends before one. */
const MAYBE_SPACE = /[\s\u0085\u180e\u200b]/u;

/**
 * Whether `ch` is a character of a whitespace run (SpaceRunPolicy): one of RUN_SPACE that the normaliser keeps and
 * that the tokenizer's own pre-tokenizer (`pieces`) treats as whitespace: two of them are one piece, and they split
 * letters, punctuation and digits apart (each of those classes is one piece with its own kind in both regexes but
 * Qwen's digits, which are one piece each).
 */
export function spaceChar(ch: string, normalize: (ch: string) => string, pieces: PieceCount): boolean {
  return RUN_SPACE.test(ch) && normalize(ch) === ch && pieces(ch + ch) === 1 && pieces(`a${ch}${ch}a`) >= 2 && pieces(`!${ch}${ch}!`) >= 2 && pieces(`1${ch}${ch}1`) >= 2;
}

/**
 * A run of whitespace characters [start, end), its last line break (-1: none), and the line breaks at its start,
 * [start, from), that Qwen's punctuation may take: `taken` "yes" when it does (the pre-tokenizer joins the character
 * before the run and a line break into one piece), "maybe" when that is not clear.
 */
interface SpaceRun {
  start: number;
  end: number;
  lastBreak: number;
  from: number;
  taken: "yes" | "maybe";
  /** No character that might be whitespace next to it and no lstrip added token after it. */
  usable: boolean;
}

const isBreak = (code: number) => code === 10 || code === 13;

function spaceRunAround(text: string, v: number, isSpace: (code: number) => boolean, normalize: (ch: string) => string, runs: SpaceRunPolicy, pieces?: PieceCount): SpaceRun {
  let start = v - 1;
  while (start > 0 && isSpace(text.charCodeAt(start - 1))) start--;
  let end = v;
  while (end < text.length && isSpace(text.charCodeAt(end))) end++;
  let lastBreak = end - 1;
  while (lastBreak >= start && !isBreak(text.charCodeAt(lastBreak))) lastBreak--;
  const outside = (ch: string) => ch !== "" && (MAYBE_SPACE.test(ch) || MAYBE_SPACE.test(normalize(ch)));
  const before = codePointBefore(text, start);
  let from = start;
  // Qwen's ` ?[^\s\p{L}\p{N}]+[\r\n]*` takes line breaks after punctuation: not after a character that the
  // pre-tokenizer keeps apart from a line break (a letter, a number), asked with the character before the run
  const joined = runs.lineBreaks && before !== "" && isBreak(text.charCodeAt(start)) ? (pieces ? pieces(normalize(before) + text[start]) : 0) : 2;
  if (joined !== 2) while (from < end && isBreak(text.charCodeAt(from))) from++;
  const usable = !outside(before) && !outside(codePointAt(text, end)) && !runs.lstrip.some((c) => text.startsWith(c, end));
  return { start, end, lastBreak: lastBreak < start ? -1 : lastBreak, from, taken: joined === 1 ? "yes" : "maybe", usable };
}

/** How many positions spaceRunWindow looks at, and how many of them it checks against the vocabulary. */
const SPACE_SCAN = 4096;
const SPACE_CHECKS = 16;

/**
 * The positions of a window inside a run of whitespace (SpaceRunPolicy) at or after `from` (side "right": prefixes
 * ending there) or at or before it ("left": suffixes starting there), or null when none is found among SPACE_SCAN
 * positions. One position when it is a boundary of the whole text's tokens (forced); several when one of them is.
 * `isSpace`: spaceChar by UTF-16 code unit (cached by the caller).
 */
export function spaceRunWindow(
  text: string, from: number, side: "right" | "left", policy: CutPolicy, isSpace: (code: number) => boolean,
  normalize: (ch: string) => string, pieces?: PieceCount, maxWidth = 64,
): number[] | null {
  const runs = policy.spaceRuns;
  if (!runs || (side === "left" && !runs.suffixes)) return null;
  const step = side === "right" ? 1 : -1;
  let run: SpaceRun | null = null;
  let checks = 0;
  for (let v = Math.min(Math.max(from, 1), text.length - 1), n = 0; v > 0 && v < text.length && n < SPACE_SCAN && checks < SPACE_CHECKS; v += step, n++) {
    if (!isSpace(text.charCodeAt(v)) || !isSpace(text.charCodeAt(v - 1))) continue;
    if (!run || v <= run.start || v >= run.end) run = spaceRunAround(text, v, isSpace, normalize, runs, pieces);
    if (!run.usable) {
      // past this run
      v = side === "right" ? run.end : run.start;
      continue;
    }
    const valid = (e: number) =>
      e > run!.start && e < run!.end &&
      (e > run!.from || run!.from === run!.start || takenLineBreak(e, run!, side, runs.vocab().longest)) &&
      (side === "left" || !runs.lineBreaks || isBreak(text.charCodeAt(e - 1)) || e > run!.lastBreak) &&
      !(policy.spaced && addedSpans(text, e, policy.spaced, normalize));
    if (!valid(v)) continue;
    checks++;
    const ends = spaceBoundaryWindow(text, v, run, runs.vocab(), maxWidth);
    if (ends && ends.every(valid)) return ends;
  }
  return null;
}

/**
 * Whether e in the line breaks that Qwen's punctuation takes at a run's start (SpaceRun.from) is a cut: the
 * punctuation's pre-token Q = [p, from) ends at `from`. A prefix ending at e ends with [p, e), a prefix of Q (the
 * greedy `[\r\n]*` stops at the text's end); a suffix starting at e begins with `\s*[\r\n]+` up to the run's last line
 * break, a suffix of Q when no line break follows `from` (at `from` itself Q ends). No vocabulary token of Q that
 * starts before the run reaches e when e is `longest` (bytes of the longest token) or more characters into it, so the
 * vocabulary check over the run's bytes alone holds there.
 */
function takenLineBreak(e: number, run: SpaceRun, side: "right" | "left", longest: number): boolean {
  return run.taken === "yes" && e - run.start >= longest && (side === "right" || e === run.from || run.lastBreak < run.from);
}

/** GPT-2's byte-to-character map: the byte-level string of a text's UTF-8 bytes. */
let BYTE_CHARS: string[] | null = null;
const UTF8 = new TextEncoder();
function byteLevelString(s: string): string {
  if (!BYTE_CHARS) {
    byteLevelBytes("");
    BYTE_CHARS = new Array<string>(256);
    for (const [ch, b] of BYTE_OF!) BYTE_CHARS[b] = ch;
  }
  let out = "";
  for (const b of UTF8.encode(s)) out += BYTE_CHARS[b];
  return out;
}

/**
 * [v] when no vocabulary token spans v inside the run (a forced boundary of its tokens), else the positions v .. p up
 * to the furthest end of such a token when the characters there are single bytes and they are at most `maxWidth`
 * (one of them is a boundary: SpaceRunPolicy), else null.
 */
function spaceBoundaryWindow(text: string, v: number, run: SpaceRun, vocab: SpaceRunVocab, maxWidth: number): number[] | null {
  const ascii = text.charCodeAt(v - 1) < 0x80 && text.charCodeAt(v) < 0x80;
  // a token over v holds text[v]'s first byte, ASCII whitespace when text[v] is ASCII
  const longest = ascii ? vocab.longestAscii : vocab.longest;
  const left = byteLevelString(text.slice(Math.max(run.start, v - longest), v));
  const region = left + byteLevelString(text.slice(v, Math.min(run.end, v + longest + maxWidth)));
  const at = left.length;
  let reach = at;
  for (let a = Math.max(0, at - longest + 1); a < at; a++) {
    for (let b = Math.max(reach, at) + 1; b <= Math.min(region.length, a + longest); b++) if (vocab.tokens.has(region.slice(a, b))) reach = b;
  }
  if (reach === at) return [v];
  // several positions: v and every character position up to the first at or after `reach`
  const ends = [v];
  let nonAscii = false;
  for (let i = v, bytes = at; bytes < reach; ) {
    const c = text.charCodeAt(i++);
    // run characters are whitespace, all in the BMP
    bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
    if (c >= 0x80) nonAscii = true;
    ends.push(i);
    if (ends.length > maxWidth) return null;
  }
  // tokens that begin inside a character and go on past it would let every boundary lie inside characters
  if (nonAscii && midCharCrosser(vocab.bytes(), text.slice(Math.max(run.start, v - longest), Math.min(run.end, v + longest + maxWidth)))) return null;
  return ends;
}

/**
 * Characters BertPreTokenizer splits at or BertNormalizer drops or isolates (whitespace, controls, unassigned,
 * punctuation as BERT counts it: ASCII symbols too, CJK ideographs), in JavaScript's Unicode tables or older ones.
 */
const BERT_SPLIT = /[\s\p{Z}\p{C}\p{P}!-\/:-@[-`{-~\u0085\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\u{20000}-\u{2FA1F}]/u;

/**
 * Whether a character stays inside its word through BertNormalizer and BertPreTokenizer and adds at least one
 * character to it: neither it nor what the normaliser makes of it is split at, dropped or
 * isolated (`normalize()` gives what the normaliser makes of it alone; BertNormalizer works character by character,
 * NFD's reordering moves marks only among themselves).
 */
export function bertWordChar(ch: string, normalize: () => string): boolean {
  if (BERT_SPLIT.test(ch)) return false;
  const normalized = normalize();
  return normalized.length > 0 && !BERT_SPLIT.test(normalized);
}

/**
 * WordPiece behind BertPreTokenizer: shortens every run of more than 2 * (max_input_chars_per_word + 1) word
 * characters (`isWordChar`, bertWordChar) to that many, keeping both ends. Such a run lies inside one word of more
 * than max_input_chars_per_word characters whatever its length, and that word is one [UNK]; added tokens (each with a
 * character outside such runs, none longer than what is kept) still find the same characters at both ends of a run.
 * With `isDropped` (CutPolicy.dropped: characters the normaliser removes wherever they stand, checked with the
 * library), a run goes on through dropped characters, which neither end it nor count: the normalised text has the
 * word characters on their two sides next to each other, in one word (BertPreTokenizer splits only at whitespace and
 * punctuation, and nothing of a dropped character is left). The run's first and last max_input_chars_per_word + 1
 * word characters are kept with the dropped characters among them, so the shortened word still has more than
 * max_input_chars_per_word characters (each word character normalises to at least one, which no neighbour removes:
 * NFD's reordering moves marks only inside the word, never past a starter such as whitespace or punctuation), and
 * the characters on the run's two sides are unchanged. Thai, Devanagari and emoji written without spaces, whose
 * nonspacing marks, ZWJ and variation selectors BERT drops, are such runs.
 */
export function shortenWordRuns(text: string, maxChars: number, isWordChar: (codePoint: number) => boolean, isDropped: (codePoint: number) => boolean = () => false): string {
  const keep = maxChars + 1;
  const parts: string[] = [];
  let copied = 0;
  let runStart = 0;
  let runChars = 0;
  const width = (i: number) => (text.codePointAt(i)! > 0xffff ? 2 : 1);
  const close = (end: number) => {
    if (runChars > 2 * keep) {
      // past the first `keep` word characters (and the dropped ones among them), back before the last `keep`
      let a = runStart;
      for (let k = 0; k < keep; a += width(a)) if (isWordChar(text.codePointAt(a)!)) k++;
      let b = end;
      for (let k = 0; k < keep; ) {
        b -= b >= 2 && text.charCodeAt(b - 1) >= 0xdc00 && text.charCodeAt(b - 1) <= 0xdfff ? 2 : 1;
        if (isWordChar(text.codePointAt(b)!)) k++;
      }
      parts.push(text.slice(copied, a));
      copied = b;
    }
    runChars = 0;
  };
  // the end of the run's last word character (dropped characters after it are not the run's)
  let lastEnd = 0;
  for (let i = 0; i < text.length; ) {
    const cp = text.codePointAt(i)!;
    const w = cp > 0xffff ? 2 : 1;
    if (isWordChar(cp)) {
      if (runChars === 0) runStart = i;
      runChars++;
      lastEnd = i + w;
    } else if (runChars === 0 || !isDropped(cp)) close(lastEnd);
    i += w;
  }
  close(lastEnd);
  if (parts.length === 0) return text;
  parts.push(text.slice(copied));
  return parts.join("");
}

export function shortenAsciiRuns(text: string, maxChars: number): string {
  // Both ends are kept, so an added token that touches a run (it has another character, so it cannot lie inside
  // one) still finds the same characters there.
  const keep = maxChars + 1;
  const runs = new RegExp(`[A-Za-z0-9]{${2 * keep + 1},}`, "g");
  return text.replace(runs, (run) => run.slice(0, keep) + run.slice(run.length - keep));
}

/** Pre-tokenizers that split at every whitespace character and drop it (BertPreTokenizer's and Whitespace's words too). */
const DROPS_WHITESPACE = ["BertPreTokenizer", "Whitespace", "WhitespaceSplit"];

/** The shape of a pipeline's whitespace handling (whitespaceShape; whitespaceRules says what each part allows). */
export interface WhitespaceShape {
  drop: boolean;
  collapse: boolean;
  metaspace: boolean;
  /** Metaspace's replacement character. */
  replacement: string;
  /** Added tokens that hold whitespace, each only single whitespace characters between others (singleSpaces). */
  spaced: readonly string[];
  /**
   * The normaliser begins with SentencePiece's Precompiled map and no added token holds a control or format
   * character: CONTROLS are candidates too (whitespaceRules).
   */
  controls: boolean;
}

/**
 * An added token's content (or its normalised pattern) whose whitespace is single characters, each next to a
 * character that is not whitespace: a run of three or more whitespace characters can then hold only the token's
 * first or last character (an occurrence that ends with the run's first character, or begins with its last), and
 * so can the run shortened to those two (shortenSpaceRuns): the same occurrences, at the same characters.
 */
function singleSpaces(content: string): boolean {
  return /[^\s\u0085]/u.test(content) && !/[\s\u0085]{2}/u.test(content);
}

/**
 * CONTROLS: controls and format characters of the BMP that are grapheme-cluster Control characters (UAX #29: Cc and Cf but
 * CR, LF, ZWNJ / ZWJ and other Grapheme_Extend ones, and the Prepend ones): a cluster boundary on both sides of each,
 * in any context (GB4, GB5; the rules that look further back, GB9c, GB11, GB12 / 13, never step over one).
 */
function controls(): string[] {
  if (CONTROLS === null) {
    CONTROLS = [];
    for (let c = 0; c < 0x10000; c++) {
      const ch = String.fromCharCode(c);
      if (CONTROL_OR_FORMAT.test(ch) && !/\p{Grapheme_Extend}/u.test(ch) && !PREPEND.test(ch) && ch !== "\r" && ch !== "\n" && ch !== "\u200d") CONTROLS.push(ch);
    }
  }
  return CONTROLS;
}
let CONTROLS: string[] | null = null;
const CONTROL_OR_FORMAT = /[\p{Cc}\p{Cf}]/u;

/** Whether a normaliser is Precompiled, or a Sequence that begins with it. */
/** Precompiled alone (a Sequence of it alone): clusters.ts normalises a word unit by unit with it. */
function precompiledOnly(n: Json): boolean {
  return normalizerParts(n).length === 1 && precompiledFirst(n);
}

function precompiledFirst(n: Json): boolean {
  if (n?.type === "Precompiled") return true;
  return n?.type === "Sequence" && list(n.normalizers)[0]?.type === "Precompiled";
}

/** tokenizer.json's WhitespaceShape, or null when nothing is known of its whitespace beyond CutPolicy's cuts. */
function whitespaceShape(tj: Record<string, unknown>): WhitespaceShape | null {
  const spaced = list(tj.added_tokens).map((t) => String(t?.content ?? "")).filter((c) => WHITESPACE.test(c));
  if (!spaced.every(singleSpaces) || !normalizerLocal(tj.normalizer as Json)) return null;
  const pre = tj.pre_tokenizer as Json;
  const parts = preTokenizerParts(pre);
  const drop = DROPS_WHITESPACE.includes(String(parts[0]?.type)) && parts.slice(1).every((p) => p?.type === "Metaspace");
  const norms = (tj.normalizer as Json)?.type === "Sequence" ? list((tj.normalizer as Json)!.normalizers) : [tj.normalizer as Json];
  const collapsing = (n: Json) => n?.type === "Replace" && n.content === " " && ["\\s+", " {2,}", " +"].includes(String((n.pattern as Json)?.Regex));
  const collapse = !drop && norms.filter(collapsing).length === 1 && norms.every((n) => collapsing(n) || SPACE_KEEPING.includes(String(n?.type)));
  const metaspace = parts.length === 1 && parts[0]?.type === "Metaspace" && parts[0].split !== false;
  const controls = precompiledFirst(tj.normalizer as Json) && !list(tj.added_tokens).some((t) => CONTROL_OR_FORMAT.test(String(t?.content ?? "")));
  return drop || collapse || metaspace ? { drop, collapse, metaspace, replacement: String(parts[0]?.replacement ?? "▁"), spaced, controls } : null;
}

/** What a long text's whitespace allows beyond CutPolicy's space cuts (whitespaceRules). */
export interface WhitespaceRules {
  /** Runs of these characters longer than two are shortened to their first and last character (shortenSpaceRuns), or null. */
  runs: RegExp | null;
  /** Whitespace characters after which a U+0020 space is a cut (CutPolicy.afterWhitespace), or null. */
  after: ReadonlySet<string> | null;
  /** Characters other than U+0020 before which a cut is as good as before a space (CutPolicy.separators), or null. */
  before: ReadonlySet<string> | null;
  /** Runs of these characters (which the normaliser removes) longer than two are shortened likewise, or null. */
  vanish: RegExp | null;
  /** Control and format characters that may stand before a separator cut (CutPolicy.separatorLeads), or null. */
  leads: SeparatorLeads | null;
}

/** Of a character: true, a control or format character kept before a separator cut; false, one dropped there; null, neither. */
export type SeparatorLeads = (ch: string) => boolean | null;

/**
 * How a pipeline treats whitespace, where that makes long runs of it cheap, from tokenizer.json's shape
 * (whitespaceShape) and checked with the library's own normaliser and pre-tokenizer (`normalize`, `split`: normalizeString, preTokenizeString's
 * strings) on every triple of candidate characters:
 * - "drop": a pre-tokenizer that splits at whitespace and drops it (BertPreTokenizer, Whitespace, WhitespaceSplit,
 *   alone or followed by Metaspace, which works per word) behind a local normaliser (normalizerLocal). A character
 *   whose normalised form is non-empty and makes no pre-token separates words and leaves nothing: a run of such
 *   characters gives the same pre-tokens (strings, and so word ids and tokens) as its first and last character (kept
 *   so that what the normaliser or an added token sees at the run's ends does not change), and a space after one of
 *   them is a cut.
 * - "collapse": a normaliser made of Unicode normal forms and Lowercase around one Replace of a whitespace run by one
 *   space (CLIP's `\s+`, SentencePiece exports' ` {2,}`): a run the Replace takes whole normalises to the same text
 *   as its first and last character (two characters, so ` {2,}` still matches them). Whitespace characters are
 *   starters that compose with nothing, so the normal forms leave a run's neighbours as they were.
 * - Metaspace that splits (alone, behind a local normaliser): a U+0020 space after a whitespace character whose
 *   normalised form holds no space and no replacement character begins a pre-token there as after any other
 *   character, so it is a cut (unless an added token with lstrip follows the run: lstripAfter).
 * - Separators ("drop" or Metaspace): a character other than U+0020 that the normaliser alone makes exactly a space
 *   (Metaspace: U+00A0, U+3000 under NFKC; tabs and line breaks too under Precompiled) or whitespace the
 *   pre-tokenizer drops ("drop"), with the pre-tokens of a text holding it between letters, numbers or punctuation
 *   those of its two parts: a cut before it (separatorCutAt says where).
 * - Precompiled first (WhitespaceShape.controls): it normalises each grapheme cluster, and a grapheme-cluster
 *   Control character (CONTROLS: U+200B, U+FEFF, C0 controls) is a cluster of its own in any context, whose
 *   neighbours' clusters it does not change. Those it maps to whitespace (U+200B, U+FEFF become a space in
 *   SentencePiece's maps) are candidates for "drop" and "collapse" as whitespace is; those it maps to nothing (most
 *   C0 controls) leave no trace, so a run of them normalises to the same text as its first and last character
 *   (`vanish`) whatever the pre-tokenizer (the normalisers after it see the same text; no added token holds one, so
 *   the raw matches are the same too).
 * Added tokens that hold whitespace (CutPolicy.spaced; none lstrip / rstrip or single_word, which cutPolicy refuses)
 * allow runs only where they and their normalised patterns hold single whitespace characters between others
 * (singleSpaces: PyLate's "[Q] "): an occurrence then touches a run at its first or last character only, which the
 * shortened run keeps, with the same characters around it; what it leaves of the run goes on being dropped or
 * collapsed. Space cuts near them are checked as every space cut is (addedSpans). Each candidate is checked between letters, at the text's start and at its end:
 * shortening a run of three of candidates to its first and last keeps the pre-token strings ("drop") or the
 * normalised text ("collapse"); a candidate that fails is left out (its runs are tokenized as before).
 */
export function whitespaceRules(shape: WhitespaceShape, normalize: (s: string) => string, split: (s: string) => string[]): WhitespaceRules {
  const { drop, collapse, metaspace, replacement, spaced } = shape;
  const same = (a: string[], b: string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
  const contexts: Array<[string, string]> = [["x", "y"], ["", "y"], ["x", ""]];
  let runs: RegExp | null = null;
  const candidates = shape.controls ? [...new Set([...RUST_WHITESPACE, ...controls()])] : [...RUST_WHITESPACE];
  if ((drop || collapse) && spaced.every((c) => singleSpaces(normalize(c)))) {
    const chars = candidates.filter((c) => {
      const n = normalize(c);
      return n !== "" && (collapse ? WHITESPACE.test(n) : split(n).length === 0);
    });
    const shortened = (a: string, b: string, c: string) =>
      contexts.every(([l, r]) => {
        const long = normalize(l + a + b + c + r);
        const short = normalize(l + a + c + r);
        return collapse ? long === short : same(split(long), split(short));
      });
    // Shortening makes the run's first and last characters neighbours: each pair of them is checked, and a
    // character that fails with another is left out, the others checked again without it.
    let kept = chars.filter((a) => shortened(a, a, a));
    for (let changed = true; changed; ) {
      const next = kept.filter((a) => kept.every((c) => shortened(a, a, c) && shortened(a, c, c) && shortened(c, a, a) && shortened(c, c, a)));
      changed = next.length < kept.length;
      kept = next;
    }
    if (kept.length > 0) runs = charRuns(kept);
  }
  let after: Set<string> | null = null;
  if (drop || metaspace) {
    const chars = [...RUST_WHITESPACE].filter((c) => {
      const n = normalize(c);
      if (n === "" || (drop ? split(n).length !== 0 : n.includes(" ") || n.includes(replacement))) return false;
      // the space cut: the text's pre-tokens are its parts' pre-tokens
      return contexts.every(([l, r]) => same(split(normalize(l + c + " " + r)), [...split(normalize(l + c)), ...split(normalize(" " + r))]));
    });
    if (chars.length > 0) after = new Set(chars);
  }
  let before: Set<string> | null = null;
  if (drop || metaspace) {
    const chars = candidates.filter((c) => {
      const n = normalize(c);
      if (c === " " || n === "" || (drop ? split(n).length !== 0 : n !== " ")) return false;
      // the cut before it: the text's pre-tokens are its parts' pre-tokens
      return SEPARATOR_CONTEXTS.every(([l, r]) => same(split(normalize(l + c + r)), [...split(normalize(l)), ...split(normalize(c + r))]));
    });
    if (chars.length > 0) before = new Set(chars);
  }
  let leads: SeparatorLeads | null = null;
  if (before !== null) leads = separatorLeads([...before], replacement, normalize, split);
  let vanish: RegExp | null = null;
  if (shape.controls) {
    // each alone: one that leaves nothing between letters, marks, at the text's ends, and before another one
    const gone = controls().filter((c) => normalize(c) === "" && [...contexts, ["x", "\u0301"], ["\u0301", "x"], ["x", c]].every(([l, r]) => normalize(l + c + c + c + r) === normalize(l + c + r)));
    if (gone.length > 0) vanish = charRuns(gone);
  }
  return { runs, after, before, vanish, leads };
}

/**
 * CutPolicy.separatorLeads of a pipeline with separators `seps`, from the library's own normaliser and pre-tokenizer,
 * each character checked when first asked for (about 60 library calls; 107 candidates): a control or format
 * character (controls(): a grapheme cluster of its own) is kept (true) where its normalised form is non-empty and
 * ends in no whitespace or replacement character, dropped (false) where it is empty, and either only where a text
 * made of it between a letter and a separator (every separator), and after punctuation, a separator, a kept one, at
 * the text's start (kept), or after another dropped one (before the first separator) has its two parts' pre-tokens.
 */
function separatorLeads(seps: string[], replacement: string, normalize: (s: string) => string, split: (s: string) => string[]): SeparatorLeads {
  const candidates = new Set(controls());
  const verdicts = new Map<string, boolean | null>();
  const parts = new Map<string, string[]>();
  const partOf = (s: string) => {
    let got = parts.get(s);
    if (!got) parts.set(s, (got = split(normalize(s))));
    return got;
  };
  const apart = (l: string, r: string) => {
    const whole = split(normalize(l + r));
    const want = [...partOf(l), ...partOf(r)];
    return whole.length === want.length && whole.every((x, i) => x === want[i]);
  };
  let firstKept: string | null | undefined;
  const verdict = (d: string): boolean | null => {
    const n = normalize(d);
    const kept = n !== "" && !WHITESPACE.test(n.at(-1)!) && !n.includes(replacement);
    if (n !== "" && !kept) return null;
    const c0 = seps[0]!;
    const lefts = ["x!" + d, "x" + c0 + d, ...(kept ? [d] : ["x" + d + d, ...(firstKept ? [firstKept + d] : [])])];
    const ok = seps.every((c) => apart("x" + d, c + "y") && apart("x" + d, c)) && lefts.every((l) => apart(l, c0 + "y") && apart(l, c0));
    return ok ? kept : null;
  };
  const leads = (ch: string): boolean | null => {
    if (!candidates.has(ch)) return null;
    let v = verdicts.get(ch);
    if (v === undefined) {
      if (firstKept === undefined) firstKept = candidates.has("\u00ad") && verdict("\u00ad") === true ? "\u00ad" : null;
      verdicts.set(ch, (v = verdict(ch)));
    }
    return v;
  };
  return leads;
}

/** How many dropped control characters (CutPolicy.separatorLeads) a separator cut looks past. */
const SEPARATOR_LEAD_REACH = 16;

/** Where whitespaceRules checks a separator (WhitespaceRules.before): after a letter, number or punctuation mark. */
const SEPARATOR_CONTEXTS: Array<[string, string]> = [["x", "y"], ["x", ""], ["x1", "!"], ["!", "12"]];

/** A global regex of runs of three or more of `chars` (BMP characters). */
function charRuns(chars: readonly string[]): RegExp {
  return new RegExp(`[${bmpClass(chars)}]{3,}`, "g");
}

/** A regex class's contents for BMP characters, each as a `\\uXXXX` escape. */
function bmpClass(chars: readonly string[]): string {
  return chars.map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join("");
}

/** A text with every run of `runs` (WhitespaceRules.runs) shortened to its first and last character. */
export function shortenSpaceRuns(text: string, runs: RegExp): string {
  runs.lastIndex = 0;
  return text.replace(runs, (run) => run[0]! + run[run.length - 1]!);
}

/** Characters that BERT's cleaning drops before anything else sees them (with U+FFFD): controls and formats. */
const CONTROL = /^[\p{C}\uFFFD]$/u;

/** Two characters in a row that a normaliser may drop (shortenDroppedRuns' shortcut). */
const MAYBE_DROPPED_RUN = /[\p{C}\p{M}\uFFFD]{2}/u;

/**
 * What a character is to shortenDroppedRuns: 0 kept by the normaliser, 1 a dropped control or format, 2 another
 * dropped character, 3 a dropped non-starter (a mark that NFD reorders, to the library's own NFD).
 */
export type Dropped = 0 | 1 | 2 | 3;

/**
 * The Dropped kind of a character that the normaliser drops (`dropped`: it makes nothing of it, checked by the
 * caller; `nonStarter`: the library's NFD moves it before U+0345, so it is its own decomposition and of a combining
 * class between 1 and 239).
 */
export function droppedKind(ch: string, dropped: boolean, nonStarter = false): Dropped {
  return !dropped ? 0 : CONTROL.test(ch) ? 1 : nonStarter ? 3 : 2;
}

/**
 * A text with runs of dropped characters shortened, behind a per-character normaliser that drops them
 * (CutPolicy.dropped). `kind(cp)` (Dropped): whether the normaliser makes nothing of the character alone and no
 * raw-matched added token holds it (the caller checks both, with the library), and whether it is a control or
 * format character. The normalised text is each character's normalisation concatenated, but for NFD's canonical
 * reordering of combining marks (BertNormalizer: clean_text drops controls and formats first, then
 * handle_chinese_chars, then NFD and the removal of nonspacing marks, then lowercasing, all per character;
 * StripAccents likewise), so it is the same for the shortened text wherever:
 * - a run of dropped controls and formats (which the cleaning removes before anything else sees them; all of them
 *   are starters to NFD) keeps its first character;
 * - a run of dropped non-starters (marks of any classes, to the library's NFD) keeps its first character: it holds no
 *   starter, so whether a starter lies between two characters that survive around it is unchanged, and the
 *   survivors' order is their stable sort by combining class with or without dropped marks among them (a letter
 *   and a million marks of three classes on bert-base-uncased: 0.39-0.58 s, about the library's time, before);
 * - in any other run of dropped characters, one character repeated keeps one copy: the reordering happens within
 *   runs of non-starters, and whether a starter lies between two characters that survive around the run is
 *   unchanged (the character is a starter in both texts or in neither), while the survivors' order is their stable
 *   sort by combining class either way. (A mixed run is not cut to its first character: a dropped starter inside it,
 *   such as U+034F, keeps marks that survive on its two sides from being reordered.)
 * Ids, word ids and pre-tokens are those of the normalised text, so they do not change; raw-matched added tokens
 * find the same matches (none holds a dropped character, and a dropped character still stands between what was on
 * the run's two sides, so lstrip / rstrip stop at it as before), and a normalised one sees the same normalised text.
 * Offsets index the shortened text, as shortenSpaceRuns' do.
 */
export function shortenDroppedRuns(text: string, kind: (codePoint: number) => Dropped): string {
  // A shortcut only (the text unshortened gives the same tokens): dropped characters are controls, formats, U+FFFD
  // and marks, and a text without two of them in a row has no run to shorten.
  if (!MAYBE_DROPPED_RUN.test(text)) return text;
  const parts: string[] = [];
  let copied = 0;
  const n = text.length;
  const width = (i: number) => (text.codePointAt(i)! > 0xffff ? 2 : 1);
  for (let i = 0; i < n; ) {
    if (kind(text.codePointAt(i)!) === 0) {
      i += width(i);
      continue;
    }
    // a run of dropped characters [i, j)
    let j = i;
    let controls = true;
    let marks = true;
    let count = 0;
    for (let k: Dropped; j < n && (k = kind(text.codePointAt(j)!)) !== 0; ) {
      if (k !== 1) controls = false;
      if (k !== 3) marks = false;
      j += width(j);
      count++;
    }
    if (count > 1 && (controls || marks)) {
      // the first kept
      parts.push(text.slice(copied, i + width(i)));
      copied = j;
    } else if (count > 1) {
      // each character repeated in a row keeps one copy
      for (let a = i; a < j; ) {
        const cp = text.codePointAt(a)!;
        const w = cp > 0xffff ? 2 : 1;
        let b = a + w;
        while (b < j && text.codePointAt(b) === cp) b += w;
        if (b - a > w) {
          parts.push(text.slice(copied, a + w));
          copied = b;
        }
        a = b;
      }
    }
    i = j;
  }
  if (parts.length === 0) return text;
  parts.push(text.slice(copied));
  return parts.join("");
}
