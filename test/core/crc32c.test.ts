import { describe, expect, it } from 'vitest';
import { crc32c } from '../../src/core/crc32c.js';

describe('CRC-32C', () => {
  it('gives the standard check values', () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(0))).toBe(0);
    // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of ones, and ascending.
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa);
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e);
  });

  it('continues over pieces as over the whole', () => {
    const data = Uint8Array.from({ length: 1001 }, (_, i) => (i * 7919 + 13) & 0xff);
    for (const cut of [0, 1, 3, 4, 500, 1000, 1001]) {
      expect(crc32c(data.subarray(cut), crc32c(data.subarray(0, cut)))).toBe(crc32c(data));
    }
  });

  it('changes when any one bit changes', () => {
    const data = Uint8Array.from({ length: 64 }, (_, i) => i * 3);
    const clean = crc32c(data);
    for (let bit = 0; bit < data.length * 8; bit += 13) {
      const flipped = Uint8Array.from(data);
      flipped[bit >> 3] ^= 1 << (bit & 7);
      expect(crc32c(flipped)).not.toBe(clean);
    }
  });
});
