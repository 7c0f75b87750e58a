import { setTimeout as sleep } from 'node:timers/promises';
import { blockHashes } from '../core/block-hash.js';
import { SeededRandom } from '../core/prng.js';
import type { BlockTokenSource, KvEventCollector, TierEventSink } from '../events/kv-cache-events.js';
import { KvEventRecorder } from '../events/kv-event-recorder.js';
import { KvEventThread } from '../events/kv-event-thread.js';
import { KvEventWireEncoder } from '../events/vllm-wire.js';
import { median } from './stats.js';

/**
 * The engine thread's per-step cost of KV events at `streams` decoding
 * requests, alone, as `kvtier serve --kv-events-endpoint` publishes them: the
 * tiers' reports written as integer records into the KV event thread's ring
 * and the step's one publish (Atomics.store + notify). The KV event thread
 * (a real one: it builds each batch, encodes it and hands it to a ZeroMQ PUB
 * socket on loopback with its replay buffer) runs beside it; its CPU time is
 * reported too, since the work moved there and did not vanish. Timed in a
 * tight loop, away from the engine, like the ring delivery
 * (serve-ring-delivery.ts).
 *
 * The step is a saturated decode step: one block in `blockSize` fills per
 * stream and step, so streams / blockSize blocks enter the GPU prefix cache
 * (a stored event each, with its parent and tokens) and the CPU tier (stored
 * on compute), and as many leave each tier (both full), each removal its own
 * event, interleaved with the stores as evictions make room. A GPU store
 * is handed over as a run of its request's block table (storedRun: no
 * arrays built), as the pool does; the CPU tier stores the same block under
 * the same key (offload factor 1).
 *
 * Every hash is made by the block hasher (core/block-hash.ts), as an
 * engine's are, before the timed rounds: the hasher keeps the words of what
 * it made recently, so a stored block's hash and its parent, which an engine
 * hashed this step or a block earlier, are found without a parse. An evicted
 * block's hash is old in an engine, but its table looked it up just before
 * reporting it (one comparison, cheaper than the recent-hash table the bench's
 * evictions go through). Counted over `kvtier run --kv-events-endpoint` runs
 * (128 requests, default pools and pools small enough to evict constantly),
 * under 0.1% of an engine's event hashes needed a parse.
 */
export interface KvEventPath {
  /** Median over the rounds of the engine thread's wall time per step (µs): the reports into the ring and the publish. */
  readonly usPerStep: number;
  /** The KV event thread's CPU time per step over the timed rounds (µs), or null where a thread's CPU time cannot be read. */
  readonly threadUsPerStep: number | null;
  /** Events and bytes of one step's batch. */
  readonly eventsPerStep: number;
  readonly bytesPerStep: number;
}

interface BlockReports {
  readonly stored: string[];
  readonly parent: string;
  readonly tokens: number[];
  /** The block as its request's block table holds it: [parent, stored], its tokens at positions [blockSize, 2 x blockSize). */
  readonly table: string[];
  readonly tableTokens: BlockTokenSource;
  readonly cpuStored: string[];
  readonly gpuEvicted: string;
  readonly cpuEvicted: string;
}

/** A request's tokens as the GPU pool reads a run of its block table from it (an Int32Array behind a method, as a Request). */
class RequestTokens implements BlockTokenSource {
  private readonly tokens: Int32Array;

  constructor(tokens: readonly number[]) {
    this.tokens = Int32Array.from(tokens);
  }

  tokenAt(position: number): number {
    return this.tokens[position];
  }

  tokensBetween(start: number, end: number): number[] {
    return Array.from(this.tokens.subarray(start, end));
  }

  copyTokens(start: number, end: number, into: Int32Array, at: number): void {
    const tokens = this.tokens;
    for (let i = start; i < end; i++) into[at + i - start] = tokens[i];
  }
}

/** One step's reports, as the GPU pool (a run of its block table, by range where the sink takes one) and the CPU tier make them. */
function report(gpu: TierEventSink, cpu: TierEventSink, blocks: readonly BlockReports[]): void {
  for (const block of blocks) {
    gpu.removed(block.gpuEvicted);
    if (gpu.storedRun !== undefined) gpu.storedRun(block.table, 1, 2, block.tableTokens);
    else gpu.stored(block.stored, block.parent, block.tokens);
    cpu.removed(block.cpuEvicted);
    cpu.stored(block.cpuStored, null, []);
  }
}

export async function measureKvEventPath(streams: number, blockSize = 16, stepsPerRound = 100, rounds = 40, warmupRounds = 10): Promise<KvEventPath> {
  const random = new SeededRandom(11);
  const blocksPerStep = Math.max(1, Math.round(streams / blockSize));
  // An evicted block: one of its own, hashed by the hasher as every block of an engine is.
  const evictedHash = (): string => blockHashes(Array.from(random.tokens(blockSize, 128_256)), blockSize)[0];
  // Hashes and tokens made up front: the caches hand the sinks arrays they already built.
  const block = (): BlockReports => {
    const gpuEvicted = evictedHash();
    const cpuEvicted = evictedHash();
    const all = Array.from(random.tokens(2 * blockSize, 128_256));
    const table = blockHashes(all, blockSize);
    const tokens = all.slice(blockSize);
    const tableTokens = new RequestTokens(all);
    return { stored: [table[1]], parent: table[0], tokens, table, tableTokens, cpuStored: [table[1]], gpuEvicted, cpuEvicted };
  };
  const steps = Array.from({ length: 8 }, () => Array.from({ length: blocksPerStep }, block));
  // One step's batch as the in-process recorder makes it, for its size on the wire (not timed).
  const recorder = new KvEventRecorder();
  let events = 0;
  let bytes = 0;
  recorder.addListener((batch) => {
    events = batch.events.length;
    bytes = new KvEventWireEncoder('map').encode(batch).length;
  });
  report(recorder.sinkFor('GPU', blockSize), recorder.sinkFor('CPU', blockSize), steps[0]);
  recorder.flush(Date.now() / 1000);

  const thread = await KvEventThread.start({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*' });
  try {
    // The thread's ring as an engine holds it: one collector, its sinks handed to the tiers.
    let ring: KvEventCollector | null = null;
    thread.attach({
      addKvEventCollector: (collector) => {
        ring = collector;
        return () => {};
      },
    });
    const collector = ring as unknown as KvEventCollector;
    const gpu = collector.sinkFor('GPU', blockSize);
    const cpu = collector.sinkFor('CPU', blockSize);
    const perRound: number[] = [];
    let threadStartUs: number | null = null;
    let step = 0;
    for (let round = 0; round < warmupRounds + rounds; round++) {
      if (round === warmupRounds) threadStartUs = thread.threadCpuUs();
      const started = process.hrtime.bigint();
      for (let i = 0; i < stepsPerRound; i++) {
        report(gpu, cpu, steps[step++ % steps.length]);
        collector.flush(Date.now() / 1000);
      }
      const ns = process.hrtime.bigint() - started;
      // The thread catches up between rounds, outside the timed part, as it would between steps.
      await thread.caughtUp();
      if (round >= warmupRounds) perRound.push(Number(ns) / stepsPerRound / 1000);
    }
    // The thread's last sends complete; then a fresh slice makes its CPU time current (core/thread-cpu.ts).
    await sleep(20);
    const threadEndUs = thread.threadCpuUs();
    const threadUsPerStep = threadStartUs === null || threadEndUs === null ? null : (threadEndUs - threadStartUs) / (rounds * stepsPerRound);
    return { usPerStep: median(perRound), threadUsPerStep, eventsPerStep: events, bytesPerStep: bytes };
  } finally {
    await thread.close();
  }
}
