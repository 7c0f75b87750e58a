import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/core/errors.js';
import { CpuBlockAllocator, CpuBlockAllocatorError } from '../../../src/offload/cpu-block-allocator.js';

describe('CPU block allocator', () => {
  it('hands out never-used ids first, in increasing order', () => {
    const allocator = new CpuBlockAllocator(5);
    expect(allocator.allocate(2)).toEqual([0, 1]);
    expect(allocator.allocate(2)).toEqual([2, 3]);
    expect(allocator.numFree).toBe(1);
  });

  it('reuses freed ids last-freed-first once the fresh ones are used up', () => {
    const allocator = new CpuBlockAllocator(4);
    allocator.allocate(3);
    allocator.free(0);
    allocator.free(2);
    // Fresh id 3 comes before any reused one; then 2 (freed last), then 0.
    expect(allocator.allocate(3)).toEqual([3, 2, 0]);
    expect(allocator.numFree).toBe(0);
  });

  it('refuses to hand out more blocks than are free, naming the shortfall, and changes nothing', () => {
    const allocator = new CpuBlockAllocator(2);
    allocator.allocate(1);
    expect(() => allocator.allocate(2)).toThrowError(/2 blocks requested but only 1 of 2 are free/);
    expect(() => allocator.allocate(2)).toThrowError(CpuBlockAllocatorError);
    expect(allocator.numFree).toBe(1);
    expect(allocator.allocate(1)).toEqual([1]);
  });

  it('rejects a double free and an id out of range', () => {
    const allocator = new CpuBlockAllocator(2);
    allocator.allocate(1);
    allocator.free(0);
    expect(() => allocator.free(0)).toThrowError(/block id 0 is not allocated/);
    expect(() => allocator.free(1)).toThrowError(/block id 1 is not allocated/);
    expect(() => allocator.free(2)).toThrowError(/block id 2 is outside \[0, 2\)/);
    expect(() => allocator.free(-1)).toThrowError(CpuBlockAllocatorError);
  });

  it('starts again from id 0 after a reset', () => {
    const allocator = new CpuBlockAllocator(3);
    allocator.allocate(3);
    allocator.free(1);
    allocator.reset();
    expect(allocator.numFree).toBe(3);
    expect(allocator.allocate(3)).toEqual([0, 1, 2]);
  });

  it('rejects a capacity that is not a positive integer, naming the value', () => {
    expect(() => new CpuBlockAllocator(0)).toThrowError(ConfigError);
    expect(() => new CpuBlockAllocator(0)).toThrowError(/capacity must be an integer >= 1, got 0/);
    expect(() => new CpuBlockAllocator(2.5)).toThrowError(/got 2.5/);
  });
});
