import { writeFile } from 'node:fs/promises';
import { cudaDeviceCount } from '../device/native.js';
import { runReportHtml } from '../report/html/run-report.js';
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
import { RunTimeline, type TimelineInterval } from './run-timeline.js';
import { driveWorkload } from '../workload/drive.js';

interface RunOutcome {
  readonly report: RunReport;
  /** What the HTML report draws. */
  readonly ttftMs: readonly number[];
  readonly timeline: readonly TimelineInterval[];
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
  if (resolved.html !== null) await checkOutputFile('--html', resolved.html);
  if (resolved.compare) {
    const off = await runOnce(resolved, false);
    const on = await runOnce(resolved, true);
    process.stdout.write(`${formatComparison(off.report, on.report)}\n`);
    if (resolved.json !== null) await writeJsonFile(resolved.json, { offloadOff: off.report, offloadOn: on.report });
    await writeHtml(resolved.html, [['offload off', off], ['offload on', on]]);
    return reportFailures([off, on]);
  }
  const outcome = await runOnce(resolved, resolved.offload);
  process.stdout.write(`${formatRunReport(outcome.report)}\n`);
  if (resolved.json !== null) await writeJsonFile(resolved.json, outcome.report);
  await writeHtml(resolved.html, [[resolved.offload ? 'offload on' : 'offload off', outcome]]);
  return reportFailures([outcome]);
}

async function writeHtml(file: string | null, runs: readonly (readonly [string, RunOutcome])[]): Promise<void> {
  if (file === null) return;
  const html = await runReportHtml(runs.map(([label, o]) => ({ label, report: o.report, ttftMs: o.ttftMs, timeline: o.timeline })));
  await writeFile(file, html);
}

function reportFailures(outcomes: readonly RunOutcome[]): number {
  const failures = outcomes.flatMap((o) => (o.failure === null ? [] : [o.failure]));
  for (const failure of failures) process.stderr.write(`kvtier: ${failure}\n`);
  return failures.length > 0 ? 1 : 0;
}

async function runOnce(config: ResolvedRunConfig, offload: boolean): Promise<RunOutcome> {
  const engineConfig = toEngineConfig(config, { offload });
  // The workload (a trace is read and checked whole) comes before the ranks start, so bad input costs nothing.
  const limits = resolveEngineConfig(engineConfig);
  const workload = await createRunWorkload(config.workload, { vocabSize: limits.model.vocabSize, maxModelLen: limits.maxModelLen });
  const engine = await Engine.create(engineConfig);
  const finished: FinishedRequest[] = [];
  let failure: string | null = null;
  let integrity: IntegrityChecker | null = null;
  let progress: ProgressLine | null = null;
  const timeline = new RunTimeline(() => snapshotFromMetrics(engine.metrics(), workload.plannedRequests));
  let wallSeconds = 0;
  try {
    integrity = new IntegrityChecker(engine.config.model);
    const checker = integrity;
    progress = new ProgressLine({ snapshot: () => snapshotFromMetrics(engine.metrics(), workload.plannedRequests) });
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
  const ttftMs = finished.flatMap((f) => (f.firstTokenMs === null ? [] : [f.firstTokenMs - f.arrivalMs]));
  return { report, failure, ttftMs, timeline: timeline.intervals() };
}
