import type { KVBlock } from './kv-block.js';

/**
 * The pool's free blocks as a doubly linked list through the blocks
 * themselves: allocation pops the head, freed blocks join the tail, and a
 * cached free block that gets a prefix hit leaves from the middle in O(1).
 */
export class FreeBlockQueue {
  private head: KVBlock | null = null;
  private tail: KVBlock | null = null;
  private count = 0;

  get length(): number {
    return this.count;
  }

  peekFront(): KVBlock | null {
    return this.head;
  }

  popFront(): KVBlock {
    const block = this.head;
    if (block === null) throw new Error('free block queue is empty');
    this.remove(block);
    return block;
  }

  append(block: KVBlock): void {
    this.assertDetached(block);
    block.prevFree = this.tail;
    block.nextFree = null;
    if (this.tail === null) this.head = block;
    else this.tail.nextFree = block;
    this.tail = block;
    block.inFreeQueue = true;
    this.count++;
  }

  prepend(block: KVBlock): void {
    this.assertDetached(block);
    block.prevFree = null;
    block.nextFree = this.head;
    if (this.head === null) this.tail = block;
    else this.head.prevFree = block;
    this.head = block;
    block.inFreeQueue = true;
    this.count++;
  }

  remove(block: KVBlock): void {
    if (!block.inFreeQueue) throw new Error(`block ${block.id} is not in the free queue`);
    if (block.prevFree === null) this.head = block.nextFree;
    else block.prevFree.nextFree = block.nextFree;
    if (block.nextFree === null) this.tail = block.prevFree;
    else block.nextFree.prevFree = block.prevFree;
    block.prevFree = null;
    block.nextFree = null;
    block.inFreeQueue = false;
    this.count--;
  }

  /** Blocks from head to tail (tests and consistency checks). */
  *[Symbol.iterator](): IterableIterator<KVBlock> {
    for (let b = this.head; b !== null; b = b.nextFree) yield b;
  }

  /** Empties the queue without touching the blocks' links (the caller rebuilds them). */
  clear(): void {
    this.head = null;
    this.tail = null;
    this.count = 0;
  }

  private assertDetached(block: KVBlock): void {
    if (block.inFreeQueue) throw new Error(`block ${block.id} is already in the free queue`);
  }
}
