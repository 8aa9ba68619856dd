// The Rust tokenizers library's Unigram model, replicated for one long word (a pre-token of up to ~1,000,000
// characters), so that a long word's best path is known without tokenizing the whole text (encode.ts: unigramPrefix,
// unigramSuffix). The library's non-sampling encode (models/unigram/model.rs, encode_optimized, after SentencePiece's
// unigram_model.cc) is a forward pass over the pre-token: for each start position in ascending order, every
// vocabulary piece that is a prefix of the rest (a trie's common-prefix search) offers score(piece) + best(start) to
// the position where it ends, in f64; the end takes it when it has no path yet or the offer is strictly greater (so
// of equal offers the earliest start wins); a start with no one-character piece gets an unknown node instead; then
// the path is read back from the end. JavaScript numbers are f64, so the same additions in the same order give the
// same sums, and the same comparisons the same path. What is replicated, and where this gives up (null):
// - positions are code points (the library's are bytes, but a piece is valid UTF-8, so it starts and ends on code
//   point boundaries: the same nodes, visited in the same order);
// - only pieces spelled with the pre-token's symbols can match, and the Metaspace marker only at its start: the trie
//   holds those alone (the vocabulary has 250,000 pieces; a word uses a few dozen characters);
// - a piece's id is the library's token_to_ids entry, the last vocabulary entry of that spelling, and its score that
//   entry's score;
// - scores are what the library parsed: the binding gets the tokenizer.json that JSON.stringify writes (Encoder),
//   so each score reaches it as JavaScript's shortest decimal, which serde_json (without float_roundtrip) reads as
//   (digits as f64) * or / 10^k (serdeF64): one more rounding than JSON.parse, so the two may differ in the last bit;
// - a start with no one-character piece gets the unknown node (score: the smallest score less 10, K_UNK_PENALTY),
//   and consecutive tokens with the unknown id are fused into one (fuse_unk, always on); with byte fallback (unknown
//   tokens become byte pieces) or without unk_id this gives up instead.
// The callers check the replica against the binding on part of the word every time (encode.ts).

/** A Unigram vocabulary as tokenizer.json lists it: pieces by id, and their scores as JSON.parse read them. */
export interface UnigramVocab {
  pieces: readonly string[];
  scores: Float64Array;
  /** unk_id, or null. */
  unknownId: number | null;
  /** Unknown tokens become byte pieces (not replicated). */
  byteFallback: boolean;
}

/**
 * The Metaspace marker of a pre-tokenizer (Metaspace and WhitespaceSplit only): the replacement character, and
 * whether a word gets it in front after a U+0020 space and at the text's start. `marker` null: no Metaspace, no
 * marker anywhere.
 */
export interface WordMarker {
  marker: string | null;
  afterSpace: boolean;
  atStart: boolean;
}

/**
 * The best path of a pre-token, unknown tokens fused: token k covers positions [k ? ends[k - 1] : 0, ends[k]) and
 * has id ids[k].
 */
export interface WordPath {
  ends: Int32Array;
  ids: Int32Array;
}

const POW10 = Array.from({ length: 309 }, (_, k) => Number(`1e${k}`));

/**
 * The f64 serde_json (1.x, default features) reads from JSON.stringify(x): the decimal's digits as one integer
 * (u64, rounded to f64 once), then multiplied or divided by an exact-or-rounded power of ten (f64_from_parts).
 */
export function serdeF64(x: number): number {
  if (!Number.isFinite(x) || x === 0 || Number.isInteger(x)) return x;
  const s = String(Math.abs(x));
  const e = s.indexOf("e");
  const mantissa = e < 0 ? s : s.slice(0, e);
  let exponent = e < 0 ? 0 : Number(s.slice(e + 1));
  const dot = mantissa.indexOf(".");
  const digits = dot < 0 ? mantissa : mantissa.slice(0, dot) + mantissa.slice(dot + 1);
  if (dot >= 0) exponent -= mantissa.length - dot - 1;
  // at most 17 significant digits (and leading zeros): within u64, as serde_json accumulates them
  let f = Number(BigInt(digits));
  for (;;) {
    const k = Math.abs(exponent);
    if (k < POW10.length) {
      f = exponent >= 0 ? f * POW10[k]! : f / POW10[k]!;
      break;
    }
    if (f === 0) break;
    f /= 1e308;
    exponent += 308;
  }
  return x < 0 ? -f : f;
}

/**
 * The library's best path of one pre-token, given as code points (`symbols`: the marker first where the
 * pre-tokenizer puts one, then the normalised characters), or null when some start has no one-character piece
 * and the model has no unknown id (or byte fallback). The trie holds the pieces spelled with the pre-token's symbols only
 * (the marker only first): trieFor.
 */
export function unigramWordPath(symbols: Int32Array, vocab: UnigramVocab, marker: number): WordPath | null {
  const n = symbols.length;
  if (n === 0) return { ends: new Int32Array(0), ids: new Int32Array(0) };
  const pass = forwardPass(symbols, vocab, marker);
  return pass ? pathTo(n, pass.from, pass.tok, vocab, false) : null;
}

/**
 * The first tokens of the best path of a pre-token of which `symbols` are the first ones (the marker first where the
 * pre-tokenizer puts one), however it goes on: the forward pass over these symbols alone gives every position's best
 * path up to the last (each depends only on the symbols before it), and the whole pre-token's path, read back from
 * its end in steps of at most `longest` symbols (the longest piece spelled with these symbols; an unknown node is
 * one), visits one of the last `longest` positions here; where the paths of all of them go through one position p,
 * so does the whole pre-token's: its tokens up to p are the ones given (unknown tokens fused, a last unknown one
 * left out, since it may be fused with one after p). Null where they meet nowhere past the start, or where the
 * replica does not apply (unigramWordPath).
 */
export function unigramFirstTokens(symbols: Int32Array, vocab: UnigramVocab, marker: number): WordPath | null {
  const n = symbols.length;
  const pass = forwardPass(symbols, vocab, marker);
  if (!pass || n <= pass.longest) return null;
  const { from } = pass;
  // the meeting point of the paths to n - longest + 1 .. n (each step goes back: from[x] < x)
  let p = n;
  for (let x = n - pass.longest + 1; x < n; x++) {
    let a = p;
    let b = x;
    while (a !== b) if (a > b) a = from[a]!;
    else b = from[b]!;
    p = a;
  }
  if (p <= 0) return null;
  return pathTo(p, from, pass.tok, vocab, true);
}

/** The forward pass over `symbols` (unigramWordPath), or null where it is not replicated. */
function forwardPass(symbols: Int32Array, vocab: UnigramVocab, marker: number): { from: Int32Array; tok: Int32Array; longest: number } | null {
  const n = symbols.length;
  const markerFirst = marker >= 0 && symbols[0] === marker;
  // the pre-token's alphabet, sorted: symbol k is its k-th code point; the marker (first place only) is the last
  const inBmp = new Uint8Array(0x10000);
  const inAstral = new Set<number>();
  for (let i = markerFirst ? 1 : 0; i < n; i++) {
    const cp = symbols[i]!;
    if (cp < 0x10000) inBmp[cp] = 1;
    else inAstral.add(cp);
  }
  const alphabet: number[] = [];
  for (let cp = 0; cp < 0x10000; cp++) if (inBmp[cp]) alphabet.push(cp);
  alphabet.push(...[...inAstral].sort((a, b) => a - b));
  const trie = trieFor(vocab, alphabet, markerFirst ? marker : -1);
  const { sym, best, from, tok } = scratch(n);
  for (let i = 0; i < n; i++) sym[i] = i === 0 && markerFirst ? alphabet.length : trie.indexOf(symbols[i]!);

  let unknownScore = 0;
  if (vocab.unknownId !== null) {
    let min = Infinity;
    for (const x of vocab.scores) if (x < min) min = x;
    // serdeF64 keeps the order of values, so the library's smallest score is serdeF64 of the smallest here
    unknownScore = serdeF64(min) - 10;
  }

  // the forward pass (model.rs encode_optimized); -Infinity stands for "no path yet" (every offer is finite)
  best.fill(-Infinity);
  best[0] = 0;
  from.fill(-1);
  if (!forward(sym, trie, best, from, tok, vocab.unknownId !== null && !vocab.byteFallback ? vocab.unknownId : -1, unknownScore)) return null;
  return { from, tok, longest: trie.longest };
}

/**
 * The path to position n read back from the pass's `from` and `tok`, unknown tokens fused; with `dropLastUnknown`,
 * without a last unknown token (null when none is left, or the model has byte fallback).
 */
function pathTo(n: number, from: Int32Array, tok: Int32Array, vocab: UnigramVocab, dropLastUnknown: boolean): WordPath | null {
  // back from the end; a token with the unknown id is fused with unknown ones before it
  const unknown = vocab.unknownId ?? -1;
  if (dropLastUnknown) {
    if (vocab.byteFallback) return null;
    while (n > 0 && tok[n] === unknown) n = from[n]!;
    if (n <= 0) return null;
  }
  let count = 0;
  for (let e = n; e > 0; e = from[e]!) if (tok[e] !== unknown || from[e] === 0 || tok[from[e]!] !== unknown) count++;
  const ends = new Int32Array(count);
  const ids = new Int32Array(count);
  let k = count;
  let afterUnknown = false;
  for (let e = n; e > 0; e = from[e]!) {
    const id = tok[e]!;
    // the token after this one (already placed) is unknown too: fused into it, which now starts here
    if (id === unknown && afterUnknown) {
      // fused unknown pieces are looked up as one piece, else become bytes: not replicated
      if (vocab.byteFallback) return null;
      continue;
    }
    k--;
    ends[k] = e;
    ids[k] = id;
    afterUnknown = id === unknown;
  }
  return { ends, ids };
}

/** Trie edges (node, symbol) -> child in open addressing (linear probing, at most half full). */
class Edges {
  keyNode = new Int32Array(1 << 10).fill(-1);
  keySym = new Int32Array(1 << 10);
  value = new Int32Array(1 << 10);
  mask = (1 << 10) - 1;
  shift = 32 - 10;
  private size = 0;

  private slot(node: number, s: number): number {
    let h = (Math.imul(node, 0x9e3779b1) ^ Math.imul(s + 1, 0x85ebca77)) >>> this.shift;
    while (this.keyNode[h]! >= 0 && (this.keyNode[h] !== node || this.keySym[h] !== s)) h = (h + 1) & this.mask;
    return h;
  }

  get(node: number, s: number): number {
    const h = this.slot(node, s);
    return this.keyNode[h]! >= 0 ? this.value[h]! : -1;
  }

  set(node: number, s: number, child: number): void {
    if (2 * (this.size + 1) > this.keyNode.length) this.grow();
    const h = this.slot(node, s);
    this.keyNode[h] = node;
    this.keySym[h] = s;
    this.value[h] = child;
    this.size++;
  }

  private grow(): void {
    const { keyNode, keySym, value } = this;
    const capacity = keyNode.length * 2;
    this.keyNode = new Int32Array(capacity).fill(-1);
    this.keySym = new Int32Array(capacity);
    this.value = new Int32Array(capacity);
    this.mask = capacity - 1;
    this.shift--;
    this.size = 0;
    for (let h = 0; h < keyNode.length; h++) if (keyNode[h]! >= 0) this.set(keyNode[h]!, keySym[h]!, value[h]!);
  }

  /** The children of nodes [0, nodes) as a nodes x width table (-1: none). */
  dense(nodes: number, width: number): Int32Array {
    const table = new Int32Array(nodes * width).fill(-1);
    for (let h = 0; h < this.keyNode.length; h++) if (this.keyNode[h]! >= 0 && this.keyNode[h]! < nodes) table[this.keyNode[h]! * width + this.keySym[h]!] = this.value[h]!;
    return table;
  }
}

/** The trie of the pieces spelled with one alphabet (trieFor): children by (node, symbol), ids and scores by node. */
interface Trie {
  /** The symbol of a code point of the alphabet (-1 for others). */
  indexOf: (cp: number) => number;
  dense: Int32Array;
  denseNodes: number;
  width: number;
  keyNode: Int32Array;
  keySym: Int32Array;
  value: Int32Array;
  mask: number;
  shift: number;
  termId: Int32Array;
  termScore: Float64Array;
  /** The most symbols a piece of the trie has. */
  longest: number;
}

/** The forward pass over `sym` (best, from, tok filled); false where an unknown node is needed and not replicated. */
function forward(sym: Int32Array, trie: Trie, best: Float64Array, from: Int32Array, tok: Int32Array, unknownId: number, unknownScore: number): boolean {
  const { dense, denseNodes, width, keyNode, keySym, value, mask, shift, termId, termScore } = trie;
  const n = sym.length;
  for (let s = 0; s < n; s++) {
    const base = best[s]!;
    let node = 0;
    let single = false;
    for (let k = s; k < n; k++) {
      const c = sym[k]!;
      let next = -1;
      if (node < denseNodes) next = dense[node * width + c]!;
      else {
        for (let h = (Math.imul(node, 0x9e3779b1) ^ Math.imul(c + 1, 0x85ebca77)) >>> shift; keyNode[h]! >= 0; h = (h + 1) & mask) {
          if (keyNode[h] === node && keySym[h] === c) {
            next = value[h]!;
            break;
          }
        }
      }
      if (next < 0) break;
      node = next;
      const id = termId[node]!;
      if (id >= 0) {
        if (k === s) single = true;
        const candidate = termScore[node]! + base;
        if (candidate > best[k + 1]!) {
          best[k + 1] = candidate;
          from[k + 1] = s;
          tok[k + 1] = id;
        }
      }
    }
    if (!single) {
      if (unknownId < 0) return false;
      const candidate = unknownScore + base;
      if (candidate > best[s + 1]!) {
        best[s + 1] = candidate;
        from[s + 1] = s;
        tok[s + 1] = unknownId;
      }
    }
  }
  return true;
}

/**
 * The pass's arrays for n symbols (positions 0..n), kept between calls (a 1,000,000-character word needs 20 MB; the
 * pass is synchronous, so calls never share them at once).
 */
let SCRATCH = { sym: new Int32Array(0), best: new Float64Array(1), from: new Int32Array(1), tok: new Int32Array(1) };
function scratch(n: number): typeof SCRATCH {
  if (SCRATCH.sym.length < n) SCRATCH = { sym: new Int32Array(n), best: new Float64Array(n + 1), from: new Int32Array(n + 1), tok: new Int32Array(n + 1) };
  return { sym: SCRATCH.sym.subarray(0, n), best: SCRATCH.best.subarray(0, n + 1), from: SCRATCH.from.subarray(0, n + 1), tok: SCRATCH.tok.subarray(0, n + 1) };
}

/** Vocabulary piece ids by first code point, and those starting with the marker by their second (-1: the marker alone). */
interface PieceIndex {
  byFirst: Map<number, number[]>;
  marker: number;
  afterMarker: Map<number, number[]>;
}
const INDEXES = new WeakMap<UnigramVocab, PieceIndex>();
/** The last trie built per vocabulary, and its alphabet (a long word's next request usually has the same letters). */
const TRIES = new WeakMap<UnigramVocab, { key: string; trie: Trie }>();

function pieceIndex(vocab: UnigramVocab, marker: number): PieceIndex {
  let index = INDEXES.get(vocab);
  if (index && index.marker === marker) return index;
  index = { byFirst: new Map(), marker, afterMarker: new Map() };
  const add = (map: Map<number, number[]>, key: number, id: number) => {
    const ids = map.get(key);
    if (ids) ids.push(id);
    else map.set(key, [id]);
  };
  vocab.pieces.forEach((piece, id) => {
    const first = piece.codePointAt(0);
    if (first === undefined) return;
    add(index!.byFirst, first, id);
    if (first === marker) add(index!.afterMarker, piece.codePointAt(first > 0xffff ? 2 : 1) ?? -1, id);
  });
  INDEXES.set(vocab, index);
  return index;
}

/**
 * The trie of the pieces spelled with `alphabet` (sorted code points; symbol k is alphabet[k]) and, with `marker`
 * >= 0, of those that start with the marker (symbol alphabet.length) and go on in the alphabet. Ids ascend within a
 * first (and second) code point, so of pieces spelled alike the last id is kept, as the library's token_to_ids does.
 */
function trieFor(vocab: UnigramVocab, alphabet: readonly number[], marker: number): Trie {
  const key = `${marker}:${alphabet.join(",")}`;
  const cached = TRIES.get(vocab);
  if (cached && cached.key === key) return cached.trie;
  const bmp = new Int32Array(0x10000).fill(-1);
  const astral = new Map<number, number>();
  alphabet.forEach((cp, k) => (cp < 0x10000 ? (bmp[cp] = k) : astral.set(cp, k)));
  const indexOf = (cp: number): number => (cp < 0x10000 ? bmp[cp]! : (astral.get(cp) ?? -1));
  const markerIx = alphabet.length;
  const width = alphabet.length + 1;
  const index = pieceIndex(vocab, marker);
  const candidates: number[][] = [];
  for (const cp of alphabet) candidates.push(index.byFirst.get(cp) ?? []);
  if (marker >= 0) for (const cp of [-1, ...alphabet]) candidates.push(index.afterMarker.get(cp) ?? []);
  const edges = new Edges();
  const terminal: number[] = [-1];
  let longest = 1;
  for (const ids of candidates) {
    for (const id of ids) {
      const piece = vocab.pieces[id]!;
      const symbolAt = (i: number, cp: number) => (i === 0 && cp === marker ? markerIx : indexOf(cp));
      let ok = true;
      for (let i = 0; ok && i < piece.length; ) {
        const cp = piece.codePointAt(i)!;
        if (symbolAt(i, cp) < 0) ok = false;
        i += cp > 0xffff ? 2 : 1;
      }
      // only pieces whose every symbol is in the pre-token get trie nodes
      if (!ok) continue;
      let node = 0;
      let depth = 0;
      for (let i = 0; i < piece.length; ) {
        const cp = piece.codePointAt(i)!;
        const ix = symbolAt(i, cp);
        if (++depth > longest) longest = depth;
        let next = edges.get(node, ix);
        if (next < 0) {
          next = terminal.length;
          edges.set(node, ix, next);
          terminal.push(-1);
        }
        node = next;
        i += cp > 0xffff ? 2 : 1;
      }
      terminal[node] = id;
    }
  }
  const nodes = terminal.length;
  const termId = Int32Array.from(terminal);
  const termScore = new Float64Array(nodes);
  for (let v = 0; v < nodes; v++) if (termId[v]! >= 0) termScore[v] = serdeF64(vocab.scores[termId[v]!]!);
  // children in a dense table for the first nodes (all of them for a few letters), the rest in the hash table
  const denseNodes = Math.min(nodes, Math.floor((1 << 21) / width));
  const { keyNode, keySym, value, mask, shift } = edges;
  const trie: Trie = { indexOf, dense: edges.dense(denseNodes, width), denseNodes, width, keyNode, keySym, value, mask, shift, termId, termScore, longest };
  TRIES.set(vocab, { key, trie });
  return trie;
}
