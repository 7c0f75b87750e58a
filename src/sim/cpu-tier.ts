/**
 * The simulated CPU tier: CPU block i holds the chain states of its
 * `offloadFactor` GPU sub-blocks, each `blockSize` positions long.
 */
export class SimulatedCpuTier {
  readonly numBlocks: number;
  readonly offloadFactor: number;
  readonly blockSize: number;
  private readonly states: Uint32Array;

  constructor(numBlocks: number, offloadFactor: number, blockSize: number) {
    this.numBlocks = numBlocks;
    this.offloadFactor = offloadFactor;
    this.blockSize = blockSize;
    this.states = new Uint32Array(numBlocks * offloadFactor * blockSize);
  }

  /** The chain states of sub-block `sub` of CPU block `cpuBlockId` (a view, not a copy). */
  subBlock(cpuBlockId: number, sub: number): Uint32Array {
    if (!Number.isInteger(cpuBlockId) || cpuBlockId < 0 || cpuBlockId >= this.numBlocks) {
      throw new RangeError(`CPU block id ${cpuBlockId} is outside [0, ${this.numBlocks})`);
    }
    if (!Number.isInteger(sub) || sub < 0 || sub >= this.offloadFactor) {
      throw new RangeError(`sub-block ${sub} is outside [0, ${this.offloadFactor})`);
    }
    const start = (cpuBlockId * this.offloadFactor + sub) * this.blockSize;
    return this.states.subarray(start, start + this.blockSize);
  }

  /** Writes a whole CPU block (offloadFactor * blockSize chain states), e.g. to seed the tier in tests. */
  writeBlock(cpuBlockId: number, states: ArrayLike<number>): void {
    const size = this.offloadFactor * this.blockSize;
    if (states.length !== size) throw new RangeError(`a CPU block holds ${size} chain states, got ${states.length}`);
    for (let sub = 0; sub < this.offloadFactor; sub++) {
      const view = this.subBlock(cpuBlockId, sub);
      for (let i = 0; i < this.blockSize; i++) view[i] = states[sub * this.blockSize + i] >>> 0;
    }
  }

  readBlock(cpuBlockId: number): Uint32Array {
    const out = new Uint32Array(this.offloadFactor * this.blockSize);
    for (let sub = 0; sub < this.offloadFactor; sub++) out.set(this.subBlock(cpuBlockId, sub), sub * this.blockSize);
    return out;
  }

  clear(): void {
    this.states.fill(0);
  }
}
