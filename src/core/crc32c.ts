/**
 * CRC-32C (Castagnoli), the checksum remote values carry. The native addon
 * computes it while copying a block (SSE4.2 or ARMv8 instructions where
 * present); this table version gives the same values for what runs in
 * TypeScript: the simulated device and value encoding outside a device.
 */

const POLYNOMIAL = 0x82f63b78; // reflected

/** Slicing-by-4 tables: TABLES[k * 256 + b] is the CRC step of byte b followed by k zero bytes. */
const TABLES = ((): Uint32Array => {
  const t = new Uint32Array(4 * 256);
  for (let b = 0; b < 256; b++) {
    let c = b;
    for (let k = 0; k < 8; k++) c = c & 1 ? POLYNOMIAL ^ (c >>> 1) : c >>> 1;
    t[b] = c >>> 0;
  }
  for (let k = 1; k < 4; k++) {
    for (let b = 0; b < 256; b++) {
      const prev = t[(k - 1) * 256 + b];
      t[k * 256 + b] = (prev >>> 8) ^ t[prev & 0xff];
    }
  }
  return t;
})();

/** CRC-32C of `data`; pass the previous result as `crc` to continue over a following piece. */
export function crc32c(data: Uint8Array, crc = 0): number {
  let state = ~crc >>> 0;
  const n = data.length;
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    state ^= data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
    state =
      TABLES[768 + (state & 0xff)] ^ TABLES[512 + ((state >>> 8) & 0xff)] ^ TABLES[256 + ((state >>> 16) & 0xff)] ^ TABLES[state >>> 24];
  }
  for (; i < n; i++) state = (state >>> 8) ^ TABLES[(state ^ data[i]) & 0xff];
  return ~state >>> 0;
}
