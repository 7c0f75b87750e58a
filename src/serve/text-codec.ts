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
  /**
   * A decoder of a growing list of ids whose deltas add up to decode() of
   * the whole list, where the tokenizer allows one cheaper than
   * re-decoding a window per delta (IncrementalDecoder uses it).
   */
  streamDecoder?(): DeltaDecoder;
}

/** Text deltas of a growing list of token ids. */
export interface DeltaDecoder {
  /** The text the new tokens add ('' while they end inside a character). */
  push(tokens: readonly number[]): string;
  /** What is held back at the end. */
  flush(): string;
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
    const pieces = new Llama2Pieces(tokenizer.vocabById);
    return {
      name: 'llama-tokenizer-js (LLaMA / Llama 2, 32000 ids)',
      vocabSize,
      encode: (text) => [LLAMA2_BOS, ...tokenizer.encode(text, false, true)],
      // Raw pieces: the "▁" word marks become spaces, byte tokens become UTF-8.
      decode: (ids) => pieces.decode(ids),
      streamDecoder: () => pieces.streamDecoder(),
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

/** The "▁" piece (id 29871): SentencePiece's word mark, a space in text. */
const LLAMA2_SPACE_ID = 29871;

/**
 * llama-tokenizer-js's decode(ids, false, false), with every id's UTF-8
 * bytes computed once, when the codec loads: a stream decodes a few ids
 * per event, and the package's decode encodes every piece to UTF-8 again
 * on every call (about 6 us per one-token event here, as much as the
 * socket write). Same result: the
 * pieces' bytes (a `<0xNN>` piece is that byte) decoded as UTF-8, word
 * marks made spaces. Since that is a plain UTF-8 decoding of concatenated
 * bytes, a stream decodes its deltas with a streaming TextDecoder, which
 * holds back a character cut between tokens.
 */
class Llama2Pieces {
  private readonly decoder = new TextDecoder('utf-8');
  private readonly space: string;
  /** Every piece's UTF-8 bytes, id after id (built once, so the heap does not grow as ids are first seen). */
  private readonly pieceBytes: Uint8Array;
  /** Where id i's bytes start in pieceBytes; starts[vocabulary size] is the end. */
  private readonly starts: Uint32Array;

  constructor(vocabById: readonly string[]) {
    this.space = vocabById[LLAMA2_SPACE_ID];
    const encoder = new TextEncoder();
    const encoded = vocabById.map((piece) =>
      piece.startsWith('<0x') && piece.endsWith('>') ? Uint8Array.of(Number.parseInt(piece.replace(/<0x|>/g, ''), 16)) : encoder.encode(piece),
    );
    this.starts = new Uint32Array(encoded.length + 1);
    for (let id = 0; id < encoded.length; id++) this.starts[id + 1] = this.starts[id] + encoded[id].length;
    this.pieceBytes = new Uint8Array(this.starts[encoded.length]);
    encoded.forEach((bytes, id) => this.pieceBytes.set(bytes, this.starts[id]));
  }

  decode(ids: readonly number[]): string {
    return this.decoder.decode(this.bytes(ids)).replaceAll(this.space, ' ');
  }

  streamDecoder(): DeltaDecoder {
    const decoder = new TextDecoder('utf-8');
    return {
      push: (tokens) => decoder.decode(this.bytes(tokens), { stream: true }).replaceAll(this.space, ' '),
      flush: () => decoder.decode().replaceAll(this.space, ' '),
    };
  }

  /** The ids' bytes, one after another (a single id's: a view of pieceBytes). */
  private bytes(ids: readonly number[]): Uint8Array {
    if (ids.length === 1) return this.pieceBytes.subarray(this.start(ids[0]), this.starts[ids[0] + 1]);
    let length = 0;
    for (const id of ids) length += this.starts[id + 1] - this.start(id);
    const bytes = new Uint8Array(length);
    let at = 0;
    for (const id of ids) {
      bytes.set(this.pieceBytes.subarray(this.starts[id], this.starts[id + 1]), at);
      at += this.starts[id + 1] - this.starts[id];
    }
    return bytes;
  }

  /** Where `id`'s bytes start; a RangeError for an id outside the vocabulary. */
  private start(id: number): number {
    if (!Number.isInteger(id) || id < 0 || id >= this.starts.length - 1) {
      throw new RangeError(`token id ${id} is outside the vocabulary (0..${this.starts.length - 2})`);
    }
    return this.starts[id];
  }
}

/**
 * Turns a growing list of token ids into text deltas whose concatenation is
 * the decoding of the whole list. Each delta decodes a short window (the
 * tokens since the last delta and the few before them), so a long
 * completion costs O(n); text is held back while the window ends inside a
 * UTF-8 sequence (a trailing U+FFFD), as incremental detokenizers do.
 * A codec with a delta decoder of its own (LLaMA's) is used through it.
 */
export class IncrementalDecoder implements DeltaDecoder {
  private readonly ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;
  /** The codec's own delta decoder, where it has one (then the window above is unused). */
  private readonly stream: DeltaDecoder | null;

  constructor(private readonly codec: TextCodec) {
    this.stream = codec.streamDecoder?.() ?? null;
  }

  /** The text the new tokens add; '' while they end inside a character. */
  push(tokens: readonly number[]): string {
    if (this.stream !== null) return this.stream.push(tokens);
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
    if (this.stream !== null) return this.stream.flush();
    const prefix = this.codec.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const text = this.codec.decode(this.ids.slice(this.prefixOffset));
    this.prefixOffset = this.readOffset = this.ids.length;
    return text.startsWith(prefix) ? text.slice(prefix.length) : '';
  }
}
