import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { packageRoot } from '../core/package-root.js';
import { SeededRandom } from '../core/prng.js';
import type { BackendName } from '../device/types.js';
import { MODEL_PRESETS } from '../model/presets.js';
import type { EngineConfigInput, EvictionPolicyName } from '../runtime/engine-types.js';
import { Registry } from 'prom-client';
import { FrontendHost, type ArrivalStats } from '../serve/frontend/frontend-host.js';
import { CompletionServer, type ServedModel } from '../serve/http-server.js';
import { InProcessBackend } from '../serve/in-process-backend.js';
import { startServer, type RunningServer } from '../serve/serve-app.js';
import { textCodecFor } from '../serve/text-codec.js';
import { runSchedulerBench } from './scheduler.js';
import { measureArrivalIntake } from './serve-arrival-intake.js';
import { measureKvEventPath } from './serve-kv-event-path.js';
import { measureRingDelivery } from './serve-ring-delivery.js';
import { measureSocketFloor, type SocketFloor } from './serve-socket-floor.js';
import { threadCpuUsAfterSleep } from './serve-thread-cpu.js';
import type { ServeLoadResult, ServeLoadSpec } from './serve-load.js';
import { median } from './stats.js';

/**
 * `kvtier bench serve` (docs/architecture.md, "Benchmarks"): `kvtier serve`
 * in this process, load from autocannon in a child process (its CPU and heap
 * are not the server's).
 *
 * - fixed rate: completions at --rate per second for --duration seconds,
 *   each a shared system prompt and a distinct user turn, through the
 *   front-end thread (kvtier serve's default); latency p50/p99, errors, the
 *   engine's counters, and the heap (after a full garbage collection)
 *   before and after.
 * - serving overhead at --streams concurrent requests: the same batch shape
 *   (distinct prompts, no cache hits) served, in turn, --repeats times:
 *   by the bare engine (requests added and stepped with no consumer at
 *   all), through the library (`ServingEngine.stream` read by for-await),
 *   over HTTP with the server on the main thread (`--http-thread off`: http
 *   sse, one event per token; http sse xN, one per --stream-interval N
 *   tokens; http whole) and over HTTP with the server on its front-end
 *   thread (thread sse, thread sse xN, thread whole), each on the same
 *   engine; the order turns by one phase each repeat. threadUsPerStep is the main (scheduler) thread's CPU time over
 *   the engine steps the batch took; addedUsPerStep is a row's minus the
 *   library's in the same repeat, addedVsBareUsPerStep minus the bare
 *   engine's (medians of those differences). They are set against the
 *   scheduler's CPU time per step at the same number of running requests,
 *   measured in the same run as `kvtier bench scheduler` does
 *   (overheadShare = added / scheduler, bareShare = addedVsBare /
 *   scheduler). The front-end thread's own CPU time per step is its own
 *   column (frontendUsPerStep): the work moved, it did not vanish.
 * - ring delivery: the main thread's per-step part of the front-end
 *   thread's path alone (serve-ring-delivery.ts), timed in a tight loop at
 *   --streams requests: resolves the few microseconds per step the batches'
 *   accounting cannot.
 * - arrival intake: the main thread's per-request part alone
 *   (serve-arrival-intake.ts): one step boundary's poll of the arrival ring
 *   queueing 4 completions, beside a library caller's ServingEngine.stream
 *   of as many, in the same rounds; per step at the steady arrival rate of
 *   --streams requests of --stream-tokens tokens (streams / stream-tokens
 *   per step). addedUsPerStep: beyond the library's stream() calls;
 *   addedVsBareUsPerStep: the whole intake, stream() included.
 * - delivery + intake: the two added together, the main thread's whole
 *   share of the front-end thread's path per step.
 * - kv events: the engine thread's part of publishing KV events, alone
 *   (serve-kv-event-path.ts): a saturated decode step's reports written as
 *   integer records into the KV event thread's ring, and the step's publish,
 *   at --streams requests; the KV event thread (batch, encoding, ZeroMQ
 *   hand-off) runs beside it, its CPU time per step in frontendUsPerStep.
 *   addedUsPerEvent: per event.
 * - http + kv events: delivery + intake + kv events, the serving path's
 *   whole share of the engine's thread per step (the goal's figure: at most
 *   10% of the scheduler's step at 256 streams).
 * - the floor under streaming, in the same repeats: a bare socket.write of
 *   one event-sized chunk to each of --streams loopback connections per
 *   round (serve-socket-floor.ts); a streamed token costs at least that.
 */

export interface ServeBenchOptions {
  readonly backend: BackendName;
  readonly tp: number;
  readonly gpuBlocks: number;
  readonly cpuBlocks: number;
  readonly eviction: EvictionPolicyName;
  /** Fixed-rate phase. */
  readonly rate: number;
  readonly durationSeconds: number;
  readonly connections: number;
  readonly maxTokens: number;
  readonly systemTokens: number;
  readonly userTokens: number;
  /** Overhead phase. */
  readonly streams: number;
  readonly streamTokens: number;
  readonly promptTokens: number;
  readonly repeats: number;
  readonly schedulerSteps: number;
  /** Tokens per event of the second streamed row (a second HTTP front end on the same engine). */
  readonly streamInterval: number;
  readonly onProgress?: (line: string) => void;
}

export type ServeBenchPhase =
  | 'fixed rate'
  | 'bare engine'
  | 'library'
  | 'http sse'
  | `http sse x${number}`
  | 'http whole'
  | 'thread sse'
  | `thread sse x${number}`
  | 'thread whole'
  | 'ring delivery'
  | 'arrival intake'
  | 'delivery + intake'
  | 'kv events'
  | 'http + kv events'
  | 'socket floor';
type OverheadPhase = Exclude<ServeBenchPhase, 'fixed rate' | 'socket floor' | 'ring delivery' | 'arrival intake' | 'delivery + intake' | 'kv events' | 'http + kv events'>;

export interface ServeBenchRow {
  readonly phase: ServeBenchPhase;
  /** Requests sent, answered 2xx, and failed (non-2xx, errors, timeouts). */
  readonly requests: number;
  readonly ok: number;
  readonly errors: number;
  /** Request latency (autocannon: to the last byte of the response); null for the library. */
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
  readonly requestsPerSecond: number;
  readonly outputTokensPerSecond: number;
  readonly steps: number;
  /** Prompt tokens the GPU prefix cache / CPU tier served in the phase. */
  readonly gpuHitTokens: number;
  readonly cpuHitTokens: number;
  /** Overhead phases: median over the repeats. */
  readonly cpuUsPerStep: number | null;
  /** Overhead phases: the main thread's CPU time per step (scheduler, serving loop, HTTP); null where it cannot be read. */
  readonly threadUsPerStep: number | null;
  /** Main-thread CPU per step minus the library batch's of the same repeat. */
  readonly addedUsPerStep: number | null;
  /** Main-thread CPU per step minus the bare engine's (no consumer at all) of the same repeat. */
  readonly addedVsBareUsPerStep: number | null;
  readonly schedulerUsPerStep: number | null;
  /** addedUsPerStep / schedulerUsPerStep. */
  readonly overheadShare: number | null;
  /** addedVsBareUsPerStep / schedulerUsPerStep. */
  readonly bareShare: number | null;
  /** Front-end thread rows: that thread's CPU time per step (null elsewhere, or where it cannot be read). */
  readonly frontendUsPerStep: number | null;
  /** Front-end thread rows: the main thread's time receiving and queueing one completion from the front end (µs). */
  readonly arrivalUsPerRequest: number | null;
  /**
   * addedUsPerStep over the events a step's share of the batch sent (http
   * sse: one per token per stream; xN: one per N tokens; http whole: one
   * response per request); socket floor: CPU per bare write.
   */
  readonly addedUsPerEvent: number | null;
  /** addedUsPerEvent / the socket floor's, same run. */
  readonly vsFloor: number | null;
  /** Fixed rate: used heap after a full collection, before and after the phase (MiB). */
  readonly heapBeforeMiB: number | null;
  readonly heapAfterMiB: number | null;
  /** GPU blocks still referenced once idle (0 unless a block leaked). */
  readonly leakedGpuBlocks: number;
}

const MODEL = 'tiny';

/** Where an HTTP row's batch is sent, and the front-end thread serving it (null: the server on the main thread). */
interface FrontEnd {
  readonly url: string;
  readonly thread: FrontendHost | null;
}

export async function runServeBench(options: ServeBenchOptions): Promise<ServeBenchRow[]> {
  const progress = options.onProgress ?? (() => {});
  const engine: EngineConfigInput = {
    backend: options.backend,
    model: MODEL,
    tp: options.tp,
    gpuBlocks: options.gpuBlocks,
    cpuBlocks: options.cpuBlocks,
    eviction: options.eviction,
    maxNumSeqs: Math.max(options.streams, 256),
  };
  // kvtier serve as it starts by default: the HTTP server on its front-end thread.
  const server = await startServer({ engine, host: '127.0.0.1', port: 0, maxWaiting: Math.max(1024, options.streams * 2) });
  const config = server.serving.engine.config;
  const model: ServedModel = { modelName: server.modelName, vocabSize: config.model.vocabSize, maxModelLen: config.maxModelLen };
  const codec = await textCodecFor(config.model.vocabSize);
  const closers: (() => Promise<void>)[] = [];
  try {
    // More front ends on the same engine: on the main thread (--http-thread off), one event per token and per N tokens, and a second front-end thread at N tokens per event.
    const inProcess = async (streamInterval: number): Promise<FrontEnd> => {
      const http = new CompletionServer({ backend: new InProcessBackend(server.serving, new Registry()), model, codec, streamInterval });
      await http.listen('127.0.0.1', 0);
      closers.push(() => http.close());
      return { url: http.url, thread: null };
    };
    const batchedThread = await FrontendHost.start({
      serving: server.serving,
      metricsText: async () => '',
      model,
      host: '127.0.0.1',
      port: 0,
      streamInterval: options.streamInterval,
    });
    closers.push(() => batchedThread.close());
    const n = options.streamInterval;
    const frontEnds = new Map<OverheadPhase, FrontEnd>([
      ['http sse', await inProcess(1)],
      [`http sse x${n}`, await inProcess(n)],
      ['http whole', await inProcess(1)],
      ['thread sse', { url: server.url, thread: server.http as FrontendHost }],
      [`thread sse x${n}`, { url: batchedThread.url, thread: batchedThread }],
      ['thread whole', { url: server.url, thread: server.http as FrontendHost }],
    ]);
    progress(`server at ${server.url}; warming up`);
    await libraryBatch(server, prompts(options.streams, options.promptTokens, 1_000_000), options.streamTokens);
    const rows: ServeBenchRow[] = [await fixedRate(server, options, progress)];
    rows.push(...(await overhead(server, frontEnds, options, progress)));
    return rows;
  } finally {
    for (const close of closers) await close();
    await server.close();
  }
}

async function fixedRate(server: RunningServer, options: ServeBenchOptions, progress: (line: string) => void): Promise<ServeBenchRow> {
  const random = new SeededRandom(7);
  const system = Array.from(random.tokens(options.systemTokens, MODEL_PRESETS.tiny.vocabSize));
  const bodies = Array.from({ length: 4096 }, () =>
    JSON.stringify({ model: server.modelName, prompt: [...system, ...random.tokens(options.userTokens, MODEL_PRESETS.tiny.vocabSize)], max_tokens: options.maxTokens }),
  );
  const heapBefore = heapAfterCollection();
  const before = server.serving.engine.metrics();
  progress(`fixed rate: ${options.rate} requests/s for ${options.durationSeconds} s over ${options.connections} connections`);
  const load = await runLoadChild({
    url: server.url,
    bodies,
    connections: options.connections,
    overallRate: options.rate,
    durationSeconds: options.durationSeconds,
    timeoutSeconds: 120,
  });
  await untilIdle(server);
  const after = server.serving.engine.metrics();
  const heapAfter = heapAfterCollection();
  return {
    phase: 'fixed rate',
    requests: load.requests,
    ok: load.ok,
    errors: load.non2xx + load.errors + load.timeouts,
    p50Ms: load.p50Ms,
    p99Ms: load.p99Ms,
    requestsPerSecond: load.ok / load.seconds,
    outputTokensPerSecond: (after.tokens.output - before.tokens.output) / load.seconds,
    steps: after.steps - before.steps,
    gpuHitTokens: after.hits.gpuPrefixTokens - before.hits.gpuPrefixTokens,
    cpuHitTokens: after.hits.cpuTierTokens - before.hits.cpuTierTokens,
    cpuUsPerStep: null,
    threadUsPerStep: null,
    addedUsPerStep: null,
    schedulerUsPerStep: null,
    overheadShare: null,
    addedVsBareUsPerStep: null,
    bareShare: null,
    frontendUsPerStep: null,
    arrivalUsPerRequest: null,
    addedUsPerEvent: null,
    vsFloor: null,
    heapBeforeMiB: heapBefore / 2 ** 20,
    heapAfterMiB: heapAfter / 2 ** 20,
    leakedGpuBlocks: after.leaks.gpuBlocks,
  };
}

interface BatchMeasure {
  readonly cpuUs: number;
  /** The main thread's CPU time (null where it cannot be read). */
  readonly threadUs: number | null;
  /** The front-end thread's CPU time (null: no such thread in the row, or it cannot be read). */
  readonly frontendUs: number | null;
  /** The main thread's time receiving the batch's completions from the front-end thread, and their count. */
  readonly arrival: ArrivalStats | null;
  readonly steps: number;
  readonly seconds: number;
  readonly outputTokens: number;
  readonly gpuHitTokens: number;
  readonly cpuHitTokens: number;
  readonly load: ServeLoadResult | null;
}

async function overhead(server: RunningServer, frontEnds: ReadonlyMap<OverheadPhase, FrontEnd>, options: ServeBenchOptions, progress: (line: string) => void): Promise<ServeBenchRow[]> {
  const phases: readonly OverheadPhase[] = ['bare engine', 'library', ...frontEnds.keys()];
  const measures = new Map<OverheadPhase, BatchMeasure[]>(phases.map((p) => [p, []]));
  const floors: SocketFloor[] = [];
  let batch = 0;
  for (let repeat = 0; repeat < options.repeats; repeat++) {
    // The order turns by one phase each repeat: a batch run first (after the socket floor or a rest) is not always the same one.
    const order = phases.map((_, i) => phases[(i + repeat) % phases.length]);
    for (const phase of order) {
      const batchPrompts = prompts(options.streams, options.promptTokens, ++batch * options.streams);
      progress(`overhead ${repeat + 1}/${options.repeats}: ${options.streams} concurrent requests, ${phase}`);
      measures.get(phase)!.push(await measureBatch(server, frontEnds.get(phase) ?? null, phase, batchPrompts, options.streamTokens));
    }
    progress(`overhead ${repeat + 1}/${options.repeats}: socket floor, ${options.streamTokens} rounds of one write to each of ${options.streams} connections`);
    await untilIdle(server);
    floors.push(await measureSocketFloor(options.streams, options.streamTokens));
  }
  const floorPerWrite = median(floors.map((f) => f.usPerWrite));
  const floorPerRound = median(floors.map((f) => f.usPerRound));
  // Events one stream sends over its --stream-tokens tokens.
  const eventsPerStream = (phase: OverheadPhase): number =>
    phase.endsWith(' whole') ? 1 : phase.includes(' sse x') ? Math.ceil(options.streamTokens / options.streamInterval) : options.streamTokens;
  progress(`scheduler CPU time per step at ${options.streams} running requests`);
  const scheduler = await schedulerUsPerStep(options);
  progress(`ring delivery: the main thread's part of the front-end thread's path per step at ${options.streams} requests`);
  const delivery = measureRingDelivery(options.streams).usPerStep;
  progress(`arrival intake: the main thread's part of receiving a completion from the front-end thread`);
  await untilIdle(server);
  const intake = await measureArrivalIntake(server.serving, options.promptTokens, options.streamTokens);
  progress(`kv events: the engine thread's part of publishing KV events per step at ${options.streams} decoding requests`);
  const kvEvents = await measureKvEventPath(options.streams);
  // Steady state: each request runs --stream-tokens steps, so as many arrive per step as finish.
  const arrivalsPerStep = options.streams / options.streamTokens;
  const intakeAdded = (intake.intakeUs - intake.libraryUs) * arrivalsPerStep;
  const intakeWhole = intake.intakeUs * arrivalsPerStep;
  const perStep = (m: BatchMeasure) => m.cpuUs / m.steps;
  // What serving adds is counted on the main thread where it can be read (the ranks' work is the same in every row, and noisy).
  const onThread = [...measures.values()].every((runs) => runs.every((m) => m.threadUs !== null));
  const addedBasis = (m: BatchMeasure) => (onThread ? m.threadUs! : m.cpuUs) / m.steps;
  const libraryRuns = measures.get('library')!.map(addedBasis);
  const bareRuns = measures.get('bare engine')!.map(addedBasis);
  const rows = phases.map((phase): ServeBenchRow => {
    const runs = measures.get(phase)!;
    const cpu = median(runs.map(perStep));
    // Paired with the baseline batches of the same repeat, so a load that drifts over the run cancels.
    const isHttp = frontEnds.has(phase);
    const added = isHttp ? median(runs.map((m, i) => addedBasis(m) - libraryRuns[i])) : null;
    const addedVsBare = phase === 'bare engine' ? null : median(runs.map((m, i) => addedBasis(m) - bareRuns[i]));
    const steps = Math.round(median(runs.map((m) => m.steps)));
    const perEvent = added === null ? null : (added * steps) / (options.streams * eventsPerStream(phase));
    const requests = runs.reduce((n, m) => n + (m.load?.requests ?? options.streams), 0);
    const ok = runs.reduce((n, m) => n + (m.load?.ok ?? options.streams), 0);
    const seconds = runs.reduce((s, m) => s + m.seconds, 0);
    const loads = runs.flatMap((m) => (m.load === null ? [] : [m.load]));
    const frontend = runs.every((m) => m.frontendUs !== null) ? median(runs.map((m) => m.frontendUs! / m.steps)) : null;
    const arrivals = runs.flatMap((m) => (m.arrival === null || m.arrival.requests === 0 ? [] : [m.arrival.microseconds / m.arrival.requests]));
    return {
      phase,
      requests,
      ok,
      errors: loads.reduce((n, l) => n + l.non2xx + l.errors + l.timeouts, 0),
      p50Ms: loads.length === 0 ? null : median(loads.map((l) => l.p50Ms)),
      p99Ms: loads.length === 0 ? null : median(loads.map((l) => l.p99Ms)),
      requestsPerSecond: ok / seconds,
      outputTokensPerSecond: runs.reduce((n, m) => n + m.outputTokens, 0) / seconds,
      steps,
      gpuHitTokens: runs.reduce((n, m) => n + m.gpuHitTokens, 0),
      cpuHitTokens: runs.reduce((n, m) => n + m.cpuHitTokens, 0),
      cpuUsPerStep: cpu,
      threadUsPerStep: onThread ? median(runs.map((m) => m.threadUs! / m.steps)) : null,
      addedUsPerStep: added,
      addedVsBareUsPerStep: addedVsBare,
      schedulerUsPerStep: scheduler,
      overheadShare: added === null ? null : added / scheduler,
      bareShare: addedVsBare === null ? null : addedVsBare / scheduler,
      frontendUsPerStep: frontend,
      arrivalUsPerRequest: arrivals.length === 0 ? null : median(arrivals),
      addedUsPerEvent: perEvent,
      vsFloor: perEvent === null ? null : perEvent / floorPerWrite,
      heapBeforeMiB: null,
      heapAfterMiB: null,
      leakedGpuBlocks: server.serving.engine.metrics().leaks.gpuBlocks,
    };
  });
  const tightLoopRow = (phase: ServeBenchPhase, added: number, addedVsBare: number, perRequest: number | null, perEvent: number): ServeBenchRow => ({
    phase,
    requests: 0,
    ok: 0,
    errors: 0,
    p50Ms: null,
    p99Ms: null,
    requestsPerSecond: 0,
    outputTokensPerSecond: 0,
    steps: 0,
    gpuHitTokens: 0,
    cpuHitTokens: 0,
    cpuUsPerStep: null,
    threadUsPerStep: null,
    addedUsPerStep: added,
    addedVsBareUsPerStep: addedVsBare,
    schedulerUsPerStep: scheduler,
    overheadShare: added / scheduler,
    bareShare: addedVsBare / scheduler,
    frontendUsPerStep: null,
    arrivalUsPerRequest: perRequest,
    addedUsPerEvent: perEvent,
    vsFloor: null,
    heapBeforeMiB: null,
    heapAfterMiB: null,
    leakedGpuBlocks: server.serving.engine.metrics().leaks.gpuBlocks,
  });
  rows.push(tightLoopRow('ring delivery', delivery, delivery, null, delivery / options.streams));
  rows.push(tightLoopRow('arrival intake', intakeAdded, intakeWhole, intake.intakeUs, intake.intakeUs - intake.libraryUs));
  rows.push(tightLoopRow('delivery + intake', delivery + intakeAdded, delivery + intakeWhole, null, (delivery + intakeAdded) / options.streams));
  rows.push({
    ...tightLoopRow('kv events', kvEvents.usPerStep, kvEvents.usPerStep, null, kvEvents.usPerStep / kvEvents.eventsPerStep),
    // The encoding and sending moved to the KV event thread: its CPU time per step, beside the engine thread's part.
    frontendUsPerStep: kvEvents.threadUsPerStep,
  });
  rows.push(
    tightLoopRow('http + kv events', delivery + intakeAdded + kvEvents.usPerStep, delivery + intakeWhole + kvEvents.usPerStep, null, (delivery + intakeAdded + kvEvents.usPerStep) / options.streams),
  );
  // The floor: no HTTP requests; one round of writes stands for a step.
  rows.push({
    ...tightLoopRow('socket floor', floorPerRound, floorPerRound, null, floorPerWrite),
    steps: options.streamTokens,
    addedVsBareUsPerStep: null,
    bareShare: null,
    vsFloor: 1,
  });
  return rows;
}

async function measureBatch(server: RunningServer, frontEnd: FrontEnd | null, phase: OverheadPhase, batch: readonly number[][], maxTokens: number): Promise<BatchMeasure> {
  await untilIdle(server);
  const before = server.serving.engine.metrics();
  const bodies = batch.map((prompt) => JSON.stringify({ model: server.modelName, prompt, max_tokens: maxTokens, stream: !phase.endsWith(' whole') }));
  // The load generator starts and reads its requests before the accounting begins.
  const child = frontEnd === null ? null : await startLoadChild({ url: frontEnd.url, bodies, connections: batch.length, amount: batch.length, timeoutSeconds: 600 });
  const thread = frontEnd?.thread ?? null;
  const threadBefore = await threadCpuUsAfterSleep();
  const frontendBefore = thread?.threadCpuUs() ?? null;
  const arrivalBefore = thread?.arrivalStats() ?? null;
  const started = performance.now();
  const cpu = process.cpuUsage();
  let load: ServeLoadResult | null = null;
  if (child !== null) load = await child.go();
  else if (phase === 'library') await libraryBatch(server, batch, maxTokens);
  else await bareEngineBatch(server, batch, maxTokens);
  await untilIdle(server);
  const used = process.cpuUsage(cpu);
  const threadAfter = await threadCpuUsAfterSleep();
  const frontendAfter = thread?.threadCpuUs() ?? null;
  const arrivalAfter = thread?.arrivalStats() ?? null;
  // Over HTTP, the load generator's own clock: the child's start-up is not serving time.
  const seconds = load?.seconds ?? (performance.now() - started) / 1000;
  const after = server.serving.engine.metrics();
  return {
    cpuUs: used.user + used.system,
    threadUs: threadBefore === null || threadAfter === null ? null : threadAfter - threadBefore,
    frontendUs: frontendBefore === null || frontendAfter === null ? null : frontendAfter - frontendBefore,
    arrival:
      arrivalBefore === null || arrivalAfter === null
        ? null
        : { requests: arrivalAfter.requests - arrivalBefore.requests, microseconds: arrivalAfter.microseconds - arrivalBefore.microseconds },
    steps: after.steps - before.steps,
    seconds,
    outputTokens: after.tokens.output - before.tokens.output,
    gpuHitTokens: after.hits.gpuPrefixTokens - before.hits.gpuPrefixTokens,
    cpuHitTokens: after.hits.cpuTierTokens - before.hits.cpuTierTokens,
    load,
  };
}

/** The batch through the library: every request streamed by a for-await reader, as an embedder would. */
async function libraryBatch(server: RunningServer, batch: readonly number[][], maxTokens: number): Promise<void> {
  await Promise.all(
    batch.map(async (prompt) => {
      let tokens = 0;
      for await (const _token of server.serving.stream({ promptTokens: prompt, maxTokens })) tokens++;
      return tokens;
    }),
  );
}

/**
 * The batch on the bare engine: added and stepped until done with nothing
 * reading the tokens (the serving loop sleeps meanwhile: it has no request
 * of its own). The least the main thread can spend per step on this batch.
 */
async function bareEngineBatch(server: RunningServer, batch: readonly number[][], maxTokens: number): Promise<void> {
  const engine = server.serving.engine;
  for (const prompt of batch) engine.addRequest({ promptTokens: prompt, maxTokens });
  while (engine.hasPendingWork()) await engine.step();
}

/** The scheduler bench's figure at this many running requests, with the CPU tier as the server has it. */
async function schedulerUsPerStep(options: ServeBenchOptions): Promise<number> {
  const rows = await runSchedulerBench({
    runningRequests: [options.streams],
    steps: options.schedulerSteps,
    repeats: 3,
    promptTokens: options.promptTokens,
    cpuTier: (config) => ({ cpuBlocks: config.numGpuBlocks * 4, eviction: options.eviction, storePolicy: 'on-compute' }),
  });
  return rows[0].usPerStep;
}

/** `count` prompts of `length` distinct tokens (seeded by `seed`): no two share a block. */
function prompts(count: number, length: number, seed: number): number[][] {
  return Array.from({ length: count }, (_, i) => Array.from(new SeededRandom(seed + i).tokens(length, MODEL_PRESETS.tiny.vocabSize)));
}

async function untilIdle(server: RunningServer): Promise<void> {
  while (server.serving.engine.hasPendingWork() || server.serving.inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 5));
}

/** Runs the load generator in a child process (dist/src/bench/serve-load-main.js). */
async function runLoadChild(spec: ServeLoadSpec): Promise<ServeLoadResult> {
  return (await startLoadChild(spec)).go();
}

interface LoadChild {
  /** Starts the load; resolves with its result. */
  go(): Promise<ServeLoadResult>;
}

/** Starts the load generator and resolves once it has read its spec and waits for go(). */
async function startLoadChild(spec: ServeLoadSpec): Promise<LoadChild> {
  const entry = join(packageRoot(), 'dist', 'src', 'bench', 'serve-load-main.js');
  if (!existsSync(entry)) throw new Error(`${entry} is missing: build kvtier first (npm run build:ts)`);
  // The spec goes on stdin: its request bodies are far beyond what arguments may hold.
  const child = spawn(process.execPath, [entry], { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.write(`${JSON.stringify(spec)}\n`);
  let stdout = '';
  let stderr = '';
  let ready!: () => void;
  const isReady = new Promise<void>((resolve) => (ready = resolve));
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    if (stdout.startsWith('ready\n')) ready();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<ServeLoadResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`the load generator failed (exit ${code}): ${stderr.trim()}`));
      else resolve(JSON.parse(stdout.slice('ready\n'.length)) as ServeLoadResult);
    });
  });
  await Promise.race([isReady, exited]);
  return {
    go: () => {
      child.stdin.end('go\n');
      return exited;
    },
  };
}

let collect: (() => void) | null = null;

/** Used heap bytes after a full garbage collection (V8's gc exposed for this process). */
function heapAfterCollection(): number {
  if (collect === null) {
    setFlagsFromString('--expose-gc');
    collect = runInNewContext('gc') as () => void;
  }
  collect();
  return getHeapStatistics().used_heap_size;
}
