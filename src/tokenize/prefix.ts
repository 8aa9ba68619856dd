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
//   byte-level regex or the CLIP / Llama-3 split regexes holds a non-space character followed by a space;
// - models encode word by word (WordPiece, BPE, Unigram, WordLevel);
// - no added token contains whitespace (added tokens are matched in the raw text before everything else).
// With BERT's normaliser, which surrounds CJK ideographs with spaces, the position before an ideograph is a cut too.
// WordPiece turns a word longer than `max_input_chars_per_word` into one [UNK], so a run of ASCII letters and digits
// longer than that gives the same token whatever its length: such runs are shortened before tokenizing.
// Any other pipeline is tokenized whole (exact, only slower).

type Json = Record<string, unknown> | null | undefined;

/** Split regexes whose matches never hold a non-space character followed by a space (CLIP, GPT-2 family, Llama 3 / Qwen). */
const SAFE_SPLIT_REGEXES = new Set([
  "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+",
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
]);

/** Grapheme-cluster Prepend characters (UAX #29): no cluster boundary after them, so no cut after them. */
const PREPEND = /[\u0600-\u0605\u06DD\u070F\u0890\u0891\u08E2\u0D4E\u{110BD}\u{110CD}\u{111C2}\u{111C3}\u{1193F}\u{11941}\u{11A3A}\u{11A84}-\u{11A89}\u{11D46}\u{11F02}]/u;
const WHITESPACE = /\s/u;
/** CJK ideographs BERT's normaliser surrounds with spaces (the BMP blocks; longer texts find plenty of these). */
const CJK_IDEOGRAPH = /[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF]/g;
const SPACE = / /g;

export interface CutPolicy {
  /** Cuts before ideographs as well as before spaces (BERT's normaliser isolates ideographs). */
  ideographs: boolean;
  /** WordPiece's max_input_chars_per_word when ASCII runs may be shortened, else 0. */
  wordPieceMaxChars: number;
  /** How a long word (no cut point) may be cut inside (wordPrefixWindow), or null when it is tokenized whole. */
  inWord: InWordPolicy | null;
}

/**
 * Inside one long word. BPE and Unigram give the first tokens of a word's prefix exactly when the prefix ends at a
 * token boundary of the whole word:
 * - Unigram: the tokens of a prefix ending at q are the best path to q (Viterbi: each position's best path depends
 *   only on the characters before it, ties broken the same way), and the whole word's path up to any of its own
 *   boundaries q is the best path to q;
 * - BPE: no merge crosses a boundary of the whole word's result (merges are never undone), so the merges left of it
 *   do not depend on the symbols right of it and run in the same (rank, position) order on the prefix alone.
 * The whole word has a boundary among any W + 1 consecutive positions when no vocabulary token holds W + 1
 * consecutive characters of the window's character set. So the tokens that the prefixes ending at c + 1 .. c + W
 * all begin with are the whole text's first tokens (wordPrefixWindow), however long the word. Windows are taken only
 * where one character is one symbol and is its own unit for the normaliser and pre-tokenizer: letters (no marks,
 * Hangul jamo or Prepend characters, BMP only) that the normaliser leaves as they are, that are single-character
 * tokens (never unknown, so never fused), ASCII only for byte-level BPE; and no added token lies inside a window's
 * reach (each has a character outside the window's set).
 */
export interface InWordPolicy {
  model: "bpe-bytes" | "bpe-chars" | "unigram";
  /** The runs of more than 8 letters inside vocabulary tokens (pieces), as the model matches them. */
  longRuns: readonly string[];
  /** Added token contents (none may be spelled with the window's characters only). */
  added: readonly string[];
  /** Single-character tokens: characters that are never unknown to the model. */
  singles: ReadonlySet<string>;
}

const list = (x: unknown): Json[] => (Array.isArray(x) ? (x as Json[]) : []);

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

/** The in-word policy of a BPE (no dropout, no end-of-word suffix) or Unigram tokenizer.json, else null. */
function inWordPolicy(tj: Record<string, unknown>, model: Record<string, unknown>, added: string[]): InWordPolicy | null {
  if (!lettersTogether(tj.pre_tokenizer as Json)) return null;
  let vocab: string[];
  let kind: InWordPolicy["model"];
  const type = modelType(model);
  if (type === "Unigram" && Array.isArray(model.vocab)) {
    vocab = (model.vocab as unknown[]).map((e) => String((e as unknown[])[0]));
    kind = "unigram";
  } else if (type === "BPE" && model.vocab && typeof model.vocab === "object") {
    // dropout makes merges random; an end-of-word suffix (CLIP's </w>) marks a prefix's last character differently
    if (model.dropout !== null && model.dropout !== undefined) return null;
    if (typeof model.end_of_word_suffix === "string" && model.end_of_word_suffix !== "") return null;
    vocab = Object.keys(model.vocab as object);
    kind = hasByteLevel(tj.pre_tokenizer as Json) ? "bpe-bytes" : "bpe-chars";
  } else return null;
  // A window is at least 8 wide: only longer letter runs can widen it.
  const longRuns: string[] = [];
  for (const t of vocab) for (const run of t.match(/\p{L}{9,}/gu) ?? []) longRuns.push(run);
  return { model: kind, longRuns, added, singles: new Set(vocab.filter((t) => t.length === 1)) };
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
  if (contents.some((c) => WHITESPACE.test(c))) return null;
  if (!normalizerLocal(tj.normalizer as Json) || !splitsAtSpaces(tj.pre_tokenizer as Json)) return null;
  const bert = findBert(tj.normalizer as Json);
  // An added token holding an ideograph could be cut in two; a single_word one sees the text's end as a boundary.
  const ideographsSafe = !contents.some((c) => /[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF]/.test(c)) && !added.some((t) => t?.single_word === true);
  // Shortening needs a pre-tokenizer that never splits inside ASCII letters and digits, and added tokens that cannot
  // lie inside such a run (each has another character) and are shorter than what is kept at both ends of a run.
  const maxChars = Number(model.max_input_chars_per_word ?? 100);
  const wordSplit = ["BertPreTokenizer", "Whitespace", "WhitespaceSplit"].includes(String((tj.pre_tokenizer as Json)?.type));
  const addedFit = contents.every((c) => /[^A-Za-z0-9]/.test(c) && c.length <= maxChars);
  return {
    ideographs: bert !== null && bert.handle_chinese_chars !== false && ideographsSafe,
    wordPieceMaxChars: modelType(model) === "WordPiece" && wordSplit && addedFit && Number.isInteger(maxChars) && maxChars > 0 ? maxChars : 0,
    inWord: inWordPolicy(tj, model as Record<string, unknown>, contents),
  };
}

/** Letters a window may hold (before the per-tokenizer checks): no marks, Hangul jamo, Prepend characters or surrogates. */
const WINDOW_LETTER = /^[\p{L}]$/u;
const JAMO = /[\u1100-\u11FF\uA960-\uA97F\uD7B0-\uD7FF]/;

/** The longest run of characters of `chars` inside any of `tokens`. */
function longestRun(tokens: readonly string[], chars: ReadonlySet<string>): number {
  let best = 0;
  for (const t of tokens) {
    let run = 0;
    for (const ch of t) {
      run = chars.has(ch) ? run + 1 : 0;
      if (run > best) best = run;
    }
  }
  return best;
}

/**
 * A window inside a long word at or after `from` (InWordPolicy says why it is exact): the prefix ends c + 1 .. c + w
 * whose common first tokens are the whole text's, or null when no window is found within `maxWidth` of the
 * characters that decide it. `usable(ch)` says whether the normaliser leaves a character as it is.
 */
export function wordPrefixWindow(text: string, from: number, policy: InWordPolicy, usable: (ch: string) => boolean, maxWidth = 64): { c: number; w: number } | null {
  const ok = (ch: string) =>
    WINDOW_LETTER.test(ch) && !JAMO.test(ch) && !PREPEND.test(ch) && policy.singles.has(ch) &&
    (policy.model !== "bpe-bytes" || ch.charCodeAt(0) < 0x80) && usable(ch);
  const added = policy.added.filter((t) => t.length > 0);
  const reach = added.reduce((m, t) => Math.max(m, t.length), 0);
  let w = 8;
  let c = Math.max(from, reach + 1);
  for (let tries = 0; tries < 16 && c + w + reach < text.length; tries++) {
    // every character from c - reach to c + w + reach must be usable; else start after the last one that is not
    let bad = -1;
    for (let i = c + w + reach; i >= c - reach; i--) {
      if (!ok(text[i]!)) {
        bad = i;
        break;
      }
    }
    if (bad >= 0) {
      c = bad + reach + 1;
      continue;
    }
    const chars = new Set<string>();
    for (let i = c - reach; i <= c + w + reach; i++) chars.add(text[i]!);
    if (added.some((t) => [...t].every((ch) => chars.has(ch)))) return null;
    const run = longestRun(policy.longRuns, chars);
    if (run <= w) return { c, w };
    if (run > maxWidth) return null;
    w = run;
  }
  return null;
}

/** The first cut position at or after `from` (0 < cut < text.length), or -1 when there is none. */
export function cutAtOrAfter(text: string, from: number, policy: CutPolicy): number {
  SPACE.lastIndex = Math.max(1, from);
  for (let m = SPACE.exec(text); m; m = SPACE.exec(text)) {
    const before = text.charCodeAt(m.index - 1);
    // A low surrogate's code point is checked whole; whitespace and Prepend characters are all in the BMP.
    const prev = before >= 0xdc00 && before <= 0xdfff ? "x" : String.fromCharCode(before);
    if (!WHITESPACE.test(prev) && !PREPEND.test(prev)) return cutOrIdeograph(text, from, m.index, policy);
  }
  return cutOrIdeograph(text, from, -1, policy);
}

function cutOrIdeograph(text: string, from: number, spaceCut: number, policy: CutPolicy): number {
  if (!policy.ideographs) return spaceCut;
  CJK_IDEOGRAPH.lastIndex = Math.max(1, from);
  const m = CJK_IDEOGRAPH.exec(text);
  if (!m) return spaceCut;
  return spaceCut < 0 ? m.index : Math.min(spaceCut, m.index);
}

/**
 * WordPiece only: shortens every run of ASCII letters and digits longer than 2 * (max_input_chars_per_word + 1) to
 * that length. Such a run lies inside one word of more than max_input_chars_per_word characters whatever its
 * length (ASCII letters and digits are one character each through every normaliser), which becomes one [UNK].
 */
export function shortenAsciiRuns(text: string, maxChars: number): string {
  // Both ends are kept, so an added token that touches a run (it has another character, so it cannot lie inside
  // one) still finds the same characters there.
  const keep = maxChars + 1;
  const runs = new RegExp(`[A-Za-z0-9]{${2 * keep + 1},}`, "g");
  return text.replace(runs, (run) => run.slice(0, keep) + run.slice(run.length - keep));
}
