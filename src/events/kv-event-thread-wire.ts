import type { KvEventPublisherOptions } from './kv-event-publisher.js';

/** What the KV event thread starts with: the ring, how long it lets steps gather while they come, and its publisher's options. */
export interface KvEventThreadData {
  readonly ring: SharedArrayBuffer;
  readonly batchWindowMs: number;
  readonly publisher: KvEventPublisherOptions;
}

/** Messages from the engine's side to the KV event thread. */
export type KvEventHostMessage = { readonly type: 'close' };

/** Messages from the KV event thread. */
export type KvEventThreadMessage =
  | { readonly type: 'ready'; readonly endpoint: string; readonly replayEndpoint: string | null; readonly threadId: number | null }
  | { readonly type: 'start-failed'; readonly message: string }
  /** The writer waits for room and the reader made some. */
  | { readonly type: 'room' }
  | { readonly type: 'closed'; readonly published: number; readonly failure: string | null };
