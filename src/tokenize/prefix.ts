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

/** The cut policy of a tokenizer.json, or null when its texts must be tokenized whole. */
export function cutPolicy(tokenizerJson: unknown): CutPolicy | null {
  const tj = tokenizerJson as Record<string, unknown>;
  const model = tj.model as Json;
  if (!model || !["WordPiece", "BPE", "Unigram", "WordLevel"].includes(String(model.type))) return null;
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
    wordPieceMaxChars: model.type === "WordPiece" && wordSplit && addedFit && Number.isInteger(maxChars) && maxChars > 0 ? maxChars : 0,
  };
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
