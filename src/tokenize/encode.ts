// Truncation and special tokens, in one place. The tokenizer library encodes text; the post-processor's template
// (which special tokens go where, and their type ids) is read off it once by probing, so truncation can keep the
// special tokens exactly as the hub's Rust tokenizers do (`truncation=True`, longest-first for pairs).
import { Tokenizer } from "@huggingface/tokenizers";

export interface Encoded {
  ids: Int32Array;
  /** token_type_ids; null when every id is 0 (single sequences of most models). */
  typeIds: Int32Array | null;
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
 * Longest-first truncation of a pair to `budget` content tokens, as the Rust tokenizers library does it:
 * the shorter sequence keeps its length when it can; otherwise both get half the budget.
 * Returns the kept lengths of the first and second sequence.
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

export class Encoder {
  private readonly tokenizer: Tokenizer;
  private readonly template: Template;
  /** Ids below this are valid token ids (added tokens included). */
  readonly vocabSize: number;

  constructor(
    tokenizerJson: unknown,
    tokenizerConfig: Record<string, unknown>,
    /** Longest sequence, special tokens included. */
    readonly maxLength: number,
  ) {
    this.tokenizer = new Tokenizer(tokenizerJson as object, tokenizerConfig);
    this.template = this.probeTemplate();
    let maxId = -1;
    for (const id of this.tokenizer.get_vocab(true).values()) if (id > maxId) maxId = id;
    this.vocabSize = maxId + 1;
    const specials = this.template.pair.prefix.length + this.template.pair.middle.length + this.template.pair.suffix.length;
    if (maxLength <= specials) throw new Error(`max length ${maxLength} leaves no room for content tokens`);
  }

  private content(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  /** Reads the post-processor's template off two probe encodings. */
  private probeTemplate(): Template {
    const a = this.content("a");
    const b = this.content("b");
    const single = this.tokenizer.encode("a").ids;
    const at = indexOfRun(single, a);
    if (at < 0) throw new Error("tokenizer post-processor changes the content tokens; unsupported");
    const pairEnc = this.tokenizer.encode("a", { text_pair: "b", return_token_type_ids: true });
    const ids = pairEnc.ids;
    const types = pairEnc.token_type_ids ?? new Array(ids.length).fill(0);
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

  /** Token id of a token string (for pad ids). */
  tokenId(token: string): number | undefined {
    return this.tokenizer.token_to_id(token);
  }

  /** Number of content tokens of a text, without special tokens or truncation (prompt lengths). */
  countContent(text: string): number {
    return this.content(text).length;
  }

  /** One sequence, truncated to maxLength with its special tokens kept. */
  encode(text: string): Encoded {
    const { prefix, suffix } = this.template.single;
    const body = this.content(text);
    const keep = Math.min(body.length, this.maxLength - prefix.length - suffix.length);
    const ids = new Int32Array(prefix.length + keep + suffix.length);
    ids.set(prefix, 0);
    for (let i = 0; i < keep; i++) ids[prefix.length + i] = body[i]!;
    ids.set(suffix, prefix.length + keep);
    return { ids, typeIds: null };
  }

  /** A (query, document) pair, truncated longest-first to maxLength. */
  encodePair(first: string, second: string): Encoded {
    const t = this.template.pair;
    const a = this.content(first);
    const b = this.content(second);
    const budget = this.maxLength - t.prefix.length - t.middle.length - t.suffix.length;
    const [na, nb] = longestFirst(a.length, b.length, budget);
    const total = t.prefix.length + na + t.middle.length + nb + t.suffix.length;
    const ids = new Int32Array(total);
    const typeIds = new Int32Array(total);
    let o = 0;
    const put = (src: readonly number[], n: number, types: readonly number[] | number) => {
      for (let i = 0; i < n; i++, o++) {
        ids[o] = src[i]!;
        typeIds[o] = typeof types === "number" ? types : types[i]!;
      }
    };
    put(t.prefix, t.prefix.length, t.prefixTypes);
    put(a, na, t.firstType);
    put(t.middle, t.middle.length, t.middleTypes);
    put(b, nb, t.secondType);
    put(t.suffix, t.suffix.length, t.suffixTypes);
    return { ids, typeIds };
  }
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
