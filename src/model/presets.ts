import type { ModelShape } from './shape.js';

/**
 * Built-in model shapes. `tiny` and `small` keep tests fast; the others carry
 * the KV geometry and the size of real models (Llama-3.1-8B, Qwen2.5-7B,
 * Llama-3.1-70B: parameters, hidden size and query heads from their published
 * configs), so transfer sizes and the step clock are realistic.
 */
export const MODEL_PRESETS = {
  tiny: {
    name: 'tiny',
    layers: 2,
    kvHeads: 4,
    headDim: 8,
    vocabSize: 32000,
    modelSeed: 0x6b767469,
    parameters: 2_100_000,
    hiddenSize: 32,
    attentionHeads: 4,
  },
  small: {
    name: 'small',
    layers: 4,
    kvHeads: 4,
    headDim: 32,
    vocabSize: 32000,
    modelSeed: 0x736d616c,
    parameters: 9_000_000,
    hiddenSize: 128,
    attentionHeads: 4,
  },
  'llama-8b': {
    name: 'llama-8b',
    layers: 32,
    kvHeads: 8,
    headDim: 128,
    vocabSize: 128256,
    modelSeed: 0x6c6c3862,
    parameters: 8_030_261_248,
    hiddenSize: 4096,
    attentionHeads: 32,
  },
  'qwen-7b': {
    name: 'qwen-7b',
    layers: 28,
    kvHeads: 4,
    headDim: 128,
    vocabSize: 152064,
    modelSeed: 0x71776e37,
    parameters: 7_615_616_512,
    hiddenSize: 3584,
    attentionHeads: 28,
  },
  'llama-70b': {
    name: 'llama-70b',
    layers: 80,
    kvHeads: 8,
    headDim: 128,
    vocabSize: 128256,
    modelSeed: 0x6c6c3730,
    parameters: 70_553_706_496,
    hiddenSize: 8192,
    attentionHeads: 64,
  },
} as const satisfies Record<string, ModelShape>;

export type ModelPresetName = keyof typeof MODEL_PRESETS;

export const MODEL_PRESET_NAMES = Object.keys(MODEL_PRESETS) as ModelPresetName[];

export function isModelPresetName(name: string): name is ModelPresetName {
  return Object.prototype.hasOwnProperty.call(MODEL_PRESETS, name);
}
