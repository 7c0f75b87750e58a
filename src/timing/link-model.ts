import type { HostLinkProfile } from './gpu-profiles.js';
import type { TransferDirection } from '../protocol/step-protocol.js';

/**
 * The host link's clock (docs/architecture.md, "The step clock"): a job
 * takes its fixed latency, a cost per copied region, and its bytes over the
 * link's rate, which is the one-way rate while the other direction is idle
 * and half the two-way rate while both run.
 */

/** Nanoseconds one job takes on the link. */
export function linkJobNs(link: HostLinkProfile, bytes: number, regions: number, otherDirectionBusy: boolean): number {
  const rate = otherDirectionBusy ? Math.min(link.oneWayBytesPerSecond, link.bothWaysBytesPerSecond / 2) : link.oneWayBytesPerSecond;
  return Math.round(link.jobLatencyUs * 1e3 + regions * link.regionOverheadNs + (bytes / rate) * 1e9);
}

/**
 * One rank's link over modelled time: jobs of one direction run one after
 * another (a copy stream), the two directions side by side.
 */
export class LinkSchedule {
  private storeBusyUntil = 0;
  private loadBusyUntil = 0;

  constructor(readonly link: HostLinkProfile) {}

  /** Books a job submitted at `nowNs`; returns when it completes. */
  book(direction: TransferDirection, nowNs: number, bytes: number, regions: number): number {
    const store = direction === 'gpuToCpu';
    const start = Math.max(nowNs, store ? this.storeBusyUntil : this.loadBusyUntil);
    const otherBusy = (store ? this.loadBusyUntil : this.storeBusyUntil) > start;
    const end = start + linkJobNs(this.link, bytes, regions, otherBusy);
    if (store) this.storeBusyUntil = end;
    else this.loadBusyUntil = end;
    return end;
  }

  reset(): void {
    this.storeBusyUntil = 0;
    this.loadBusyUntil = 0;
  }
}
