// A text batch as the session takes it: tokenized inputs padded into flat tensors on the model's padding side, and
// each row's real tokens found back from the attention mask.
import type { Encoded } from "../tokenize/encode";
import type { BatchTensors } from "./session";

export type PaddingSide = "left" | "right";

/** Pads a batch into flat tensors; decoder models (tokenizer_config padding_side "left") pad on the left. */
export function buildTensors(encs: readonly Encoded[], padId: number, side: PaddingSide = "right", fixedLength: number | null = null): BatchTensors {
  const batch = encs.length;
  // A fixed-length text tower (SigLIP) is always fed its full length.
  let seqLen = fixedLength ?? 1;
  for (const e of encs) if (e.ids.length > seqLen) seqLen = e.ids.length;
  const inputIds = new Int32Array(batch * seqLen);
  const attentionMask = new Int32Array(batch * seqLen);
  const needTypes = encs.some((e) => e.typeIds);
  const tokenTypeIds = needTypes ? new Int32Array(batch * seqLen) : null;
  if (padId !== 0) inputIds.fill(padId);
  const taskId = encs[0]?.taskId;
  for (let b = 0; b < batch; b++) {
    const e = encs[b]!;
    const o = b * seqLen + (side === "left" ? seqLen - e.ids.length : 0);
    inputIds.set(e.ids, o);
    attentionMask.fill(1, o, o + e.ids.length);
    if (tokenTypeIds && e.typeIds) tokenTypeIds.set(e.typeIds, o);
  }
  return taskId === undefined ? { batch, seqLen, inputIds, attentionMask, tokenTypeIds } : { batch, seqLen, inputIds, attentionMask, tokenTypeIds, taskId };
}

/** Each row's real tokens, found from the attention mask: where they start and how many (either padding side). */
export function rowExtents(t: BatchTensors): { lengths: Int32Array; starts: Int32Array } {
  const lengths = new Int32Array(t.batch);
  const starts = new Int32Array(t.batch);
  for (let b = 0; b < t.batch; b++) {
    const o = b * t.seqLen;
    let s = 0;
    while (s < t.seqLen && t.attentionMask[o + s] !== 1) s++;
    let n = 0;
    while (s + n < t.seqLen && t.attentionMask[o + s + n] === 1) n++;
    starts[b] = s;
    lengths[b] = n;
  }
  return { lengths, starts };
}
