import { cudaDeviceCount } from '../device/native.js';
import { Engine } from '../runtime/engine.js';
import { resolveEngineConfig } from '../runtime/engine-config.js';
import type { FinishedRequest } from '../runtime/engine-types.js';
import { IntegrityChecker } from './integrity.js';
import { checkHostMemory } from './memory-check.js';
import { checkOutputFile, writeJsonFile } from './output-file.js';
import { ProgressLine, snapshotFromMetrics } from './progress.js';
import { buildRunReport, formatComparison, formatRunReport, type RunReport } from './report.js';
import { resolveRunConfig, toEngineConfig, type ResolvedRunConfig, type RunConfig } from './run-config.js';
import { createRunWorkload } from './run-workload.js';
import { RunMonitor } from './run-monitor.js';
import { driveWorkload } from '../workload/drive.js';

interface RunOutcome {
  readonly report: RunReport;
  /** Why the run failed, or null. */
  readonly failure: string | null;
}

/**
 * `kvtier run`: pushes a workload through the engine on every rank, shows
 * live progress, then prints the report (and writes it as JSON). Exit code 1
 * when the engine failed, an output differs from the reference model, or a
 * block leaked.
 */
export async function runCommand(config: RunConfig): Promise<number> {
  const resolved = resolveRunConfig(config, cudaDeviceCount());
  checkHostMemory(resolved);
  if (resolved.json !== null) await checkOutputFile('--json', resolved.json);
  const monitor = await RunMonitor.start(resolved.monitoring);
  try {
    const code = await runAndReport(resolved, monitor);
    await monitor.linger();
    return code;
  } finally {
    await monitor.close();
  }
}

async function runAndReport(resolved: ResolvedRunConfig, monitor: RunMonitor): Promise<number> {
  if (resolved.compare) {
    const off = await runOnce(resolved, false, monitor);
    const on = await runOnce(resolved, true, monitor);
    process.stdout.write(`${formatComparison(off.report, on.report)}\n`);
    if (resolved.json !== null) await writeJsonFile(resolved.json, { offloadOff: off.report, offloadOn: on.report });
    return reportFailures([off, on]);
  }
  const outcome = await runOnce(resolved, resolved.offload, monitor);
  process.stdout.write(`${formatRunReport(outcome.report)}\n`);
  if (resolved.json !== null) await writeJsonFile(resolved.json, outcome.report);
  return reportFailures([outcome]);
}

function reportFailures(outcomes: readonly RunOutcome[]): number {
  const failures = outcomes.flatMap((o) => (o.failure === null ? [] : [o.failure]));
  for (const failure of failures) process.stderr.write(`kvtier: ${failure}\n`);
  return failures.length > 0 ? 1 : 0;
}

async function runOnce(config: ResolvedRunConfig, offload: boolean, monitor: RunMonitor): Promise<RunOutcome> {
  const engineConfig = toEngineConfig(config, { offload });
  // The workload (a trace is read and checked whole) comes before the ranks start, so bad input costs nothing.
  const limits = resolveEngineConfig(engineConfig);
  const workload = await createRunWorkload(config.workload, { vocabSize: limits.model.vocabSize, maxModelLen: limits.maxModelLen });
  const engine = await Engine.create(engineConfig, monitor.engineOptions());
  monitor.attach(engine);
  const finished: FinishedRequest[] = [];
  let failure: string | null = null;
  let integrity: IntegrityChecker | null = null;
  let progress: ProgressLine | null = null;
  let wallSeconds = 0;
  try {
    integrity = new IntegrityChecker(engine.config.model);
    const checker = integrity;
    progress = new ProgressLine({ snapshot: () => snapshotFromMetrics(engine.metrics(), workload.plannedRequests) });
    progress.start();
    const drive = await driveWorkload(engine, workload, (f) => {
      finished.push(f);
      checker.add(f);
    });
    if (drive.stopped !== null) failure = drive.stopped.message;
    wallSeconds = drive.wallSeconds;
  } finally {
    progress?.stop();
    await engine.shutdown();
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
  });
  if (failure === null && summary.mismatches > 0) {
    failure = `integrity check failed: ${summary.mismatches} of ${summary.checked} requests differ from the reference model`;
  }
  if (failure === null && (metrics.leaks.gpuBlocks > 0 || metrics.leaks.cpuBlocks > 0)) {
    failure = `blocks leaked after the run: ${metrics.leaks.gpuBlocks} GPU, ${metrics.leaks.cpuBlocks} CPU`;
  }
  return { report, failure };
}
