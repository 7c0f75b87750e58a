import type { BlockHash } from '../core/block-hash.js';

/** Where an offloaded block lives. The CPU tier is the only one so far. */
export type OffloadingMedium = 'cpu';

/**
 * A change in what the tier can serve. `stored`: the keys became loadable
 * (their store completed). `removed`: keys previously announced as stored are
 * no longer held (evicted, or the tier was reset). Every key of a removed
 * event was announced by an earlier stored event, so a consumer that mirrors
 * the tier's contents from events never sees an unknown key.
 */
export interface OffloadingEvent {
  readonly kind: 'stored' | 'removed';
  readonly keys: readonly BlockHash[];
  readonly medium: OffloadingMedium;
}

/** Collects events in order until taken; records nothing when disabled. */
export class OffloadingEventLog {
  private pending: OffloadingEvent[] = [];

  constructor(
    readonly enabled: boolean,
    private readonly medium: OffloadingMedium = 'cpu',
  ) {}

  /** Records one event for `keys`; an empty key list records nothing. */
  record(kind: OffloadingEvent['kind'], keys: readonly BlockHash[]): void {
    if (!this.enabled || keys.length === 0) return;
    this.pending.push({ kind, keys: [...keys], medium: this.medium });
  }

  /** The events recorded since the last call, oldest first. */
  take(): OffloadingEvent[] {
    const taken = this.pending;
    this.pending = [];
    return taken;
  }
}
