import { setTimeout as sleep } from 'node:timers/promises';
import { blockHashes, blockHashLane, blockHashLanesAreValue, type BlockHash } from '../core/block-hash.js';
import { SeededRandom } from '../core/prng.js';
import type { BlockTokenSource, HashWords, KvEventCollector, TierEventSink } from '../events/kv-cache-events.js';
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
 * engine's are, before the timed rounds. Each tier keeps its blocks' hash
 * values beside them as the two words an event carries (the GPU pool by
 * block id, the CPU tier by its block's slot; set from the lanes their
 * tables keyed the hash on when it was cached), so a report hands the words
 * over with the hash: in the timed steps, as the pool and the tier do, a
 * stored run's words (its parent's first) are copied from the pool's words
 * by block id into the run's, the parent confirmed as the block cached under
 * its hash, a CPU store's from the tier's words by slot, and a removal reads
 * its block's. The ring copies words; no hash text is read.
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
  /** The table's GPU block ids, [parent, stored]. */
  readonly tableIds: number[];
  readonly tableTokens: BlockTokenSource;
  readonly cpuStored: string[];
  /** The CPU slot `cpuStored` is held at. */
  readonly cpuSlot: number;
  readonly gpuEvicted: string;
  readonly gpuEvictedId: number;
  readonly cpuEvicted: string;
  readonly cpuEvictedSlot: number;
}

/**
 * A tier's blocks as the GPU pool and the CPU tier keep them for their
 * events: each block's hash, and its value words beside it (set when it was
 * cached, from the lanes of its table's key), by block id or slot.
 */
class TierWords {
  readonly hashes: (BlockHash | null)[] = [];
  words = new Int32Array(64);
  isValue = new Uint8Array(32);
  /** A report's words, as the pool's run words and the CPU tier's readied words. */
  readonly scratch = new Int32Array(4);

  /** Caches `hash` at a new block; returns its id. */
  cache(hash: BlockHash): number {
    const id = this.hashes.length;
    this.hashes.push(hash);
    if (this.isValue.length <= id) {
      const words = new Int32Array(4 * (id + 1));
      words.set(this.words);
      this.words = words;
      const isValue = new Uint8Array(2 * (id + 1));
      isValue.set(this.isValue);
      this.isValue = isValue;
    }
    this.words[2 * id] = blockHashLane(hash, 0);
    this.words[2 * id + 1] = blockHashLane(hash, 1);
    this.isValue[id] = blockHashLanesAreValue(hash) ? 1 : 0;
    return id;
  }
}

/** BlockPool.runHashWords for a one-block run at table index 1: the parent's words (confirmed as cached under its hash), then the block's. */
function runWords(pool: TierWords, table: readonly BlockHash[], ids: readonly number[]): HashWords | undefined {
  const run = pool.scratch;
  const parent = ids[0];
  if (pool.isValue[parent] === 0 || pool.hashes[parent] !== table[0]) return undefined;
  run[0] = pool.words[2 * parent];
  run[1] = pool.words[2 * parent + 1];
  const id = ids[1];
  if (pool.isValue[id] === 0) return undefined;
  run[2] = pool.words[2 * id];
  run[3] = pool.words[2 * id + 1];
  return run;
}

/** CpuOffloadingManager.completeStore's words for one readied key at `slot`. */
function readiedWords(tier: TierWords, slot: number): HashWords | undefined {
  if (tier.isValue[slot] === 0) return undefined;
  tier.scratch[0] = tier.words[2 * slot];
  tier.scratch[1] = tier.words[2 * slot + 1];
  return tier.scratch;
}

/** A removal as the pool's uncache and the CPU tier's evict report it: with the block's words where it keeps them. */
function reportRemoved(sink: TierEventSink, tier: TierWords, hash: BlockHash, id: number): void {
  if (tier.isValue[id] === 1 && sink.removedWords !== undefined) sink.removedWords(hash, tier.words[2 * id], tier.words[2 * id + 1]);
  else sink.removed(hash);
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

/** One step's reports, as the GPU pool (a run of its block table, by range where the sink takes one) and the CPU tier make them, with the words they keep. */
function report(gpu: TierEventSink, cpu: TierEventSink, pool: TierWords, tier: TierWords, blocks: readonly BlockReports[]): void {
  for (const block of blocks) {
    reportRemoved(gpu, pool, block.gpuEvicted, block.gpuEvictedId);
    if (gpu.storedRun !== undefined) gpu.storedRun(block.table, 1, 2, block.tableTokens, runWords(pool, block.table, block.tableIds));
    else gpu.stored(block.stored, block.parent, block.tokens);
    reportRemoved(cpu, tier, block.cpuEvicted, block.cpuEvictedSlot);
    cpu.stored(block.cpuStored, null, [], readiedWords(tier, block.cpuSlot));
  }
}

export async function measureKvEventPath(streams: number, blockSize = 16, stepsPerRound = 100, rounds = 40, warmupRounds = 10): Promise<KvEventPath> {
  const random = new SeededRandom(11);
  const blocksPerStep = Math.max(1, Math.round(streams / blockSize));
  // An evicted block: one of its own, hashed by the hasher as every block of an engine is.
  const evictedHash = (): string => blockHashes(Array.from(random.tokens(blockSize, 128_256)), blockSize)[0];
  // Hashes, tokens and the tiers' blocks made up front: the caches hand the sinks arrays and words they already hold.
  const pool = new TierWords();
  const tier = new TierWords();
  const block = (): BlockReports => {
    const gpuEvicted = evictedHash();
    const cpuEvicted = evictedHash();
    const all = Array.from(random.tokens(2 * blockSize, 128_256));
    const table = blockHashes(all, blockSize);
    const tokens = all.slice(blockSize);
    const tableTokens = new RequestTokens(all);
    return {
      stored: [table[1]],
      parent: table[0],
      tokens,
      table,
      tableIds: [pool.cache(table[0]), pool.cache(table[1])],
      tableTokens,
      cpuStored: [table[1]],
      cpuSlot: tier.cache(table[1]),
      gpuEvicted,
      gpuEvictedId: pool.cache(gpuEvicted),
      cpuEvicted,
      cpuEvictedSlot: tier.cache(cpuEvicted),
    };
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
  report(recorder.sinkFor('GPU', blockSize), recorder.sinkFor('CPU', blockSize), pool, tier, steps[0]);
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
        report(gpu, cpu, pool, tier, steps[step++ % steps.length]);
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
