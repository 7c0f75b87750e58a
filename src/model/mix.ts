/**
 * 32-bit integer mixing used by the reference model (docs/architecture.md, "Reference model").
 * Every value is an unsigned 32-bit integer held in a JS number.
 */

/** murmur3's fmix32 finalizer. */
export function mix(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** Golden-ratio constants named by the model definition. */
export const CHAIN_MULTIPLIER = 0x9e3779b9;
export const ELEMENT_MULTIPLIER = 0x9e3779b1;
