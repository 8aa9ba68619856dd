// Long words that hold marks, under SentencePiece's Precompiled normaliser (t5, XLM-R and the multilingual-e5 /
// XLM-R-based embedders): Thai or Devanagari without spaces, zalgo text, emoji ZWJ sequences. Precompiled cuts the
// text into extended grapheme clusters (the library's unicode-segmentation, UAX #29) and transforms a cluster shorter
// than 6 UTF-8 bytes whole (one charsmap lookup of the cluster, else each character alone) and a longer one character
// by character. So the normalised text is each cluster's transform, concatenated, and:
// - a position where the whole text has a cluster boundary (clusterBoundary) is one where the normalised text of the
//   part before it is the whole text's normalised text up to there: UAX #29 decides a boundary from the characters
//   before it and the one after it only (GB9c, GB11, GB12 / GB13 look back over marks, ZWJ, regional indicators, never
//   forward past the next character), so the part's clusters are the whole text's up to there, each transformed the
//   same; and the text between two such positions, normalised alone, is the whole text's normalised text between
//   them (its clusters' look-back stops at its first character, which no rule joins to what lies before it);
// - inside one cluster of 6 bytes or more, every character is transformed alone, so a position inside it with 6
//   bytes or more of the cluster before it is one where the part before it normalises as the whole text does up to
//   there (the part's last cluster is the same characters, 6 bytes or more: also character by character). The
//   cluster must be known: every position inside it is one where no UAX #29 version breaks (clusterJoin).
// Both predicates are certain, not complete: they answer false where a rule might go either way (a mark after a
// virama-like linker, a pictograph after ZWJ, regional indicators, Hangul, Prepend characters, characters the
// library's tables may not know), and the caller then takes the characters between certain positions as one unit
// that the library normalises whole. test/tokenize/clusters.test.ts checks both against Intl.Segmenter and the
// tokens they give against the library on the whole text.

/** Class bits of a code point (CLASS, filled on first use). */
const BASE = 1; // a certain boundary may lie before it
const PICTOGRAPH = 2; // Extended_Pictographic: no boundary after ZWJ (GB11)
const PREV_OK = 4; // a certain boundary may lie after it (no Prepend, nothing unknown)
const EXTEND = 8; // may be in the run of marks GB9c looks back over
const LINKER = 16; // may be a GB9c linker (a virama, canonical combining class 9) or unknown
const JOIN = 32; // GB9 / GB9a: no boundary before it (after a character that is not a control)
const JOIN_PREV_OK = 64; // not a control, line or paragraph separator (GB4 breaks after those)
const KNOWN = 128;
const GB_EXTEND = 256; // Extend to GB11 (marks, emoji modifiers), assigned; not ZWJ

const CLASS = new Uint16Array(0x110000);

const BASE_RE = /[\p{L}\p{N}\p{P}\p{S}]/u;
/** Not BASE though letters, numbers or symbols: they extend, join Hangul, pair up, or are spacing marks. */
const NOT_BASE_RE = /[\p{Grapheme_Extend}\p{Emoji_Modifier}\p{Regional_Indicator}\u0E33\u0EB3\u1100-\u11FF\uA960-\uA97F\uD7B0-\uD7FF\uAC00-\uD7A3]/u;
const PREPEND_RE = /[\u0600-\u0605\u06DD\u070F\u0890\u0891\u08E2\u0D4E]/u;
const EXTEND_RE = /[\p{Grapheme_Extend}\p{Emoji_Modifier}\u200D]/u;
const JOIN_RE = /[\p{Grapheme_Extend}\p{Emoji_Modifier}\u200D\u0E33\u0EB3]/u;
const CONTROL_RE = /[\p{C}\p{Zl}\p{Zp}]/u;
const UNASSIGNED_RE = /[\p{Cn}\p{Cs}\p{Co}]/u;
const SPACING_INDIC = /[\u0900-\u0DFF]/u;
const MC = /\p{Mc}/u;

/**
 * Whether a mark has canonical combining class 9 (virama), found with the runtime's canonical ordering: it moves
 * after U+3099 (class 8) and before U+05B0 (class 10).
 */
function virama(ch: string): boolean {
  return (ch + "\u3099").normalize("NFD") === "\u3099" + ch && ("\u05B0" + ch).normalize("NFD") === ch + "\u05B0";
}

function classOf(cp: number): number {
  let v = CLASS[cp]!;
  if (v !== 0) return v;
  const ch = String.fromCodePoint(cp);
  v = KNOWN;
  const unassigned = UNASSIGNED_RE.test(ch);
  // astral letters and numbers of scripts (U+10000-1FFFF): Prepend and new marks arrive there; emoji and symbols not
  const astralScript = cp >= 0x10000 && cp < 0x20000 && /[\p{L}\p{N}\p{M}]/u.test(ch);
  if (!unassigned && !astralScript && BASE_RE.test(ch) && !NOT_BASE_RE.test(ch)) v |= BASE;
  if (/\p{Extended_Pictographic}/u.test(ch)) v |= PICTOGRAPH;
  if (!unassigned && !PREPEND_RE.test(ch) && !(cp >= 0x11000 && cp < 0x12000)) v |= PREV_OK;
  if (unassigned || EXTEND_RE.test(ch)) v |= EXTEND;
  if (unassigned || (/\p{Mn}/u.test(ch) && virama(ch))) v |= LINKER;
  // (emoji modifiers: Extend since Unicode 11, the modifiers themselves since 8)
  if (!unassigned && ((cp < 0x10000 && (JOIN_RE.test(ch) || (MC.test(ch) && SPACING_INDIC.test(ch)))) || (cp >= 0x1f3fb && cp <= 0x1f3ff))) v |= JOIN;
  if (!unassigned && cp !== 0x200d && /[\p{Grapheme_Extend}\p{Emoji_Modifier}]/u.test(ch)) v |= GB_EXTEND;
  if (!unassigned && (!CONTROL_RE.test(ch) || cp === 0x200c || cp === 0x200d)) v |= JOIN_PREV_OK;
  CLASS[cp] = v;
  return v;
}

/** What lies at a position between two characters: a certain boundary, a certain join, or neither known. */
export const enum At {
  Boundary,
  Join,
  Unknown,
}

/**
 * The position between `prev` and `next` (code points) after a run of marks (EXTEND) that holds a possible linker
 * (`linkerRun`): a boundary in every UAX #29 version since Unicode 11 (GB999, no rule joins them: `next` is no mark,
 * ZWJ, spacing mark, Hangul, regional indicator or modifier; `prev` no Prepend; no linker before a possible
 * conjunct consonant, GB9c; no ZWJ before a pictograph, GB11), a join (GB9 / GB9a: `next` extends or is a spacing
 * mark, `prev` no control), or unknown.
 */
function at(prev: number, next: number, linkerRun: boolean): At {
  const a = classOf(prev);
  const b = classOf(next);
  if (b & BASE && a & PREV_OK && !linkerRun && !(b & PICTOGRAPH && prev === 0x200d)) return At.Boundary;
  if (b & JOIN && a & JOIN_PREV_OK) return At.Join;
  return At.Unknown;
}

/**
 * Whether the whole text has a grapheme-cluster boundary at UTF-16 index i for certain (see above); the text's start
 * and end are boundaries.
 */
export function clusterBoundary(text: string, i: number): boolean {
  if (i <= 0 || i >= text.length) return true;
  return positionAt(text, i) === At.Boundary;
}

/** Whether no UAX #29 version puts a boundary at UTF-16 index i (inside the text). */
export function clusterJoin(text: string, i: number): boolean {
  if (i <= 0 || i >= text.length) return false;
  return positionAt(text, i) === At.Join;
}

/** Longest run of marks looked back over for a linker (GB9c); a longer run counts as one that may hold one. */
const RUN_LOOKBACK = 64;

function positionAt(text: string, i: number): At {
  const low = text.charCodeAt(i - 1);
  const p = i >= 2 && low >= 0xdc00 && low <= 0xdfff ? i - 2 : i - 1;
  const prev = text.codePointAt(p)!;
  // the run of marks before i: does it hold a possible linker?
  let run = false;
  let q = i;
  for (let steps = 0; q > 0; steps++) {
    const lo = text.charCodeAt(q - 1);
    const s = q >= 2 && lo >= 0xdc00 && lo <= 0xdfff ? q - 2 : q - 1;
    const c = classOf(text.codePointAt(s)!);
    if (!(c & EXTEND)) break;
    if (c & LINKER || steps >= RUN_LOOKBACK) {
      run = true;
      break;
    }
    q = s;
  }
  return at(prev, text.codePointAt(i)!, run);
}

/**
 * A long word (UTF-16 [start, end), no U+0020 inside) normalised by a Precompiled pipeline, unit by unit:
 * `symbols[0..n)` the normalised code points, `at[k]` (k = 0..n) the UTF-16 index in the text where the normalised
 * text's position k lies when a prefix ending there normalises to the whole text's first k code points (a certain
 * cluster boundary, or 6 bytes or more into a known cluster), else -1. `normalizeChar` is the normaliser on one
 * character, `normalizeUnit` on the characters between two certain boundaries (both the library's own normaliser;
 * cached by the caller). Null where `start` or `end` is not a certain boundary, or where a normalised character is
 * whitespace (ZWJ becomes a space: the pre-tokenizer splits there). The arrays are reused by the next call.
 * `units` (tests) receives the end of every unit. With `limit`, the walk stops at the first position at or after it
 * where a prefix may end (`end`); with `spaces`, whitespace is no reason to refuse, and the walk stops only where the
 * normalised text before the position ends with whitespace (spaceInWordCut).
 */
export function precompiledWord(
  text: string,
  start: number,
  end: number,
  normalizeChar: (cp: number) => string,
  normalizeUnit: (unit: string) => string,
  units?: number[],
  limit = Infinity,
  spaces = false,
): { symbols: Int32Array; at: Int32Array; n: number; end: number } | null {
  if (start >= end) return null;
  // the word's first character after a space starts a cluster, and its last one ends one before a space (or the end)
  if (start > 0 && positionAt(text, start) !== At.Boundary) return null;
  if (end < text.length && !(classOf(codePointBefore(text, end)) & PREV_OK)) return null;
  let symbols = WORD.symbols;
  let where = WORD.at;
  let n = 0;
  where[0] = start;
  const push = (s: string, cut: number) => {
    if (n + s.length + 1 >= symbols.length) {
      const grown = { symbols: new Int32Array(2 * (n + s.length + 1)), at: new Int32Array(2 * (n + s.length + 1) + 1) };
      grown.symbols.set(symbols.subarray(0, n));
      grown.at.set(where.subarray(0, n + 1));
      WORD = grown;
      symbols = grown.symbols;
      where = grown.at;
    }
    for (let j = 0; j < s.length; ) {
      const cp = s.codePointAt(j)!;
      if (!spaces && isWhitespace(cp)) spaced = true;
      symbols[n++] = cp;
      j += cp > 0xffff ? 2 : 1;
      where[n] = j === s.length ? cut : -1;
    }
  };
  let spaced = false;
  let unitStart = start;
  let allJoin = true;
  let run = false;
  let prev = text.codePointAt(start)!;
  let prevClass = classOf(prev);
  let i = start + (prev > 0xffff ? 2 : 1);
  let unitBytes = utf8Bytes(prev);
  // GB11: the characters up to prev are a pictograph and Extend characters (pict); so were those before the ZWJ prev
  let pict = false;
  let zwjPict = false;
  // what closing the unit at e would give, where it is known (for `spaces`: its last character)
  const unitOutput = (e: number): string => {
    const first = text.codePointAt(unitStart)!;
    if (e - unitStart === (first > 0xffff ? 2 : 1)) return normalizeChar(first);
    return allJoin && unitBytes >= 6 ? normalizeChar(prev) : normalizeUnit(text.slice(unitStart, e));
  };
  const close = (e: number) => {
    units?.push(e);
    const first = text.codePointAt(unitStart)!;
    if (e - unitStart === (first > 0xffff ? 2 : 1)) push(normalizeChar(first), e);
    else if (allJoin && unitBytes >= 6) {
      // one cluster of 6 bytes or more: character by character, cuts after its first 6 bytes
      let bytes = 0;
      for (let j = unitStart; j < e; ) {
        const cp = text.codePointAt(j)!;
        j += cp > 0xffff ? 2 : 1;
        bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        push(normalizeChar(cp), bytes >= 6 ? j : -1);
      }
    } else push(normalizeUnit(text.slice(unitStart, e)), e);
  };
  while (i < end && !spaced) {
    const next = text.codePointAt(i)!;
    const nextClass = CLASS[next] || classOf(next);
    // the run of marks that ends with prev holds a possible linker (GB9c)
    run = prevClass & EXTEND ? run || (prevClass & LINKER) !== 0 : false;
    if (prevClass & PICTOGRAPH) pict = true;
    else if (prev === 0x200d) {
      zwjPict = pict;
      pict = false;
    } else if (!(prevClass & GB_EXTEND)) pict = false;
    const boundary = nextClass & BASE && prevClass & PREV_OK && !run && !(nextClass & PICTOGRAPH && prev === 0x200d);
    // past `limit`: stop where a prefix may end (a boundary, or 6 bytes into a known cluster: its characters so far
    // are transformed alone whether the cluster ends here or goes on); with `spaces`, only after whitespace
    if (i >= limit && (boundary || (allJoin && unitBytes >= 6)) && (!spaces || endsInSpace(boundary ? unitOutput(i) : normalizeChar(prev)))) {
      close(i);
      return spaced ? null : { symbols, at: where, n, end: i };
    }
    if (boundary) {
      close(i);
      unitStart = i;
      allJoin = true;
      unitBytes = 0;
    } else if (!((nextClass & JOIN && prevClass & JOIN_PREV_OK) || (nextClass & PICTOGRAPH && prev === 0x200d && zwjPict))) allJoin = false;
    unitBytes += utf8Bytes(next);
    prev = next;
    prevClass = nextClass;
    i += next > 0xffff ? 2 : 1;
  }
  close(end);
  return spaced ? null : { symbols, at: where, n, end };
}
let WORD = { symbols: new Int32Array(1024), at: new Int32Array(1025) };

/**
 * Whether no UAX #29 version since Unicode 11 puts a boundary at UTF-16 index i: a certain join (clusterJoin), or
 * GB11's pictograph after a ZWJ that follows a pictograph and Extend characters (as precompiledWord's walk joins them).
 */
function joinAt(text: string, i: number): boolean {
  if (clusterJoin(text, i)) return true;
  if (i <= 1 || i >= text.length || text.charCodeAt(i - 1) !== 0x200d || !(classOf(text.codePointAt(i)!) & PICTOGRAPH)) return false;
  for (let q = i - 1, steps = 0; q > 0 && steps < RUN_LOOKBACK; steps++) {
    const cp = codePointBefore(text, q);
    const c = classOf(cp);
    if (c & PICTOGRAPH) return true;
    if (!(c & GB_EXTEND)) return false;
    q -= codeUnits(cp);
  }
  return false;
}

/** Longest walk, in code points, from a suffix's start to the certain cluster boundaries around it. */
const SUFFIX_WALK = 64;

/**
 * Whether the suffix of `text` that starts at UTF-16 index c, right after a character z that the map turns into a
 * text ending with U+0020 (ZWJ under T5's and XLM-R's map), normalises alone to the whole text's normalised text after
 * that space (encode.ts spaceInWordSuffixCut: the left-side counterpart of a cut after such a space). It does when:
 * - in the whole text T, z lies in a known cluster X = [a, b): a and b are certain boundaries (b may be T's end), every
 *   position between them, c included, a certain join, and X has 6 UTF-8 bytes or more. So T's normalised text is
 *   norm(T[0, a)), then each of X's characters transformed alone, then norm(T[b, end)) (the file head: a certain
 *   boundary splits the normalised text; a cluster of 6 bytes or more is transformed character by character): z's
 *   space is followed by the transforms of T[c, b) one by one, then by norm(T[b, end));
 * - in the suffix S = T[c, end), read alone, every position of (0, b - c) is a certain join (joinAt) and b - c a certain
 *   boundary (or S's end), so S's first cluster is S[0, b - c) = T[c, b); it is one character, or 6 bytes or more:
 *   either way its transform is its characters' transforms one by one (a lone character is looked up alone too). Its
 *   rest S[b - c, end) = T[b, end) starts at a certain boundary of S: normalised as in T. So norm(S) is the whole
 *   text's normalised text after z's space;
 * - the first character of S turns into a text that does not start with whitespace (so the space before it is one the
 *   pre-tokenizer splits at as at a real space, and nothing at S's start is whitespace that T would treat otherwise).
 * The predicates are UAX #29's look-back only (boundary or join from the characters before a position and the one at
 * it), each certain for the text it reads, so they are read on T and on S's first characters alone.
 */
export function spaceSuffixStart(text: string, c: number, normalizeChar: (cp: number) => string): boolean {
  if (c <= 0 || c >= text.length) return false;
  const first = normalizeChar(text.codePointAt(c)!);
  if (first.length === 0 || isWhitespace(first.codePointAt(0)!)) return false;
  if (!joinAt(text, c)) return false;
  // X's start a: back over certain joins from z's start
  let a = c - codeUnits(codePointBefore(text, c));
  for (let steps = 0; a > 0 && !clusterBoundary(text, a); steps++) {
    if (steps >= SUFFIX_WALK || !joinAt(text, a)) return false;
    a -= codeUnits(codePointBefore(text, a));
  }
  // X's end b: forward over certain joins from c's character
  let b = c + codeUnits(text.codePointAt(c)!);
  for (let steps = 0; b < text.length && !clusterBoundary(text, b); steps++) {
    if (steps >= SUFFIX_WALK || !joinAt(text, b)) return false;
    b += codeUnits(text.codePointAt(b)!);
  }
  if (utf8Length(text, a, b) < 6) return false;
  // S's first cluster, read on S alone: T[c, b) (and the character at b, which the boundary before it looks at)
  const s = text.slice(c, Math.min(text.length, b + 2));
  const n = b - c;
  for (let i = codeUnits(s.codePointAt(0)!); i < n; i += codeUnits(s.codePointAt(i)!)) if (!joinAt(s, i)) return false;
  if (b < text.length && !clusterBoundary(s, n)) return false;
  return n === codeUnits(s.codePointAt(0)!) || utf8Length(s, 0, n) >= 6;
}

/** Whether a normalised piece ends with whitespace (an empty one does not). */
function endsInSpace(s: string): boolean {
  return s.length > 0 && isWhitespace(s.codePointAt(s.length - 1)!);
}

function codeUnits(cp: number): number {
  return cp > 0xffff ? 2 : 1;
}

function codePointBefore(text: string, i: number): number {
  const low = text.charCodeAt(i - 1);
  return text.codePointAt(i >= 2 && low >= 0xdc00 && low <= 0xdfff ? i - 2 : i - 1)!;
}

function utf8Bytes(cp: number): number {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

function utf8Length(text: string, a: number, b: number): number {
  let n = 0;
  for (let j = a; j < b; ) {
    const cp = text.codePointAt(j)!;
    n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    j += cp > 0xffff ? 2 : 1;
  }
  return n;
}

/**
 * Whitespace to the library (char::is_whitespace, where WhitespaceSplit splits) and to JavaScript's \s: a normalised
 * character the pre-tokenizer might split at.
 */
export function isWhitespace(cp: number): boolean {
  return cp === 0x20 || (cp >= 9 && cp <= 13) || cp === 0x85 || cp === 0xa0 || cp === 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp === 0x2028 || cp === 0x2029 || cp === 0x202f || cp === 0x205f || cp === 0x3000 || cp === 0xfeff;
}
