// Cut points (src/tokenize/prefix.ts) against the Rust library itself: every cut that cutAtOrAfter / cutAtOrBefore
// takes in a fuzzed text must be a pre-token boundary of the whole text, so the text before it (after it) has
// exactly the whole text's first (last) tokens. Checked by ids and by the pre-tokens' spans (each token's word id and
// offsets from the binding), which catch a boundary the whole text does not have even where the ids happen to agree
// (a piece "\u0085 " tokenized as "\u0085" + " " by a vocabulary that merges neither).
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { Tokenizer, type Encoding } from "tokenizers";
import { cutAtOrAfter, cutAtOrBefore, cutPolicy, normalFormBoundary, whitespaceRules, wordPrefixWindow, type PieceCount } from "../../src/tokenize/prefix";
import { SHARED_TOKENIZERS, textOfPieces, tokenizerText } from "../helpers";

/** Pieces the fuzzed texts are made of: the Qwen3 regex's alternatives and their edges, NFC-composable sequences,
 * whitespace JavaScript and the library count differently, letters of Unicode 16 (unassigned to the library's
 * regex engine), added tokens and their letters. */
const PIECES = [
  "a", "b", "x", "Z", "ß", "yes", "no", "n", "o", "y", "e", "s", " ", "  ", "\n", "\r\n", "\t", "  \n", " 1", " !", "!a", "a!",
  "'s", "'S", "'ll", "'re", "'", "1", "23", "4567", "٣", "Ⅻ", "½", "!", "?!", "..", "-",
  "日", "本語", "😀", "🎉", "\u200d", "é", "e\u0301", "\u0301", "ж", "Å", "A\u030a", "\u1100\u1161", "\u1161", "가",
  "\u0b47\u0b3e", "\u0b47", "\u0b3e", "\u0600", "\ufeff", "\u2028", "\u00a0", "\u3000",
  "\u0085", "\u0085 ", "\u0085  ", " \u0085", "\u{10940}", "\u{10940}!", "\u{2ebf0}", "\u{1e030}",
  "<|endoftext|>", "<|im_start|>", "<|im_end|>",
];

/** The character span of each pre-token (tokens of one word id; an added token alone), shifted by `shift`. */
function spans(e: Encoding, shift = 0): string[] {
  const words = e.getWordIds();
  const offsets = e.getOffsets();
  const out: string[] = [];
  let current: string | null = null;
  let a = 0;
  let b = 0;
  for (let i = 0; i < offsets.length; i++) {
    const key = words[i] === null || words[i] === undefined ? `added ${i}` : `word ${words[i]}`;
    if (key !== current) {
      if (current !== null) out.push(`${a + shift}-${b + shift}`);
      current = key;
      a = offsets[i]![0]!;
    }
    b = offsets[i]![1]!;
  }
  if (current !== null) out.push(`${a + shift}-${b + shift}`);
  return out;
}

const CONTENT = { addSpecialTokens: false } as const;

/** Whether the cut at q stands before a character without a normalisation boundary before it (a mark that NFC may reorder). */
const beforeJoiner = (text: string, q: number) => !normalFormBoundary(String.fromCodePoint(text.codePointAt(q)!));

/**
 * Every cut of `texts` (right and left) against the whole text: ids and pre-token spans. Returns how many were
 * checked, and how many of them stood before a character without a normalisation boundary before it (`marks`).
 */
async function checkCuts(label: string, json: Record<string, unknown>, texts: string[], withSpans = true): Promise<{ right: number; left: number; marks: number; afterControls: number }> {
  const policy = cutPolicy(json)!;
  expect(policy, label).not.toBeNull();
  const rust = Tokenizer.fromString(JSON.stringify(json));
  const normalizer = rust.getNormalizer();
  const preTokenizer = rust.getPreTokenizer()!;
  const normalize = (ch: string) => (normalizer ? normalizer.normalizeString(ch) : ch);
  const pieces: PieceCount = (s) => preTokenizer.preTokenizeString(s).length;
  // space cuts after whitespace, as the Encoder sets them on its first long text
  if (policy.whitespace) {
    const rules = whitespaceRules(policy.whitespace, normalize, (s) => preTokenizer.preTokenizeString(s).map(([x]) => x));
    policy.afterWhitespace = rules.after;
    policy.separators = rules.before;
    policy.separatorLeads = rules.leads;
  }
  let right = 0;
  let left = 0;
  let marks = 0;
  let afterControls = 0;
  for (const text of texts) {
    const whole = await rust.encode(text, null, CONTENT);
    const ids = whole.getIds();
    const wholeSpans = spans(whole);
    const rights = new Set<number>();
    const lefts = new Set<number>();
    for (let i = 1; i < text.length; i++) {
      rights.add(cutAtOrAfter(text, i, policy, normalize, pieces));
      lefts.add(cutAtOrBefore(text, i, policy, normalize, pieces));
    }
    rights.delete(-1);
    lefts.delete(-1);
    for (const q of rights) {
      const e = await rust.encode(text.slice(0, q), null, CONTENT);
      const got = { ids: e.getIds(), spans: withSpans ? spans(e) : [] };
      const want = { ids: ids.slice(0, got.ids.length), spans: wholeSpans.slice(0, got.spans.length) };
      expect([label, "right", JSON.stringify(text.slice(Math.max(0, q - 6), q + 6)), got]).toEqual([label, "right", JSON.stringify(text.slice(Math.max(0, q - 6), q + 6)), want]);
      right++;
      if (beforeJoiner(text, q)) marks++;
      if (/[\p{Cc}\p{Cf}]/u.test(text[q - 1]!)) afterControls++;
    }
    for (const q of lefts) {
      const e = await rust.encode(text.slice(q), null, CONTENT);
      const got = { ids: e.getIds(), spans: withSpans ? spans(e, [...text.slice(0, q)].length) : [] };
      const want = { ids: ids.slice(ids.length - got.ids.length), spans: wholeSpans.slice(wholeSpans.length - got.spans.length) };
      expect([label, "left", JSON.stringify(text.slice(Math.max(0, q - 6), q + 6)), got]).toEqual([label, "left", JSON.stringify(text.slice(Math.max(0, q - 6), q + 6)), want]);
      left++;
      if (beforeJoiner(text, q)) marks++;
      if (/[\p{Cc}\p{Cf}]/u.test(text[q - 1]!)) afterControls++;
    }
  }
  return { right, left, marks, afterControls };
}

const texts = (seed: number, n: number) => Array.from({ length: n }, (_, i) => textOfPieces(PIECES, seed * 1000 + i, 100 + ((i * 61) % 240)));
const qwen = () => JSON.parse(tokenizerText("models/qwen3-embed")!) as Record<string, any>;

describe("cut points are pre-token boundaries of the whole text (ids and pre-token spans, both directions)", () => {
  test("Qwen3 (Split regex with single digits, NFC, byte-level BPE, added tokens yes / no)", async () => {
    const n = await checkCuts("qwen3-embed", qwen(), texts(1, 40));
    // every kind of cut is taken: space, class, digit and added-token cuts
    expect(n.right).toBeGreaterThan(1000);
    expect(n.left).toBeGreaterThan(1000);
  }, 120_000);

  test("added tokens that overlap each other: only an occurrence that overlaps none is a cut", async () => {
    const json = qwen();
    for (const [k, content] of ["sno", "es", "yesno", "oy", "nn"].entries()) {
      json.added_tokens.push({ id: 2000 + k, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: false });
    }
    await checkCuts("qwen3-embed + overlapping added tokens", json, texts(2, 30));
  }, 120_000);

  test("the Llama 3 regex (numbers in threes): no cut between two digits", async () => {
    const json = qwen();
    json.pre_tokenizer.pretokenizers[0].pattern.Regex = json.pre_tokenizer.pretokenizers[0].pattern.Regex.replace("\\p{N}|", "\\p{N}{1,3}|");
    expect(json.pre_tokenizer.pretokenizers[0].pattern.Regex).toContain("\\p{N}{1,3}");
    await checkCuts("qwen3-embed with the Llama 3 regex", json, texts(3, 30));
  }, 120_000);

  test.skipIf(!existsSync(SHARED_TOKENIZERS))("GPT-2's byte-level regex (roberta-base)", async () => {
    await checkCuts("roberta-base", JSON.parse(tokenizerText("shared/roberta-base.tokenizer.json")!), texts(4, 30));
  }, 120_000);

  // letters of scripts whose words carry marks (Thai, Devanagari, Latin in NFD), zero-width and control characters
  // (and, behind NFC, marks with a normalisation boundary before them: Thai U+0E31, U+0E34-0E37, Devanagari U+093E-0940,
  // U+0902, U+0489, U+FE0F; not U+0E38, U+0E48, U+094D, nor a vowel sign that composes with the letter before it:
  // Myanmar U+1025 U+102E is U+1026, Balinese U+1B05 U+1B35 is U+1B06)
  const MARKED = [
    "ก", "ข", "ค", "ม", "\u0e31", "\u0e34", "\u0e35", "\u0e37", "\u0e48", "\u0e49", "\u0e38", "\u0e33", "\u0e4d", "क", "म", "र", "\u093e", "\u093f", "\u0940",
    "\u094d", "\u0902", "\u0928\u093c", "a", "e\u0301", "o\u0316\u0301", "\u0301\u0301", "\u0489", "\ufe0f", "\u200b", "\ufeff", "\u0001", "\u200d", "🇺🇸",
    "\u1100\u1161", "1", "!", " ", "\n", "\u0600", "\u0b47\u0b3e", "\u1025\u102e", "\u1025", "\u102e", "\u1b05\u1b35", "\u1b35", "Ä", "A\u0308",
  ];
  const marked = (seed: number, n: number) => Array.from({ length: n }, (_, i) => textOfPieces(MARKED, seed * 1000 + i, 80 + ((i * 37) % 200)));
  for (const name of ["models/clap", "models/qwen3-embed", "models/qwen3-rerank", "models/clip", "shared/clip-vit-base-patch32.tokenizer.json", "shared/roberta-base.tokenizer.json"]) {
    test.skipIf(tokenizerText(name) === null)(`byte-level BPE: class cuts next to marks and format characters (${name})`, async () => {
      const n = await checkCuts(name, JSON.parse(tokenizerText(name)!), marked(6, 30));
      // a letter before a mark is a cut without a normaliser, and behind NFC where the mark has a boundary before it
      // (about 1,300 each way without a normaliser, 540 behind NFC, where marks without a boundary before them stay out)
      expect([name, n.right > 400, n.left > 400]).toEqual([name, true, true]);
    }, 120_000);
  }

  // Behind NFC, a plain letter before a mark that composes with nothing (Arabic harakat, Hebrew niqqud, U+0316) is a cut
  // (prefix.ts markCutAt); not before a segment holding a composition's second (Arabic U+0653-0655: alef + U+0653 is
  // U+0622; Vietnamese in NFD, U+0301), nor after a precomposed letter (é, U+0622), nor a mark followed by a letter
  // (Qwen's regex joins one non-letter to the letters after it). Shadda before fatha is reordered (ccc 33 > 30).
  const ARABIC = [
    "ب", "ت", "س", "م", "ا", "و", "ي", "\u064e", "\u064f", "\u0650", "\u0651", "\u0651\u064e", "\u064e\u0651", "\u0652", "\u064b",
    "\u0653", "\u0654", "\u0655", "ا\u0653", "و\u0654", "ي\u0655\u064e", "\u0622", "\u0670", "ש", "\u05b8", "\u05bc", "\u05c1", "\u05b0", "בּ",
    "a", "x", "e\u0301", "\u0301", "\u0316", "o\u0316\u0301", "é", "é\u0316", "E\u0316", "a\u0300", "e\u0302\u0301", "o\u031b\u0303", "ng",
    "1", "٣", "!", " ", "\n", "\u200b", "\u0334", "\u0345", "İ", "\u1100\u1161", "가\u0316",
  ];
  const arabic = (seed: number, n: number) => Array.from({ length: n }, (_, i) => textOfPieces(ARABIC, seed * 1000 + i, 80 + ((i * 37) % 200)));
  for (const name of ["models/qwen3-embed", "models/qwen3-rerank", "models/clip", "shared/clip-vit-base-patch32.tokenizer.json"]) {
    test.skipIf(tokenizerText(name) === null)(`NFC byte-level BPE: cuts between a plain letter and the marks after it (${name})`, async () => {
      const n = await checkCuts(name, JSON.parse(tokenizerText(name)!), arabic(8, 30));
      expect([name, n.marks > 300]).toEqual([name, true]);
    }, 120_000);
  }

  test("added tokens over a letter and its marks: no cut inside an occurrence, raw or normalised (shadda + fatha reordered)", async () => {
    const json = qwen();
    for (const [k, [content, normalized]] of ([["\u0633\u064e\u0651", true], ["\u0628\u064f", false], ["\u0645\u0650\u0651", true]] as const).entries()) {
      json.added_tokens.push({ id: 2100 + k, content, single_word: false, lstrip: false, rstrip: false, normalized, special: false });
    }
    // (13 pieces: the generator draws the low bits of a linear congruential state, which a power of two would repeat)
    const pieces = ["\u0633", "\u0628", "\u0645", "\u064e", "\u064f", "\u0650", "\u0651", "\u0651\u064e", "\u0651\u0650", "\u064e\u0651", "\u0650\u0651", "a", " "];
    const texts = Array.from({ length: 20 }, (_, i) => textOfPieces(pieces, 9000 + i, 60 + ((i * 37) % 120)));
    const n = await checkCuts("qwen3-embed + added tokens of Arabic letters and marks", json, texts);
    expect(n.marks).toBeGreaterThan(300);
  }, 120_000);

  test("a vocabulary that merges U+0085 with a space: no cut after U+0085 (JavaScript's \\s leaves it out, the library's regex does not)", async () => {
    const json = qwen();
    // byte-level symbols of U+0085 (bytes 0xC2 0x85) and of the space, as GPT-2's byte-to-character map writes them
    const nel = "\u00c2\u0127";
    const merged = nel + "\u0120";
    const next = 3000;
    json.model.vocab[nel] ??= next;
    json.model.vocab[merged] = next + 1;
    json.model.merges.unshift(["\u00c2", "\u0127"], [nel, "\u0120"]);
    const rust = Tokenizer.fromString(JSON.stringify(json));
    // the whole text's piece "\u0085 " is one token, the text cut after U+0085 ends in another
    const whole = (await rust.encode("a\u0085  b", null, CONTENT)).getIds();
    expect(whole).toContain(next + 1);
    const n = await checkCuts("qwen3-embed merging U+0085 and a space", json, ["a\u0085  b".repeat(20), texts(5, 10).join("\u0085  ")]);
    expect(n.right).toBeGreaterThan(20);
  }, 120_000);

  // BertPreTokenizer isolates punctuation (punctuationCutAt); whitespace runs and the added tokens around them
  const BERT_PIECES = ["!", "!!", "-", "..", "?!", "[", "]", "[CLS]", "[SEP]", "[MASK]", "[Q] ", "[D] ", "[q]", "[C", "LS]", "a", "word", "W", " ", "  ", "\n", "\t", "\r\n", "\u3000", "\u00a0", "\u0085", "12", "日本", "。", "、", "¿", "«»", "\u037e", "\u0387", "!\u0301", "\u0301", "é", "😀", "\u00ad", "\u200b", "#", "$%&", "'", "\u2014", "\u2026", "\u0600", "\u2260", "\u226e\u226f", "\u1fef", "\u2260\u0301", "\u2211\u03b1"];
  for (const name of ["shared/bert-base-uncased.tokenizer.json", "models/bert-mean-norm", "models/colbert-pylate", "models/modernbert-embed"]) {
    test.skipIf(tokenizerText(name) === null)(`BERT: punctuation and whitespace cuts (${name})`, async () => {
      const bertTexts = Array.from({ length: 24 }, (_, i) => textOfPieces(BERT_PIECES, 6000 + i, 100 + ((i * 61) % 240)));
      const n = await checkCuts(name, JSON.parse(tokenizerText(name)!), bertTexts);
      expect(n.right).toBeGreaterThan(1000);
      expect(n.left).toBeGreaterThan(1000);
    }, 120_000);
  }

  // Metaspace behind NFKC and ` {2,}` (SentencePiece exports), and WhitespaceSplit: a space after a line break or tab
  // (t5-small by ids only: its Precompiled normaliser's offsets in the whole text are one character off after some
  // sequences, " \u0301" or a removed control, where the part after a cut has them right, though the ids agree)
  const WHITESPACE_PIECES = ["a", "word", " ", "  ", "\n", "\n ", " \n", "\t", "\r\n", "\u3000", "\u3000 ", "\u00a0", "\u0085", "\u2028", "\v", "\f", "\u0301", "é", "!", "12", "日本", "😀", "\u0600", "</s>", "<s>"];
  for (const name of ["models/gemma-embed", "models/deberta-rerank", "models/xlmr-max", "shared/t5-small.tokenizer.json"]) {
    test.skipIf(tokenizerText(name) === null)(`space cuts after whitespace (${name})`, async () => {
      const wsTexts = Array.from({ length: 24 }, (_, i) => textOfPieces(WHITESPACE_PIECES, 7000 + i, 100 + ((i * 61) % 240)));
      const n = await checkCuts(name, JSON.parse(tokenizerText(name)!), wsTexts, !name.startsWith("shared/t5"));
      expect(n.right).toBeGreaterThan(200);
      expect(n.left).toBeGreaterThan(200);
    }, 120_000);
  }

  // words and numbers separated by whitespace other than U+0020 (tab-separated data, lists one word a line, text whose
  // spaces are U+00A0 or U+3000): a cut before that whitespace (classSpaceCutAt); letters of Unicode 16 that the
  // library's tables do not know (U+10940 before a line break is one piece with it under Qwen's regex), an added
  // token before whitespace (roberta's "<mask>" has lstrip)
  const SEPARATED = ["word", "a", "Zé", "ж", "日本", "12", "3", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\v", "\f", "\u2009", " ", "!", "\u{10940}", "\u{10940}\n", "<mask>", "<|endoftext|>", "<|im_end|>"];
  const separated = (seed: number, n: number) => Array.from({ length: n }, (_, i) => textOfPieces(SEPARATED, seed * 1000 + i, 80 + ((i * 53) % 200)));
  for (const name of ["shared/roberta-base.tokenizer.json", "shared/clip-vit-base-patch32.tokenizer.json", "models/qwen3-embed", "models/qwen3-rerank", "models/clip", "models/clap", "models/colmodernvbert", "models/roberta-cls"]) {
    test.skipIf(tokenizerText(name) === null)(`byte-level BPE: class cuts before whitespace other than a space (${name})`, async () => {
      const n = await checkCuts(name, JSON.parse(tokenizerText(name)!), separated(8, 24));
      expect([name, n.right > 300, n.left > 300]).toEqual([name, true, true]);
    }, 120_000);
  }

  test("an added token with rstrip takes the whitespace after it: no class cut before whitespace", async () => {
    const json = qwen();
    json.added_tokens.push({ id: 2100, content: "word", single_word: false, lstrip: false, rstrip: true, normalized: false, special: false });
    expect(cutPolicy(json)!.classSpaceCuts).toBe(false);
    const rust = Tokenizer.fromString(JSON.stringify(json));
    // the whole text's "word\t" is the added token alone: the tab is gone
    expect((await rust.encode("aword\tb", null, CONTENT)).getIds()).toEqual((await rust.encode("awordb", null, CONTENT)).getIds());
    const noSpace = SEPARATED.filter((p) => p !== " ");
    const n = await checkCuts("qwen3-embed + an rstrip added token", json, Array.from({ length: 12 }, (_, i) => textOfPieces(noSpace, 9000 + i, 80 + ((i * 53) % 200))));
    expect(n.right).toBeGreaterThan(100);
  }, 120_000);

  // words separated by whitespace other than U+0020 under Metaspace (separatorCutAt): tabs, line breaks, U+00A0, U+3000,
  // and under Precompiled U+200B / U+FEFF, which it makes spaces; marks after them, CR LF, a Prepend character
  // (U+0600) before them, U+0085 (Precompiled makes nothing of it), XLM-R's "<mask>" (lstrip)
  const SEPARATED_WORDS = ["word", "a", "Zé", "ж", "日本", "12", "!", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2009", "\u200b", "\ufeff", "\u0085", "\u2028", "\v", "\f", "\u00a0\u0301", "\t\u0301", "\u3000\u0e33", "\u0600", " ", "\u0301", "</s>", "<mask>", "<s>"];
  for (const name of ["models/gemma-embed", "models/deberta-rerank", "models/xlmr-max", "models/colpali", "models/bge-m3-baai", "shared/t5-small.tokenizer.json", "shared/xlm-roberta-unigram.tokenizer.json.gz"]) {
    test.skipIf(tokenizerText(name) === null)(`Metaspace: cuts before whitespace other than a space (${name})`, async () => {
      const wordTexts = Array.from({ length: 24 }, (_, i) => textOfPieces(SEPARATED_WORDS, 8100 + i, 80 + ((i * 53) % 200)));
      const json = JSON.parse(tokenizerText(name)!);
      const n = await checkCuts(name, json, wordTexts, !name.startsWith("shared/"));
      expect([name, n.right > 150, n.left > 150]).toEqual([name, true, true]);
      // which characters are separators, by the library's own normaliser and pre-tokenizer
      const rust = Tokenizer.fromString(JSON.stringify(json));
      const normalizer = rust.getNormalizer();
      const pre = rust.getPreTokenizer()!;
      const rules = whitespaceRules(cutPolicy(json)!.whitespace!, (s) => (normalizer ? normalizer.normalizeString(s) : s), (s) => pre.preTokenizeString(s).map(([x]) => x));
      // U+00A0 and U+3000 are spaces to NFKC and Precompiled; tabs and line breaks separate words only where the
      // pre-tokenizer drops whitespace (WhitespaceSplit) or Precompiled makes a space of them; never a letter or mark
      const drops = cutPolicy(json)!.whitespace!.drop || JSON.stringify(json.normalizer).includes("Precompiled");
      expect([name, ...["\u00a0", "\u3000", "\t", "\n", "a", "\u0301"].map((c) => rules.before?.has(c) ?? false)]).toEqual([name, true, true, drops, drops, false, false]);
    }, 120_000);
  }

  // separators after control and format characters (CutPolicy.separatorLeads): soft hyphens, which the normalisers
  // keep, and C0 controls, which Precompiled and BERT's cleaning drop, before zero-width spaces, BOMs, tabs, NBSP;
  // runs of them, at the text's start, after whitespace, after a Prepend character, a mark after them, more than
  // SEPARATOR_LEAD_REACH dropped ones in a row
  const CONTROL_WORDS = ["a", "word", "!", "\u00ad", "\u00ad\u00ad", "\u0001", "\u0007", "\u0001\u0007\u0001", "\u0000", "\u2060", "\u200e", "\u0085", "\u008f", "\u200b", "\ufeff", "\t", "\n", "\u00a0", "\u3000", " ", "\u0301", "\u0600", "\u0001".repeat(17), "<mask>", "</s>"];
  const controlTexts = (seed: number) => Array.from({ length: 16 }, (_, i) => textOfPieces(CONTROL_WORDS, seed + i, 60 + ((i * 53) % 160)));
  for (const name of ["models/xlmr-max", "models/bge-m3-baai", "models/gemma-embed", "models/bert-classify", "shared/t5-small.tokenizer.json", "shared/xlm-roberta-unigram.tokenizer.json.gz"]) {
    test.skipIf(tokenizerText(name) === null)(`separators after control and format characters (${name})`, async () => {
      const json = JSON.parse(tokenizerText(name)!);
      const n = await checkCuts(name, json, controlTexts(8400), !name.startsWith("shared/"));
      expect([name, n.afterControls > 40]).toEqual([name, true]);
    }, 120_000);
  }

  test("a window inside a long word holds letters of one class to the library's regex, not only to JavaScript's tables", () => {
    const json = qwen();
    const policy = cutPolicy(json)!.inWord!;
    const rust = Tokenizer.fromString(JSON.stringify(json));
    const preTokenizer = rust.getPreTokenizer()!;
    const pieces: PieceCount = (s) => preTokenizer.preTokenizeString(s).length;
    // U+10940 (Unicode 16) is a letter to JavaScript and unassigned (not a letter) to the library
    expect(pieces("a\u{10940}")).toBe(2);
    const word = "ab\u{10940}".repeat(2000);
    // JavaScript's tables alone (a count that trusts them) would take a window there
    expect(wordPrefixWindow(word, 1000, policy, (c) => c, 64, () => 1)).not.toBeNull();
    expect(wordPrefixWindow(word, 1000, policy, (c) => c, 64, pieces)).toBeNull();
    expect(wordPrefixWindow("ab".repeat(3000), 1000, policy, (c) => c, 64, pieces)).not.toBeNull();
  });
});
