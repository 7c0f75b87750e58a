import { z } from 'zod';
import { KvEventPublisherError } from '../events/kv-event-publisher.js';
import { KvEventThread } from '../events/kv-event-thread.js';
import { KV_EVENT_ENCODINGS, type KvEventEncoding } from '../events/vllm-wire.js';
import type { Engine } from '../runtime/engine.js';
import { originOf, type LayeredInput } from './config-input.js';
import { nonEmptyString, oneOf } from './field-schemas.js';
import { UsageError } from './usage-error.js';

/**
 * KV events of a command that runs engines (`kvtier run`, `kvtier serve`):
 * with --kv-events-endpoint, every engine step's blocks stored and removed are
 * published over ZeroMQ in vLLM's format (src/events). Flags and config-file
 * keys alike; the fields join the command's input schema.
 */

const ENDPOINT = 'a ZeroMQ endpoint such as tcp://*:5557 (tcp://, ipc:// or inproc://)';
const ENDPOINT_PATTERN = /^(tcp|ipc|inproc):\/\/.+/;

const endpoint = () => nonEmptyString(ENDPOINT).refine((value) => ENDPOINT_PATTERN.test(value), { error: `expected ${ENDPOINT}` });

/** Schema fields of the KV event settings. */
export const kvEventsInputFields = {
  kvEventsEndpoint: endpoint(),
  /** May be empty (vLLM's default topic: every subscriber gets it). */
  kvEventsTopic: z.string({ error: 'expected a topic (text; may be empty)' }),
  kvEventsReplayEndpoint: endpoint(),
  kvEventsEncoding: oneOf(KV_EVENT_ENCODINGS),
};

export const KV_EVENTS_DEFAULTS = { topic: '', encoding: 'map' as KvEventEncoding } as const;

export interface KvEventsConfig {
  readonly endpoint: string;
  readonly topic: string;
  readonly replayEndpoint: string | null;
  readonly encoding: KvEventEncoding;
}

interface KvEventsInput {
  readonly kvEventsEndpoint?: string;
  readonly kvEventsTopic?: string;
  readonly kvEventsReplayEndpoint?: string;
  readonly kvEventsEncoding?: KvEventEncoding;
}

/** The settings from validated input; null without an endpoint (the other settings then are an error naming them). */
export function kvEventsConfig(given: KvEventsInput, input: LayeredInput): KvEventsConfig | null {
  if (given.kvEventsEndpoint === undefined) {
    for (const key of ['kvEventsTopic', 'kvEventsReplayEndpoint', 'kvEventsEncoding'] as const) {
      if (given[key] !== undefined) throw new UsageError(`${originOf(input, key)} applies to KV events only (add --kv-events-endpoint ENDPOINT)`);
    }
    return null;
  }
  return {
    endpoint: given.kvEventsEndpoint,
    topic: given.kvEventsTopic ?? KV_EVENTS_DEFAULTS.topic,
    replayEndpoint: given.kvEventsReplayEndpoint ?? null,
    encoding: given.kvEventsEncoding ?? KV_EVENTS_DEFAULTS.encoding,
  };
}

/**
 * The publisher of one command, open from before the first engine starts
 * until the command ends: a KV event thread, so the engine's thread only
 * writes each event's integers into a ring and the encoding and sending
 * happen beside it. Each engine attached after the first starts empty:
 * subscribers are told so (AllBlocksCleared) before its events.
 */
export class CommandKvEvents {
  private engines = 0;
  private detach: (() => void) | null = null;

  private constructor(private readonly thread: KvEventThread | null) {}

  /** Opens the sockets (a taken port fails here, before any work) and says where they are on stderr. */
  static async start(config: KvEventsConfig | null): Promise<CommandKvEvents> {
    if (config === null) return new CommandKvEvents(null);
    let thread: KvEventThread;
    try {
      thread = await KvEventThread.start(config);
    } catch (error) {
      if (error instanceof KvEventPublisherError) throw new UsageError(`--kv-events-endpoint: ${error.message}`);
      throw error;
    }
    const replay = thread.replayEndpoint === null ? '' : `, replay at ${thread.replayEndpoint}`;
    process.stderr.write(`kvtier: publishing KV events at ${thread.endpoint} (topic ${JSON.stringify(config.topic)}${replay})\n`);
    return new CommandKvEvents(thread);
  }

  /** Publishes `engine`'s events from now on, in place of the engine attached before (call before its first request). */
  attach(engine: Engine): void {
    if (this.thread === null) return;
    this.detach?.();
    if (this.engines++ > 0) this.thread.clearAll();
    this.detach = this.thread.attach(engine);
  }

  /** Sends what is queued, closes the sockets and says how many batches went out (the last sequence number + 1). */
  async close(): Promise<void> {
    if (this.thread === null) return;
    await this.thread.close();
    const failure = this.thread.failure;
    if (failure !== null) process.stderr.write(`kvtier: KV events stopped early: ${failure.message}\n`);
    process.stderr.write(`kvtier: published ${this.thread.published} KV event batches at ${this.thread.endpoint}\n`);
  }
}
