import type { Request } from './request.js';

/**
 * The running requests in arrival order (ties: the order they were added),
 * so the scheduler serves the oldest first and its tail is always the
 * request to preempt: the latest arrival.
 */
export class RunningList {
  private items: Request[] = [];
  private readonly addOrder: (request: Request) => number;

  /** `addOrder` numbers requests in the order the scheduler accepted them. */
  constructor(addOrder: (request: Request) => number) {
    this.addOrder = addOrder;
  }

  get length(): number {
    return this.items.length;
  }

  at(index: number): Request {
    return this.items[index];
  }

  insert(request: Request): void {
    const arrival = request.arrivalTime;
    const order = this.addOrder(request);
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const other = this.items[mid];
      const before = other.arrivalTime < arrival || (other.arrivalTime === arrival && this.addOrder(other) < order);
      if (before) lo = mid + 1;
      else hi = mid;
    }
    if (lo === this.items.length) this.items.push(request);
    else this.items.splice(lo, 0, request);
  }

  /** Removes and returns the latest arrival. */
  popLatest(): Request | undefined {
    return this.items.pop();
  }

  remove(request: Request): void {
    const index = this.items.indexOf(request);
    if (index >= 0) this.items.splice(index, 1);
  }

  /** Drops every finished request at once. */
  removeFinished(): void {
    this.items = this.items.filter((r) => !r.isFinished);
  }

  /** Empties the list, returning what it held in order. */
  takeAll(): Request[] {
    const items = this.items;
    this.items = [];
    return items;
  }

  toArray(): Request[] {
    return this.items.slice();
  }
}
