import type { KvGeometry } from '../core/kv-geometry.js';

/**
 * The simulated CPU tier: CPU block i holds the chain states of its
 * `offloadFactor` GPU sub-blocks, each `blockSize` positions long.
 */
export class SimulatedCpuTier {
  readonly numBlocks: number;
  private readonly states: Uint32Array;

  constructor(
    numBlocks: number,
    /** The tier's blocks: `offloadFactor` GPU blocks of `blockSize` positions each. */
    readonly geometry: Pick<KvGeometry, 'offloadFactor' | 'blockSize'>,
  ) {
    this.numBlocks = numBlocks;
    this.states = new Uint32Array(numBlocks * geometry.offloadFactor * geometry.blockSize);
  }

  /** The chain states of sub-block `sub` of CPU block `cpuBlockId` (a view, not a copy). */
  subBlock(cpuBlockId: number, sub: number): Uint32Array {
    if (!Number.isInteger(cpuBlockId) || cpuBlockId < 0 || cpuBlockId >= this.numBlocks) {
      throw new RangeError(`CPU block id ${cpuBlockId} is outside [0, ${this.numBlocks})`);
    }
    if (!Number.isInteger(sub) || sub < 0 || sub >= this.geometry.offloadFactor) {
      throw new RangeError(`sub-block ${sub} is outside [0, ${this.geometry.offloadFactor})`);
    }
    const start = (cpuBlockId * this.geometry.offloadFactor + sub) * this.geometry.blockSize;
    return this.states.subarray(start, start + this.geometry.blockSize);
  }

  /** Writes a whole CPU block (offloadFactor * blockSize chain states), e.g. to seed the tier in tests. */
  writeBlock(cpuBlockId: number, states: ArrayLike<number>): void {
    const size = this.geometry.offloadFactor * this.geometry.blockSize;
    if (states.length !== size) throw new RangeError(`a CPU block holds ${size} chain states, got ${states.length}`);
    for (let sub = 0; sub < this.geometry.offloadFactor; sub++) {
      const view = this.subBlock(cpuBlockId, sub);
      for (let i = 0; i < this.geometry.blockSize; i++) view[i] = states[sub * this.geometry.blockSize + i] >>> 0;
    }
  }

  readBlock(cpuBlockId: number): Uint32Array {
    const out = new Uint32Array(this.geometry.offloadFactor * this.geometry.blockSize);
    for (let sub = 0; sub < this.geometry.offloadFactor; sub++) out.set(this.subBlock(cpuBlockId, sub), sub * this.geometry.blockSize);
    return out;
  }

  clear(): void {
    this.states.fill(0);
  }
}
