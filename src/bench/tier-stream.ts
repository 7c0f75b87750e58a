import type { BlockHash } from '../core/block-hash.js';
import { OffloadingConnector } from '../connector/scheduler-connector.js';
import { ForwardingManager } from '../offload/forwarding-manager.js';
import type { OffloadingManager, PrepareStoreOutput, StoreAdmission } from '../offload/manager.js';
import type { OffloadGeometry, StorePolicy } from '../offload/store-policies/store-policy.js';
import type { ExternalMatch, StepView } from '../scheduler/connector-port.js';
import type { OffloadStepMetadata } from '../protocol/step-protocol.js';
import type { Request } from '../scheduler/request.js';

/**
 * The stream of requests the CPU tier sees behind the GPU tier: for every
 * admitted request, the offloaded blocks it looked up past its GPU prefix
 * hit, and, in between, the blocks offered for storing as the GPU computed
 * them. It is recorded from a replay, and depends on what the tier served:
 * a hit is loaded instead of computed, so requests run at other times and
 * the GPU prefix cache holds other blocks. Recorded with a tier that never
 * hits, every block past a GPU hit is computed and offered, and the stream
 * depends on neither a policy nor a capacity. A request admitted again after
 * a preemption looks up again; that lookup is marked as a readmission, since
 * what it reads the request was served or computed already.
 *
 * An offline policy given this stream (tier-stream-belady.ts) knows exactly
 * what an online one can act on: a block the GPU prefix cache serves itself
 * never reaches the tier, and a block can enter the tier only once it was
 * computed.
 */

/** One admitted request's lookup: offloaded blocks [first, first + keys) of its prompt. */
export interface TierLookup {
  readonly kind: 'lookup';
  /** Dense block ids, first block first. */
  readonly blocks: Int32Array;
  /** Position of blocks[0] in the request's chain of offloaded blocks. */
  readonly firstDepth: number;
  /** Tokens of the first looked-up block the GPU hit covers already (a hit of h blocks serves h x blockTokens - this). */
  readonly coveredTokens: number;
  /** The most tokens a hit can serve: the request's last token is always computed (its logits give the next token). */
  readonly maxHitTokens: number;
  /**
   * The request was admitted before and preempted: everything it looks up
   * now, it was served (GPU hit, CPU lookup) or computed itself at an earlier
   * admission, so a hit here is a re-read, never new reuse.
   */
  readonly readmission: boolean;
}

/** Blocks offered to the tier in one store (computed on the GPU). */
export interface TierOffer {
  readonly kind: 'offer';
  readonly blocks: Int32Array;
}

export type TierEvent = TierLookup | TierOffer;

export interface TierStream {
  /** Tokens per offloaded block. */
  readonly blockTokens: number;
  readonly events: readonly TierEvent[];
  /** Distinct block ids (ids are 0 .. uniqueBlocks - 1). */
  readonly uniqueBlocks: number;
}

/** Dense ids for block keys, in order of first sight. */
class BlockIds {
  private readonly ids = new Map<BlockHash, number>();

  of(keys: readonly BlockHash[]): Int32Array {
    const out = new Int32Array(keys.length);
    for (let i = 0; i < keys.length; i++) {
      let id = this.ids.get(keys[i]);
      if (id === undefined) {
        id = this.ids.size;
        this.ids.set(keys[i], id);
      }
      out[i] = id;
    }
    return out;
  }

  get size(): number {
    return this.ids.size;
  }
}

/**
 * Passes every call to the tier's manager and records each store offer;
 * with `servesHits` false it answers every lookup with no hit (the tier still
 * holds what it stores, so the store policy advances and each computed block
 * is offered once).
 */
class RecordingManager extends ForwardingManager {
  constructor(
    inner: OffloadingManager,
    private readonly servesHits: boolean,
    private readonly onOffer: (keys: readonly BlockHash[]) => void,
  ) {
    super(inner);
  }

  override lookup(keys: readonly BlockHash[]): number | null {
    return this.servesHits ? this.inner.lookup(keys) : 0;
  }

  override prepareStore(keys: readonly BlockHash[], admit?: StoreAdmission): PrepareStoreOutput | null {
    this.onOffer(keys);
    return this.inner.prepareStore(keys, admit);
  }
}

export interface TierStreamRecorderOptions {
  /** The tier's manager (its eviction policy) and store policy, as the replay would use them. */
  readonly manager: OffloadingManager;
  readonly policy: StorePolicy;
  readonly geometry: OffloadGeometry;
  /** False: every lookup misses, so the stream is the one a tier that never hits sees. */
  readonly servesHits: boolean;
}

/**
 * An OffloadingConnector that records the tier stream. A request's lookup
 * enters the stream when the request is scheduled, so an admission tried in
 * several steps counts once, with the GPU hit it was admitted with.
 */
export class TierStreamRecorder extends OffloadingConnector {
  private readonly ids = new BlockIds();
  private readonly events: TierEvent[] = [];
  /** The latest lookup of each request not scheduled yet. */
  private readonly pending = new Map<string, TierLookup>();
  /** Requests scheduled at least once and not finished. */
  private readonly admitted = new Set<string>();

  constructor(options: TierStreamRecorderOptions) {
    let record: (keys: readonly BlockHash[]) => void = () => {};
    super({
      manager: new RecordingManager(options.manager, options.servesHits, (keys) => record(keys)),
      policy: options.policy,
      geometry: options.geometry,
      bytesPerGpuBlock: 0,
    });
    record = (keys) => {
      if (keys.length > 0) this.events.push({ kind: 'offer', blocks: this.ids.of(keys) });
    };
  }

  override getNumNewMatchedTokens(request: Request, numComputedTokens: number): ExternalMatch | null {
    const { offloadFactor: f, offloadedBlockTokens } = this.geometry;
    const numBlocks = Math.floor(request.numTokens / offloadedBlockTokens);
    const first = Math.floor(numComputedTokens / offloadedBlockTokens);
    const keys: BlockHash[] = [];
    for (let i = first; i < numBlocks; i++) keys.push(request.blockHashes[i * f + f - 1]);
    this.pending.set(request.id, {
      kind: 'lookup',
      blocks: this.ids.of(keys),
      firstDepth: first,
      coveredTokens: numComputedTokens - first * offloadedBlockTokens,
      maxHitTokens: Math.max(0, request.numTokens - 1 - numComputedTokens),
      readmission: this.admitted.has(request.id),
    });
    return super.getNumNewMatchedTokens(request, numComputedTokens);
  }

  override buildConnectorMeta(step: StepView): OffloadStepMetadata {
    // Admissions happened while the step was scheduled, before this step's stores are offered.
    for (const view of step.scheduled) {
      if (!view.fresh) continue;
      const lookup = this.pending.get(view.request.id);
      if (lookup === undefined) continue;
      this.pending.delete(view.request.id);
      this.admitted.add(view.request.id);
      if (lookup.blocks.length > 0) this.events.push(lookup);
    }
    return super.buildConnectorMeta(step);
  }

  override requestFinished(request: Request, blockIds: readonly number[]): boolean {
    this.pending.delete(request.id);
    this.admitted.delete(request.id);
    return super.requestFinished(request, blockIds);
  }

  /** The stream recorded so far. */
  stream(): TierStream {
    return { blockTokens: this.geometry.offloadedBlockTokens, events: this.events.slice(), uniqueBlocks: this.ids.size };
  }
}
