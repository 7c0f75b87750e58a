import { describe, expect, it } from 'vitest';
import { MODEL_PRESETS } from '../../src/model/presets.js';
import { IncrementalDecoder, textCodecFor, type TextCodec } from '../../src/serve/text-codec.js';
import { promptOf } from '../support/random.js';

async function codecOf(vocabSize: number): Promise<TextCodec> {
  const codec = await textCodecFor(vocabSize);
  if (codec === null) throw new Error(`no tokenizer for ${vocabSize}`);
  return codec;
}

/** Decodes `ids` delta by delta, as a stream does. */
function streamed(codec: TextCodec, ids: readonly number[]): string {
  const decoder = new IncrementalDecoder(codec);
  let text = '';
  for (const id of ids) text += decoder.push([id]);
  return text + decoder.flush();
}

/** Decodes `ids` `size` ids per delta. */
function streamedBy(codec: TextCodec, ids: readonly number[], size: number): string {
  const decoder = new IncrementalDecoder(codec);
  let text = '';
  for (let at = 0; at < ids.length; at += size) text += decoder.push(ids.slice(at, at + size));
  return text + decoder.flush();
}

describe('text prompts and completions', () => {
  it.each([
    ['tiny', MODEL_PRESETS.tiny.vocabSize],
    ['llama-8b', MODEL_PRESETS['llama-8b'].vocabSize],
  ])('the %s vocabulary has a tokenizer whose ids are the model\'s own, and text round-trips', async (_name, vocabSize) => {
    const codec = await codecOf(vocabSize);
    const text = 'Prefix caching keeps KV blocks — even «ünïcödé» ones — for reuse. 42 ✓';
    const ids = codec.encode(text);
    for (const id of ids) expect(id >= 0 && id < vocabSize).toBe(true);
    expect(codec.decode(ids).trim().endsWith(text)).toBe(true);
  });

  it('a vocabulary no tokenizer matches takes token ids only', async () => {
    expect(await textCodecFor(MODEL_PRESETS['qwen-7b'].vocabSize)).toBeNull();
  });

  it.each([
    ['tiny', MODEL_PRESETS.tiny.vocabSize],
    ['llama-8b', MODEL_PRESETS['llama-8b'].vocabSize],
  ])('streamed deltas of any %s output (byte tokens included) add up to the whole decoding', async (_name, vocabSize) => {
    const codec = await codecOf(vocabSize);
    for (let round = 0; round < 20; round++) {
      // Model outputs are any ids of the vocabulary, in any order.
      const ids = promptOf(60, round, vocabSize);
      expect(streamed(codec, ids)).toBe(codec.decode(ids));
    }
    const multiByte = codec.encode('日本語のテキスト、絵文字🙂も').slice(1);
    expect(streamed(codec, multiByte)).toBe(codec.decode(multiByte));
  });

  it('the LLaMA vocabulary decodes any ids exactly as llama-tokenizer-js does: byte tokens, word marks, split characters', async () => {
    const codec = await codecOf(MODEL_PRESETS.tiny.vocabSize);
    const { default: tokenizer } = await import('llama-tokenizer-js');
    const cases: number[][] = [
      [],
      // <0xE6> <0x97> <0xA5> (日) whole and cut short, a BOM's bytes, then word pieces.
      [233, 154, 168],
      [233, 154],
      [242, 190, 194, 450, 29871, 29871],
      codec.encode('«ünïcödé» 🙂 and  two spaces').slice(1),
    ];
    for (let seed = 0; seed < 40; seed++) cases.push(promptOf(1 + (seed % 9), 500 + seed, MODEL_PRESETS.tiny.vocabSize));
    // Byte tokens only (ids 3..258): invalid UTF-8 becomes U+FFFD in both.
    for (let seed = 0; seed < 20; seed++) cases.push(promptOf(6, 900 + seed, 256).map((id) => id + 3));
    for (const ids of cases) {
      expect(codec.decode(ids)).toBe(tokenizer.decode(ids, false, false));
      // Streamed one id at a time, and eight at a time, the deltas add up to the same text.
      expect(streamed(codec, ids)).toBe(tokenizer.decode(ids, false, false));
      expect(streamedBy(codec, ids, 8)).toBe(tokenizer.decode(ids, false, false));
    }
  });

  it('an id outside the LLaMA vocabulary is refused, naming it', async () => {
    const codec = await codecOf(MODEL_PRESETS.tiny.vocabSize);
    expect(() => codec.decode([5, 32000])).toThrow(/token id 32000 is outside the vocabulary/);
  });
});
