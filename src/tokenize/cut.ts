// The one shortcut for long texts (docs/tokenization.md). Only the first (or last) max-length tokens of an input are
// kept, and the Rust tokenizers spend ~1-4 us on every token they produce, so a text far longer than the model takes
// is tokenized only up to a cut at whitespace, far enough past the kept tokens that none of them can change:
// - every model the library has (WordPiece, BPE, Unigram, WordLevel) encodes each pre-token on its own, and a
//   pre-tokenizer that splits at whitespace gives a prefix the whole text's pre-tokens except the last one or two
//   (the one the cut ends, and one whose match looks ahead across it);
// - normalizers of the kinds accepted here act per character, per normalisation segment or grapheme cluster, or on
//   a bounded string, so the text before the cut normalises as it does in the whole text but near the cut;
// - added tokens are matched leftmost-longest in the raw text, so matches that start more than the longest added
//   token before the cut are the whole text's.
// The Encoder keeps a part only where the kept tokens (and the rest of the word they end in) end at least
// `margin` characters (the longest vocabulary entry or added token) before the cut; else it grows the prefix and tries
// again, ending at the whole text. Which whitespace characters make cuts is asked of the tokenizer's own normaliser
// and pre-tokenizer; a tokenizer whose pre-tokenizer does not split at a space, or whose normaliser is of another
// kind, has every text tokenized whole.
import type { Tokenizer } from "tokenizers";

type Json = Record<string, unknown> | null | undefined;

/** The characters the Rust library's `char::is_whitespace` and its regex engine's White_Space count (all in the BMP). */
const RUST_WHITESPACE = "\t\n\v\f\r \u0085\u00A0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200A\u2028\u2029\u202F\u205F\u3000";
const WHITESPACE_CODES = new Set([...RUST_WHITESPACE].map((c) => c.charCodeAt(0)));
/** JavaScript's `\s` also counts U+FEFF, which Rust does not; a cut never follows either. */
const BEFORE_CUT_EXCLUDED = RUST_WHITESPACE + "\uFEFF";

export interface CutPolicy {
  /** The whitespace characters the pre-tokenizer splits before (after a character that is not whitespace). */
  cutChars: string;
  /** cutChars as UTF-16 code units (all in the BMP). */
  cutCodes: ReadonlySet<number>;
  /** Characters (code points) between the kept tokens and the cut: the longest vocabulary entry or added token, + 1. */
  margin: number;
  /** Finds the first cut at or after a UTF-16 index. */
  after: RegExp;
}

const list = (x: unknown): Json[] => (Array.isArray(x) ? (x as Json[]) : []);

/** Normalizers that act per character, per segment or cluster, on a text's ends, or on a bounded string. */
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
    case "Nmt":
    case "Lowercase":
    case "StripAccents":
    case "Strip":
    case "Prepend":
    case "Precompiled":
    case "ByteLevel":
      return true;
    case "Replace": {
      // a literal string is bounded; a regex only where it matches whitespace runs (joined at the cut's side)
      const p = (n.pattern ?? {}) as { String?: string; Regex?: string };
      return p.String !== undefined || (p.Regex !== undefined && /^(\\s|[ +*]|\{\d*,?\d*\})+$/.test(p.Regex));
    }
    default:
      return false;
  }
}

/** Longest vocabulary entry or added token, in UTF-16 units (at least its code points). */
function longestEntry(tokenizerJson: Record<string, unknown>): number {
  const model = (tokenizerJson.model ?? {}) as { vocab?: unknown };
  let longest = 0;
  if (Array.isArray(model.vocab)) {
    for (const entry of model.vocab) if (Array.isArray(entry) && typeof entry[0] === "string") longest = Math.max(longest, entry[0].length);
  } else if (model.vocab && typeof model.vocab === "object") {
    for (const piece of Object.keys(model.vocab)) longest = Math.max(longest, piece.length);
  }
  for (const t of list(tokenizerJson.added_tokens)) longest = Math.max(longest, String(t?.content ?? "").length);
  return longest;
}

/**
 * The cut policy of a tokenizer, or null when its texts are tokenized whole. A whitespace character w makes cuts
 * where the pre-tokenizer, on the normalised "a" + w + "b", ends a piece right after the "a".
 */
export function cutPolicy(tokenizerJson: unknown, tokenizer: Tokenizer): CutPolicy | null {
  const tj = tokenizerJson as Record<string, unknown>;
  if (!normalizerLocal(tj.normalizer as Json)) return null;
  const pre = tokenizer.getPreTokenizer();
  if (!pre) return null;
  const normalizer = tokenizer.getNormalizer();
  let cutChars = "";
  for (const w of RUST_WHITESPACE) {
    const probe = normalizer ? normalizer.normalizeString(`a${w}b`) : `a${w}b`;
    const a = probe.indexOf("a");
    // offsets are in code points; everything before the "a" of this probe is in the BMP
    if (a >= 0 && pre.preTokenizeString(probe).some(([, [, end]]) => end === a + 1)) cutChars += w;
  }
  if (!cutChars.includes(" ")) return null;
  const after = new RegExp(`(?<![${escape(BEFORE_CUT_EXCLUDED)}])[${escape(cutChars)}]`, "g");
  return { cutChars, cutCodes: new Set([...cutChars].map((c) => c.charCodeAt(0))), margin: longestEntry(tj) + 1, after };
}

function escape(chars: string): string {
  return [...chars].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join("");
}

/** The first cut at or after `from` (a cut character after one that is not whitespace), or -1. */
export function cutAtOrAfter(text: string, from: number, policy: CutPolicy): number {
  policy.after.lastIndex = Math.max(1, from);
  const m = policy.after.exec(text);
  return m ? m.index : -1;
}

/** The last cut at or before `before`, or -1. */
export function cutAtOrBefore(text: string, before: number, policy: CutPolicy): number {
  for (let i = Math.min(before, text.length - 1); i >= 1; i--) {
    if (!policy.cutCodes.has(text.charCodeAt(i))) continue;
    const prev = text.charCodeAt(i - 1);
    if (!WHITESPACE_CODES.has(prev) && prev !== 0xfeff) return i;
  }
  return -1;
}

/** Code points in text[0, end). */
export function codePointsBefore(text: string, end: number): number {
  let n = end;
  for (let i = 0; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xdc00 && c <= 0xdfff && i > 0) {
      const h = text.charCodeAt(i - 1);
      if (h >= 0xd800 && h <= 0xdbff) n--;
    }
  }
  return n;
}
