import { MODEL_PRESETS } from '../../src/model/presets.js';
import type { ModelShape } from '../../src/model/shape.js';

/** The model every test runs: the tiny preset (2 layers, 4 KV heads of 8 dims, 2-byte elements). */
export const TINY: ModelShape = MODEL_PRESETS.tiny;

/** The tiny preset without emulated compute, so device tests run at memcpy speed. */
export const TINY_NO_COMPUTE: ModelShape = { ...TINY, computeNsPerToken: 0 };
