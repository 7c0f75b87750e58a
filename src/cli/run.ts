import { cudaDeviceCount } from '../device/native.js';
import { runReportHtml } from '../report/html/run-report.js';
import { Engine } from '../runtime/engine.js';
import { resolveEngineConfig } from '../runtime/engine-config.js';
import type { FinishedRequest } from '../runtime/engine-types.js';
import { EXIT_OK, EXIT_REQUESTS_FAILED, EXIT_RUN_FAILED } from './exit-codes.js';
import { IntegrityChecker } from '../report/integrity.js';
import { RunInterrupts, withInterrupts } from './interrupt.js';
import { checkHostMemory } from './memory-check.js';
import { checkOutputFile, writeJsonFile, writeTextFile } from './output-file.js';
import { ProgressLine, snapshotFromMetrics } from './progress.js';
import { buildRunReport, type RunReport } from '../report/report.js';
import { runConfiguration } from '../report/run-configuration.js';
import { formatComparison, formatDeviceTraceSummary, formatRunReport } from '../report/report-format.js';
import { resolveRunConfig, toEngineConfig, type ResolvedRunConfig, type RunConfig } from './run-config.js';
import { createRunWorkload } from './run-workload.js';
import { RunMonitor } from './run-monitor.js';
import { CommandKvEvents } from './run-kv-events.js';
import type { TimelineInterval } from '../report/html/run-report.js';
import { RunTimeline } from './run-timeline.js';
import { StartupProgress } from './startup-progress.js';
import { driveWorkload } from '../workload/drive.js';
import { buildDeviceTrace, type DeviceTrace } from '../report/device-trace.js';
import type { DeviceTraceSummary } from '../report/device-trace-summary.js';

interface RunOutcome {
  readonly report: RunReport;
  /** Why the run failed, or null. */
  readonly failure: string | null;
  /** What the HTML report draws. */
  readonly ttftMs: readonly number[];
  readonly timeline: readonly TimelineInterval[];
  /** The run's device trace; null unless --device-trace asked for this run's. */
  readonly deviceTrace: DeviceTrace | null;
}

/**
 * `kvtier run`: pushes a workload through the engine on every rank, shows
 * live progress, then prints the report (and writes it as JSON). Exit code 1
 * when the engine failed, an output differs from the reference model, or a
 * block leaked; 3 when only requests failed (exit-codes.ts); 130/143 when
 * interrupted (interrupt.ts).
 */
export async function runCommand(config: RunConfig): Promise<number> {
  const resolved = resolveRunConfig(config, cudaDeviceCount());
  checkHostMemory(resolved);
  if (resolved.json !== null) await checkOutputFile('--json', resolved.json);
  if (resolved.html !== null) await checkOutputFile('--html', resolved.html);
  if (resolved.deviceTrace !== null) await checkOutputFile('--device-trace', resolved.deviceTrace);
  const monitor = await RunMonitor.start(resolved.monitoring);
  let kvEvents: CommandKvEvents | null = null;
  try {
    kvEvents = await CommandKvEvents.start(resolved.kvEvents);
    const sinks: RunSinks = { monitor, kvEvents };
    const code = await withInterrupts((interrupts) => runAndReport(resolved, interrupts, sinks));
    await monitor.linger();
    return code;
  } finally {
    await kvEvents?.close();
    await monitor.close();
  }
}

/** Where a run's engines report besides the report: the monitor (logs, /metrics) and the KV event publisher. */
interface RunSinks {
  readonly monitor: RunMonitor;
  readonly kvEvents: CommandKvEvents;
}

async function runAndReport(resolved: ResolvedRunConfig, interrupts: RunInterrupts, sinks: RunSinks): Promise<number> {
  if (resolved.compare) {
    const off = await runOnce(resolved, false, interrupts, sinks);
    const on = await runOnce(resolved, true, interrupts, sinks);
    process.stdout.write(`${formatComparison(off.report, on.report)}\n`);
    printDeviceTraceSummary(on.deviceTrace);
    if (resolved.json !== null) await writeJsonFile(resolved.json, { offloadOff: off.report, offloadOn: reportJson(on) });
    await writeHtml(resolved.html, [['offload off', off], ['offload on', on]]);
    await writeDeviceTrace(resolved.deviceTrace, on.deviceTrace);
    return reportFailures([off, on]);
  }
  const outcome = await runOnce(resolved, resolved.offload, interrupts, sinks);
  process.stdout.write(`${formatRunReport(outcome.report)}\n`);
  printDeviceTraceSummary(outcome.deviceTrace);
  if (resolved.json !== null) await writeJsonFile(resolved.json, reportJson(outcome));
  await writeHtml(resolved.html, [[resolved.offload ? 'offload on' : 'offload off', outcome]]);
  await writeDeviceTrace(resolved.deviceTrace, outcome.deviceTrace);
  return reportFailures([outcome]);
}

/** After the report: the device trace's summary, when the run was traced. */
function printDeviceTraceSummary(trace: DeviceTrace | null): void {
  if (trace !== null) process.stdout.write(`\n${formatDeviceTraceSummary(trace.otherData.summary)}\n`);
}

/** The run report as --json writes it: with the device trace's summary when, and only when, the run was traced. */
function reportJson(outcome: RunOutcome): RunReport & { readonly deviceTraceSummary?: DeviceTraceSummary } {
  return outcome.deviceTrace === null ? outcome.report : { ...outcome.report, deviceTraceSummary: outcome.deviceTrace.otherData.summary };
}

/** One line of JSON: a long run's trace holds an event per forward and copy job of every rank. */
async function writeDeviceTrace(file: string | null, trace: DeviceTrace | null): Promise<void> {
  if (file === null || trace === null) return;
  await writeTextFile(file, `${JSON.stringify(trace)}\n`, '--device-trace');
}

async function writeHtml(file: string | null, runs: readonly (readonly [string, RunOutcome])[]): Promise<void> {
  if (file === null) return;
  const html = await runReportHtml(runs.map(([label, o]) => ({ label, report: o.report, ttftMs: o.ttftMs, timeline: o.timeline })));
  await writeTextFile(file, html, '--html');
}

/**
 * 1 when a run failed; else 3 when requests ended with an error (the run
 * itself held: every served output matched), so a script can tell them from
 * a clean run; else 0.
 */
function reportFailures(outcomes: readonly RunOutcome[]): number {
  const failures = outcomes.flatMap((o) => (o.failure === null ? [] : [o.failure]));
  for (const failure of failures) process.stderr.write(`kvtier: ${failure}\n`);
  if (failures.length > 0) return EXIT_RUN_FAILED;
  const failed = outcomes.reduce((n, o) => n + o.report.requests.failed, 0);
  if (failed === 0) return EXIT_OK;
  process.stderr.write(`kvtier: the run finished, but ${failed} request(s) ended with an error (see "errors" in the report; exit code ${EXIT_REQUESTS_FAILED})\n`);
  return EXIT_REQUESTS_FAILED;
}

async function runOnce(config: ResolvedRunConfig, offload: boolean, interrupts: RunInterrupts, sinks: RunSinks): Promise<RunOutcome> {
  const { monitor, kvEvents } = sinks;
  const engineConfig = toEngineConfig(config, { offload });
  // The workload (a trace is read and checked whole) comes before the ranks start, so bad input costs nothing.
  const limits = resolveEngineConfig(engineConfig);
  const workload = await createRunWorkload(config.workload, { vocabSize: limits.model.vocabSize, maxModelLen: limits.maxModelLen });
  // --compare makes two runs: each progress line says which one it is.
  const label = config.compare ? (offload ? 'offload on' : 'offload off') : null;
  // --compare traces the offload-on run only: the one whose copy jobs meet its forwards.
  const traceDevice = config.deviceTrace !== null && (!config.compare || offload);
  const startup = new StartupProgress(config.tp, limits.startDeadlineMs, label);
  const forgetStartup = interrupts.onInterrupt(() => startup.stop());
  startup.start();
  let engine: Engine;
  try {
    engine = await Engine.create(engineConfig, {
      ...monitor.engineOptions(),
      onRankOpened: () => startup.rankOpened(),
      ...(traceDevice ? { deviceTrace: true } : {}),
    });
  } finally {
    startup.stop();
    forgetStartup();
  }
  monitor.attach(engine);
  kvEvents.attach(engine);
  const forgetEngine = interrupts.onInterrupt(async () => {
    progress?.stop();
    await engine.shutdown();
  });
  const finished: FinishedRequest[] = [];
  let failure: string | null = null;
  let integrity: IntegrityChecker | null = null;
  let progress: ProgressLine | null = null;
  const timeline = new RunTimeline(() => snapshotFromMetrics(engine.metrics(), workload.plannedRequests));
  let wallSeconds = 0;
  try {
    integrity = new IntegrityChecker(engine.config.model);
    const checker = integrity;
    progress = new ProgressLine({
      snapshot: () => snapshotFromMetrics(engine.metrics(), workload.plannedRequests),
      ...(label === null ? {} : { label }),
    });
    progress.start();
    timeline.start();
    const drive = await driveWorkload(engine, workload, (f) => {
      finished.push(f);
      checker.add(f);
    });
    if (drive.stopped !== null) failure = drive.stopped.message;
    wallSeconds = drive.wallSeconds;
  } finally {
    progress?.stop();
    timeline.stop();
    await engine.shutdown();
    forgetEngine();
  }
  const summary = await integrity.finish();
  const metrics = engine.metrics();
  const report = buildRunReport({
    finished,
    metrics,
    integrity: summary,
    wallSeconds,
    backend: engine.backend,
    tp: engine.config.tp,
    offload,
    workload: workload.description,
    configuration: runConfiguration(engine.config, engine.gpu, metrics.stepClock.description),
  });
  if (failure === null && summary.mismatches > 0) {
    failure = `integrity check failed: ${summary.mismatches} of ${summary.checked} requests differ from the reference model`;
  }
  if (failure === null && (metrics.leaks.gpuBlocks > 0 || metrics.leaks.cpuBlocks > 0)) {
    failure = `blocks leaked after the run: ${metrics.leaks.gpuBlocks} GPU, ${metrics.leaks.cpuBlocks} CPU`;
  }
  const ttftMs = finished.flatMap((f) => (f.firstTokenMs === null ? [] : [f.firstTokenMs - f.arrivalMs]));
  return { report, failure, ttftMs, timeline: timeline.intervals(), deviceTrace: deviceTraceOf(engine, label) };
}

/** The engine's recorded device spans as a Chrome trace; null when it kept none (tracing was off). */
function deviceTraceOf(engine: Engine, label: string | null): DeviceTrace | null {
  const spans = engine.deviceSpans();
  if (spans === null) return null;
  const ranks = engine.ranks.map((r) => ({ rank: r.rank, deviceName: r.deviceName }));
  return buildDeviceTrace({ spans, ranks, backend: engine.backend, label });
}
