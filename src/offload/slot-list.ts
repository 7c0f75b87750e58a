/** A reusable list of block ids (no allocation once it has grown to its largest length). */
export class SlotList {
  private items = new Int32Array(16);
  length = 0;

  at(i: number): number {
    return this.items[i];
  }

  push(id: number): void {
    if (this.length === this.items.length) {
      const items = new Int32Array(2 * this.length);
      items.set(this.items);
      this.items = items;
    }
    this.items[this.length++] = id;
  }

  /** Keeps, in order, the ids `keep` accepts. */
  keepIf(keep: (id: number) => boolean): void {
    let kept = 0;
    for (let i = 0; i < this.length; i++) if (keep(this.items[i])) this.items[kept++] = this.items[i];
    this.length = kept;
  }

  clear(): void {
    this.length = 0;
  }
}
