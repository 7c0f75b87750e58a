import type { SeededRandom } from '../../src/core/prng.js';
import type { KvCacheEvent, KvEventBatch, KvMedium } from '../../src/events/kv-cache-events.js';

/** Seeded batches of every event shape, hash form and integer width the wire format has, for the encoder tests. */

export function hexHash(random: SeededRandom, digits: number): string {
  let text = '';
  for (let i = 0; i < digits; i++) text += '0123456789abcdef'[random.below(16)];
  return text;
}

/** A hash as the caches name blocks (16 hex digits), and now and then a wider, shorter, upper-case or non-hex one. */
function someHash(random: SeededRandom): string {
  switch (random.below(8)) {
    case 0:
      return hexHash(random, 32);
    case 1:
      return hexHash(random, 1 + random.below(15));
    case 2:
      return hexHash(random, 16).toUpperCase();
    case 3:
      return `block-${random.below(1000)}`;
    default:
      return hexHash(random, 16);
  }
}

/** A token id of every msgpack integer width: fixint, uint 8, uint 16, uint 32. */
function someToken(random: SeededRandom): number {
  const widths = [0x80, 0x100, 0x10000, 0x100000000];
  return random.below(widths[random.below(widths.length)]);
}

export function someBatch(random: SeededRandom): KvEventBatch {
  const events: KvCacheEvent[] = [];
  const count = random.below(40);
  for (let i = 0; i < count; i++) {
    const medium: KvMedium = random.below(2) === 0 ? 'GPU' : 'CPU';
    const kind = random.below(10);
    if (kind < 6) {
      const blocks = 1 + random.below(20);
      events.push({
        type: 'BlockStored',
        blockHashes: Array.from({ length: blocks }, () => someHash(random)),
        parentBlockHash: random.below(3) === 0 ? null : someHash(random),
        tokenIds: medium === 'CPU' ? [] : Array.from({ length: blocks * 16 }, () => someToken(random)),
        blockSize: [1, 16, 200, 70_000][random.below(4)],
        medium,
      });
    } else if (kind < 9) {
      events.push({ type: 'BlockRemoved', blockHashes: Array.from({ length: 1 + random.below(20) }, () => someHash(random)), medium });
    } else {
      events.push({ type: 'AllBlocksCleared' });
    }
  }
  // Wall-clock seconds with a fraction, and now and then a whole second (an integer on the wire).
  const ts = random.below(4) === 0 ? 1_700_000_000 + random.below(1000) : 1_700_000_000 + random.below(1_000_000) / 1000;
  return { ts, events };
}
