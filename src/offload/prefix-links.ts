import type { BlockHash } from '../core/block-hash.js';

/**
 * Which held block extends which: the prefix tree of the CPU tier's blocks.
 *
 * A key is a chained hash, so its parent (the key of the offloaded block
 * before it in every prompt holding it) never changes. Lookups see whole
 * prompts, first block first (`OffloadingManager.touch`), and every store
 * shows its request's chain up to the blocks stored (`refresh`), so the
 * parent of each key is learned there, the blocks a request computed after
 * its lookup included, and remembered for a bounded number of keys.
 * Children are tracked only between held blocks.
 *
 * A block is worth nothing without its parent (a prefix hit stops at the
 * first missing block), so policies evict leaves first and treat a block
 * whose parent left as the first to go.
 */
/** The victims a policy chose so far, as a membership test. */
export interface ChosenKeys {
  has(key: BlockHash): boolean;
  add(key: BlockHash): unknown;
}

/** Membership in a short array (the victims chosen so far), without building a Set. */
export class ArraySet implements ChosenKeys {
  constructor(private readonly items: readonly BlockHash[]) {}

  has(key: BlockHash): boolean {
    return this.items.includes(key);
  }

  /** The array is the victims list itself: adding is the caller's push. */
  add(_key: BlockHash): void {}
}

export class PrefixLinks {
  /** Parent of each recently seen key, oldest first (bounded). */
  private readonly parentOf = new Map<BlockHash, BlockHash>();
  /** The held parent each held child is linked under. */
  private readonly linkedParent = new Map<BlockHash, BlockHash>();
  /** Held children of each held block that has any. */
  private readonly childrenOf = new Map<BlockHash, Set<BlockHash>>();
  /** Held blocks whose parent left the tier while they stayed, oldest first. */
  private readonly orphans = new Map<BlockHash, true>();

  constructor(
    private readonly maxRemembered: number,
    private readonly isHeld: (key: BlockHash) => boolean,
  ) {}

  /**
   * `chain` is one prompt's keys, first block first: each key's parent is the
   * key before it. Only `chain[from, to)` is read: the parents of the keys
   * after `from` are learned (the ones before were seen already).
   */
  sawChain(chain: readonly BlockHash[], from = 0, to = chain.length): void {
    for (let i = from + 1; i < to; i++) {
      const child = chain[i];
      let parent = this.parentOf.get(child);
      if (parent === undefined) {
        parent = chain[i - 1];
        this.parentOf.set(child, parent);
        if (this.parentOf.size > this.maxRemembered) this.parentOf.delete(this.parentOf.keys().next().value as BlockHash);
      }
      if (this.isHeld(child) && this.isHeld(parent)) this.link(parent, child);
    }
  }

  /** A block entered the tier: link it under its held parent, if known. */
  added(key: BlockHash): void {
    if (this.parentOf.size === 0) return;
    const parent = this.parentOf.get(key);
    if (parent !== undefined && parent !== key && this.isHeld(parent)) this.link(parent, key);
    // A parent stored again adopts the children that outlived it.
    if (this.orphans.size === 0) return;
    for (const orphan of this.orphans.keys()) {
      if (this.parentOf.get(orphan) === key) this.link(key, orphan);
    }
  }

  /** A block left the tier: its held children become orphans. */
  removed(key: BlockHash): void {
    if (this.linkedParent.size === 0 && this.childrenOf.size === 0 && this.orphans.size === 0) return;
    this.orphans.delete(key);
    this.unlink(key);
    const children = this.childrenOf.get(key);
    if (children === undefined) return;
    this.childrenOf.delete(key);
    for (const child of children) {
      this.linkedParent.delete(child);
      this.orphans.set(child, true);
    }
  }

  /** The parent of `key`, when a lookup showed it recently. */
  parentOfKey(key: BlockHash): BlockHash | undefined {
    return this.parentOf.get(key);
  }

  /** Held children of `key` (none when it is a leaf). */
  childrenOfKey(key: BlockHash): ReadonlySet<BlockHash> | undefined {
    return this.childrenOf.get(key);
  }

  /** Whether any held block lost its parent. */
  get hasOrphans(): boolean {
    return this.orphans.size > 0;
  }

  /** Held blocks whose parent left, oldest first. */
  orphanKeys(): IterableIterator<BlockHash> {
    return this.orphans.keys();
  }

  /**
   * The deepest held block under `key` along children `accept` takes (a leaf
   * of its subtree), or `key` itself when no child qualifies. Bounded by
   * `maxSteps`, so a malformed chain (a cycle) cannot loop.
   */
  deepestUnder(key: BlockHash, accept: (key: BlockHash) => boolean, maxSteps: number): BlockHash {
    let current = key;
    for (let step = 0; step < maxSteps; step++) {
      const children = this.childrenOf.get(current);
      if (children === undefined) return current;
      let next: BlockHash | undefined;
      for (const child of children) {
        if (accept(child)) {
          next = child;
          break;
        }
      }
      if (next === undefined) return current;
      current = next;
    }
    return current;
  }

  /** The tier lost every block; parents stay known (they are facts about hashes). */
  clearHeld(): void {
    this.childrenOf.clear();
    this.linkedParent.clear();
    this.orphans.clear();
  }

  /** Number of held parent-child links (for tests). */
  linkCount(): number {
    let n = 0;
    for (const children of this.childrenOf.values()) n += children.size;
    return n;
  }

  private unlink(child: BlockHash): void {
    const parent = this.linkedParent.get(child);
    if (parent === undefined) return;
    this.linkedParent.delete(child);
    const siblings = this.childrenOf.get(parent);
    if (siblings !== undefined && siblings.delete(child) && siblings.size === 0) this.childrenOf.delete(parent);
  }

  private link(parent: BlockHash, child: BlockHash): void {
    if (parent === child || this.linkedParent.get(child) === parent) return;
    this.unlink(child);
    this.linkedParent.set(child, parent);
    let children = this.childrenOf.get(parent);
    if (children === undefined) {
      children = new Set();
      this.childrenOf.set(parent, children);
    }
    children.add(child);
    this.orphans.delete(child);
  }
}
