import type { ModelShape } from './shape.js';

/**
 * Built-in model shapes. `tiny` keeps tests fast; the others carry the KV
 * geometry of common models so transfer sizes are realistic. Their compute
 * cost approximates prefill on one H100-class GPU for the whole model.
 */
export const MODEL_PRESETS = {
  tiny: {
    name: 'tiny',
    layers: 2,
    kvHeads: 4,
    headDim: 8,
    vocabSize: 32000,
    modelSeed: 0x6b767469,
    computeNsPerToken: 20_000,
  },
  small: {
    name: 'small',
    layers: 4,
    kvHeads: 4,
    headDim: 32,
    vocabSize: 32000,
    modelSeed: 0x736d616c,
    computeNsPerToken: 40_000,
  },
  'llama-8b': {
    name: 'llama-8b',
    layers: 32,
    kvHeads: 8,
    headDim: 128,
    vocabSize: 128256,
    modelSeed: 0x6c6c3862,
    computeNsPerToken: 66_000,
  },
  'qwen-7b': {
    name: 'qwen-7b',
    layers: 28,
    kvHeads: 4,
    headDim: 128,
    vocabSize: 152064,
    modelSeed: 0x71776e37,
    computeNsPerToken: 60_000,
  },
  'llama-70b': {
    name: 'llama-70b',
    layers: 80,
    kvHeads: 8,
    headDim: 128,
    vocabSize: 128256,
    modelSeed: 0x6c6c3730,
    computeNsPerToken: 560_000,
  },
} as const satisfies Record<string, ModelShape>;

export type ModelPresetName = keyof typeof MODEL_PRESETS;

export const MODEL_PRESET_NAMES = Object.keys(MODEL_PRESETS) as ModelPresetName[];

export function isModelPresetName(name: string): name is ModelPresetName {
  return Object.prototype.hasOwnProperty.call(MODEL_PRESETS, name);
}
