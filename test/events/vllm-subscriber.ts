import { decode } from '@msgpack/msgpack';
import { Dealer, Subscriber } from 'zeromq';

/**
 * A KV event subscriber written from vLLM's schema (vllm/distributed/kv_events.py),
 * independently of kvtier's encoder: it reads `[topic, seq, payload]` frames,
 * decodes the batch `[ts, events, data_parallel_rank]`, and each event either
 * by name (a tagged map, vLLM's current format) or by position in vLLM's field
 * order (a tagged array, its earlier format):
 *   BlockStored      block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium
 *   BlockRemoved     block_hashes, medium
 *   AllBlocksCleared (no fields)
 */

export type DecodedEvent =
  | { kind: 'BlockStored'; hashes: bigint[]; parent: bigint | null; tokenIds: number[]; blockSize: number; loraId: unknown; medium: string | null }
  | { kind: 'BlockRemoved'; hashes: bigint[]; medium: string | null }
  | { kind: 'AllBlocksCleared' };

export interface DecodedBatch {
  readonly ts: number;
  readonly events: DecodedEvent[];
  readonly dataParallelRank: unknown;
}

function positional(fields: unknown[]): DecodedEvent {
  const tag = fields[0];
  if (tag === 'BlockStored') {
    return {
      kind: tag,
      hashes: fields[1] as bigint[],
      parent: fields[2] as bigint | null,
      tokenIds: fields[3] as number[],
      blockSize: fields[4] as number,
      loraId: fields[5],
      medium: fields[6] as string | null,
    };
  }
  if (tag === 'BlockRemoved') return { kind: tag, hashes: fields[1] as bigint[], medium: fields[2] as string | null };
  if (tag === 'AllBlocksCleared') return { kind: tag };
  throw new Error(`unknown event tag ${String(tag)}`);
}

function named(fields: Record<string, unknown>): DecodedEvent {
  const tag = fields.type;
  if (tag === 'BlockStored') {
    return {
      kind: tag,
      hashes: fields.block_hashes as bigint[],
      parent: fields.parent_block_hash as bigint | null,
      tokenIds: fields.token_ids as number[],
      blockSize: fields.block_size as number,
      loraId: fields.lora_id,
      medium: fields.medium as string | null,
    };
  }
  if (tag === 'BlockRemoved') return { kind: tag, hashes: fields.block_hashes as bigint[], medium: fields.medium as string | null };
  if (tag === 'AllBlocksCleared') return { kind: tag };
  throw new Error(`unknown event tag ${String(tag)}`);
}

export function decodeBatch(payload: Uint8Array): DecodedBatch {
  const batch = decode(payload, { useBigInt64: true });
  if (!Array.isArray(batch)) throw new Error('a KVEventBatch is a positional array');
  const [ts, events, dataParallelRank] = batch as [number, unknown[], unknown];
  return {
    ts,
    dataParallelRank,
    events: events.map((e) => (Array.isArray(e) ? positional(e) : named(e as Record<string, unknown>))),
  };
}

/** The blocks each medium holds, rebuilt from events alone. */
export class TierView {
  readonly media = new Map<string, Set<bigint>>();

  apply(event: DecodedEvent): void {
    if (event.kind === 'AllBlocksCleared') {
      this.media.clear();
      return;
    }
    const medium = event.medium ?? 'GPU';
    let held = this.media.get(medium);
    if (held === undefined) this.media.set(medium, (held = new Set()));
    for (const hash of event.hashes) {
      if (event.kind === 'BlockStored') held.add(hash);
      else held.delete(hash);
    }
  }

  held(medium: string): bigint[] {
    return [...(this.media.get(medium) ?? [])].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }
}

export interface ReceivedMessage {
  readonly topic: string;
  readonly seq: bigint;
  readonly payload: Uint8Array;
}

/** A SUB socket reading messages in the background, so none waits in ZeroMQ's queues. */
export class BackgroundSubscriber {
  readonly received: ReceivedMessage[] = [];
  private readonly socket = new Subscriber({ receiveHighWaterMark: 0, linger: 0 });
  private wake: (() => void) | null = null;
  private readonly loop: Promise<void>;

  constructor(endpoint: string, topic: string) {
    this.socket.connect(endpoint);
    this.socket.subscribe(topic);
    this.loop = this.read();
  }

  /** Resolves once a message with sequence number `seq` or later arrived. */
  async until(seq: bigint): Promise<void> {
    while (!this.received.some((m) => m.seq >= seq)) await new Promise<void>((resolve) => (this.wake = resolve));
  }

  close(): Promise<void> {
    this.socket.close();
    return this.loop;
  }

  private async read(): Promise<void> {
    try {
      for await (const [topic, seq, payload] of this.socket) {
        this.received.push({ topic: topic.toString('utf8'), seq: seq.readBigUInt64BE(), payload });
        this.wake?.();
      }
    } catch {
      // closed
    }
  }
}

/** Asks a replay endpoint for every batch from `start` on, as vLLM's subscriber does; stops at the end marker. */
/**
 * Asks the replay socket at `endpoint` for every batch from `start` on and reads the answer to its end marker.
 * `slowly`: the client queues at most a few messages and yields to the event loop between reads, so a
 * server that does not hold back for it would drop most of a long replay.
 */
export async function replayFrom(endpoint: string, start: bigint, slowly = false): Promise<{ seq: bigint; payload: Uint8Array }[]> {
  const dealer = new Dealer(slowly ? { linger: 0, receiveHighWaterMark: 4 } : { linger: 0 });
  dealer.connect(endpoint);
  try {
    const request = Buffer.alloc(8);
    request.writeBigUInt64BE(start);
    await dealer.send(['', request]);
    const out: { seq: bigint; payload: Uint8Array }[] = [];
    for (;;) {
      const [, seq, payload] = await dealer.receive();
      const value = seq.readBigInt64BE();
      if (value === -1n) {
        if (payload.length !== 0) throw new Error('the end-of-replay marker carries an empty payload');
        return out;
      }
      out.push({ seq: value, payload });
      if (slowly) await new Promise((resolve) => setImmediate(resolve));
    }
  } finally {
    dealer.close();
  }
}
