/**
 * Text prompts and completions. The reference model samples token ids in
 * [0, vocabSize), so a text prompt is tokenized by a real tokenizer whose
 * vocabulary *is* the model's: ids are used as they are, with no remapping,
 * and every id the model generates decodes to text.
 *
 * - vocabSize 32000 (the tiny and small presets): LLaMA/Llama 2's
 *   SentencePiece BPE (npm `llama-tokenizer-js`);
 * - vocabSize 128256 (llama-8b, llama-70b): Llama 3's byte-level BPE
 *   (npm `llama3-tokenizer-js`).
 *
 * Other vocabularies (qwen-7b's 152064, custom shapes) have no tokenizer
 * here: they take prompts as token ids only. Both tokenizers are loaded on
 * first use (the Llama 3 vocabulary is some 10 MB of JavaScript).
 */

export interface TextCodec {
  /** What the tokenizer is, for /v1/models and the startup line. */
  readonly name: string;
  readonly vocabSize: number;
  /** Token ids of a prompt, beginning-of-text token first, as the models were trained. */
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
}

const LLAMA2_VOCAB = 32000;
const LLAMA3_VOCAB = 128256;
const LLAMA2_BOS = 1;

/** The vocabulary sizes that have a tokenizer. */
export const TOKENIZED_VOCAB_SIZES: readonly number[] = [LLAMA2_VOCAB, LLAMA3_VOCAB];

/** The tokenizer of a model with `vocabSize` token ids, or null when none matches (prompts must then be token ids). */
export async function textCodecFor(vocabSize: number): Promise<TextCodec | null> {
  if (vocabSize === LLAMA2_VOCAB) {
    const { default: tokenizer } = await import('llama-tokenizer-js');
    return {
      name: 'llama-tokenizer-js (LLaMA / Llama 2, 32000 ids)',
      vocabSize,
      encode: (text) => [LLAMA2_BOS, ...tokenizer.encode(text, false, true)],
      // Raw pieces: the "▁" word marks become spaces, byte tokens become UTF-8.
      decode: (ids) => tokenizer.decode(ids as number[], false, false),
    };
  }
  if (vocabSize === LLAMA3_VOCAB) {
    const { default: tokenizer } = await import('llama3-tokenizer-js');
    return {
      name: 'llama3-tokenizer-js (Llama 3, 128256 ids)',
      vocabSize,
      encode: (text) => tokenizer.encode(text, { bos: true, eos: false }),
      decode: (ids) => tokenizer.decode(ids as number[]),
    };
  }
  return null;
}

/**
 * Turns a growing list of token ids into text deltas whose concatenation is
 * the decoding of the whole list. Each delta decodes a short window (the
 * tokens since the last delta and the few before them), so a long
 * completion costs O(n); text is held back while the window ends inside a
 * UTF-8 sequence (a trailing U+FFFD), as incremental detokenizers do.
 */
export class IncrementalDecoder {
  private readonly ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;

  constructor(private readonly codec: TextCodec) {}

  /** The text the new tokens add; '' while they end inside a character. */
  push(tokens: readonly number[]): string {
    for (const token of tokens) this.ids.push(token);
    const prefix = this.codec.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const text = this.codec.decode(this.ids.slice(this.prefixOffset));
    if (text.length <= prefix.length || text.endsWith('\uFFFD') || !text.startsWith(prefix)) return '';
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    return text.slice(prefix.length);
  }

  /** What is held back at the end (the last tokens decode to an incomplete character). */
  flush(): string {
    const prefix = this.codec.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const text = this.codec.decode(this.ids.slice(this.prefixOffset));
    this.prefixOffset = this.readOffset = this.ids.length;
    return text.startsWith(prefix) ? text.slice(prefix.length) : '';
  }
}
