import type { BlockHash } from '../../core/block-hash.js';

/**
 * The offloaded-block groups of freed requests, for write-back with f > 1:
 * an offloaded block is f consecutive GPU blocks, so when one of them is
 * evicted the others must be found to store the whole group. A group is
 * remembered by its key (the hash of its last GPU block) with its f member
 * hashes; the GPU block holding each member is looked up in the prefix cache
 * when the group is stored, since the cache, not the freed table, knows where
 * that content lives now.
 *
 * Bounded: a group is only useful while its last member is cached, and each
 * GPU block caches one hash, so at most `capacity` (the GPU pool's size)
 * groups are kept, the least recently remembered forgotten first.
 */
export class FreedBlockGroups {
  /** Group key -> member hashes in table order; insertion order = least recently remembered first. */
  private readonly groups = new Map<BlockHash, readonly BlockHash[]>();
  /** Member hash -> keys of the groups it belongs to (several continuations may share a member). */
  private readonly groupsOfMember = new Map<BlockHash, Set<BlockHash>>();

  constructor(private readonly capacity: number) {}

  /** Remembers a group (again: it becomes the most recently remembered). */
  remember(members: readonly BlockHash[]): void {
    const key = members[members.length - 1];
    if (this.groups.has(key)) this.forget(key);
    this.groups.set(key, members);
    for (const member of members) {
      let keys = this.groupsOfMember.get(member);
      if (keys === undefined) {
        keys = new Set();
        this.groupsOfMember.set(member, keys);
      }
      keys.add(key);
    }
    while (this.groups.size > this.capacity) this.forget(this.groups.keys().next().value as BlockHash);
  }

  /** Keys of the remembered groups `member` belongs to. */
  groupsContaining(member: BlockHash): readonly BlockHash[] {
    const keys = this.groupsOfMember.get(member);
    return keys === undefined ? [] : [...keys];
  }

  membersOf(key: BlockHash): readonly BlockHash[] | undefined {
    return this.groups.get(key);
  }

  /** Forgets every group `member` belongs to (its content is about to be overwritten). */
  forgetGroupsContaining(member: BlockHash): void {
    for (const key of this.groupsContaining(member)) this.forget(key);
  }

  get size(): number {
    return this.groups.size;
  }

  clear(): void {
    this.groups.clear();
    this.groupsOfMember.clear();
  }

  private forget(key: BlockHash): void {
    const members = this.groups.get(key);
    if (members === undefined) return;
    this.groups.delete(key);
    for (const member of members) {
      const keys = this.groupsOfMember.get(member);
      keys?.delete(key);
      if (keys !== undefined && keys.size === 0) this.groupsOfMember.delete(member);
    }
  }
}
