// OpenAI token ids (cl100k_base, what OpenAI clients such as LangChain's OpenAIEmbeddings send in place of text)
// decoded back to text, which the model's own tokenizer then tokenizes. js-tiktoken is pure JavaScript with the
// ranks bundled, so it works in the compiled binary and offline. The table is built on first use.
import { Tiktoken } from "js-tiktoken/lite";
import cl100k from "js-tiktoken/ranks/cl100k_base";
import { InvalidInput } from "../errors";

let encoding: Tiktoken | null = null;
/** Ids at or above this are not cl100k_base tokens (its special tokens end at 100276). */
const CL100K_SIZE = 100277;

function cl100kBase(): Tiktoken {
  encoding ??= new Tiktoken(cl100k);
  return encoding;
}

/** Decodes cl100k_base token-id sequences to text; an id outside the vocabulary is a 400 naming the input. */
export function decodeOpenAiTokens(seqs: readonly number[][], field: string): string[] {
  const enc = cl100kBase();
  return seqs.map((seq, i) => {
    const param = seqs.length === 1 ? field : `${field}[${i}]`;
    if (seq.length === 0) throw new InvalidInput(`\`${param}\` is an empty token list`, field);
    for (const id of seq) {
      if (!Number.isInteger(id) || id < 0 || id >= CL100K_SIZE) {
        throw new InvalidInput(`\`${param}\` has token id ${id}, outside OpenAI's cl100k_base vocabulary (0..${CL100K_SIZE - 1})`, field);
      }
    }
    let text: string;
    try {
      text = enc.decode(seq);
    } catch (e) {
      throw new InvalidInput(`\`${param}\` is not a cl100k_base token sequence: ${(e as Error).message}`, field);
    }
    if (text.length === 0) throw new InvalidInput(`\`${param}\` decodes to empty text`, field);
    return text;
  });
}
