import { formatBytes, formatDecimalBytes, formatRate } from '../core/byte-size.js';
import { remoteReportRows } from '../remote/remote-report.js';
import type { Percentiles } from './percentiles.js';
import { CLOCK_OVERRUN_WARNING, type ClockReport, type RunReport, type TransferReport } from './report.js';
import { labeledRows } from './text-rows.js';
import { slowReplayWarning, type ReplayLoad } from './replay-load.js';
import { configurationRows } from './run-configuration.js';
import type { CopyDirectionSummary, CopyJobTotals, DeviceTraceSummary, HostSideTotals, RankTraceSummary } from './device-trace-summary.js';

/** Human-readable renderings of RunReport: one run, or --compare's two side by side. */

const count = (x: number) => Math.round(x).toLocaleString('en-US');
const ms = (x: number | null) => (x === null ? '-' : `${x.toFixed(x < 10 ? 2 : 1)} ms`);
const rate = formatRate;
const share = (part: number, whole: number) => (whole === 0 ? '-' : `${((100 * part) / whole).toFixed(1)}%`);

/** Integrity as passed/checked, e.g. "1,536/1,536". */
const passed = (r: RunReport) => `${count(r.integrity.checked - r.integrity.mismatches)}/${count(r.integrity.checked)}`;

function percentiles(p: Percentiles): string {
  return `p50 ${ms(p.p50).padStart(10)}   p90 ${ms(p.p90).padStart(10)}   p99 ${ms(p.p99).padStart(10)}`;
}

function transfer(name: string, t: TransferReport): string {
  const failed = t.failedJobs > 0 ? `, ${count(t.failedJobs)} failed` : '';
  const copies = t.meanCopyJobBytes === null ? '' : `  as ${count(t.copyJobsPerRank)} copy jobs per rank of ${formatBytes(t.meanCopyJobBytes)} mean`;
  return `${name}  ${count(t.jobs).padStart(7)} jobs${failed}  ${formatBytes(t.bytes).padStart(11)}  link ${rate(t.gbps)}  (avg over wall ${rate(t.avgGbps)})${copies}`;
}

function clockRow(clock: ClockReport): string {
  const run = clock.overrun === null ? '' : `; forwards ran ${(clock.forwardMs / 1000).toFixed(2)} s (${clock.overrun >= 0 ? '+' : ''}${(100 * clock.overrun).toFixed(1)}%)`;
  return `${clock.description}: modelled compute ${(clock.modelledComputeMs / 1000).toFixed(2)} s${run}`;
}

function loadRow(load: ReplayLoad): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  return (
    `span ${s(load.replaySpanMs)} for ${s(load.traceSpanMs)} of arrivals (pace ${load.paceRatio.toFixed(2)}x); ` +
    `queue wait mean ${s(load.meanQueueWaitMs)}, p99 ${s(load.p99QueueWaitMs)}`
  );
}

/** A warning when the forwards ran well past the modelled compute (the host's own work), or null. */
export function clockWarning(clock: ClockReport): string | null {
  if (clock.overrun === null || clock.overrun <= CLOCK_OVERRUN_WARNING) return null;
  return (
    `the forwards took ${(100 * clock.overrun).toFixed(0)}% longer than the step clock modelled (this machine's own work per step, ` +
    'and loads the forwards waited for): latencies here run slower than on the modelled GPU'
  );
}

/** The prompt tokens no request reached (it failed or was aborted first), when there are any. */
function reachedNote(report: RunReport): string {
  const { prompt, promptReached } = report.tokens;
  return promptReached === prompt ? '' : ` (${count(prompt - promptReached)} never reached)`;
}

/** One run's report as aligned text. */
export function formatRunReport(report: RunReport): string {
  const { requests, tokens, hits, transfers, latency, integrity, leaks } = report;
  const title = `kvtier run: ${report.backend} backend, tp ${report.tp}, offload ${report.offload ? 'on' : 'off'}${report.workload === null ? '' : `, ${report.workload}`}`;
  const lines: [string, string][] = [
    ...(report.configuration === null ? [] : configurationRows(report.configuration)),
    ['requests', `${count(requests.total)} total   ${count(requests.finished)} finished   ${count(requests.failed)} failed   ${count(requests.aborted)} aborted`],
    ['wall time', `${report.wallSeconds.toFixed(2)} s`],
    ['throughput', `${report.throughput.requestsPerSecond.toFixed(2)} req/s   ${count(report.throughput.outputTokensPerSecond)} output tok/s   ${count(report.throughput.promptTokensPerSecond)} prompt tok/s`],
    ['tokens', `prompt ${count(tokens.prompt)}${reachedNote(report)}   output ${count(tokens.output)}   prefill computed ${count(tokens.prefillComputed)} (${count(tokens.recomputed)} recomputed)`],
    ['hits', `GPU prefix ${count(hits.gpuPrefixTokens)} tok (${share(hits.gpuPrefixTokens, tokens.promptReached)})   CPU tier ${count(hits.cpuTierTokens)} tok (${share(hits.cpuTierTokens, tokens.promptReached)})`],
    ['rereads', `GPU prefix ${count(report.rereads.gpuPrefixTokens)} tok   CPU tier ${count(report.rereads.cpuTierTokens)} tok   (served again after a preemption or a rank loss; not hits)`],
    ...(report.remote ? remoteReportRows(report.remote, tokens.prompt) : []),
    ['transfers', transfer('GPU->CPU', transfers.gpuToCpu)],
    ['', transfer('CPU->GPU', transfers.cpuToGpu)],
    ['TTFT', percentiles(latency.ttftMs)],
    ['TPOT', percentiles(latency.tpotMs)],
    ['preemptions', count(report.preemptions)],
    ['load failures', `${count(report.loadFailures.blocks)} blocks, ${count(report.loadFailures.requestsRecovered)} requests recovered`],
    ['rank restarts', count(report.rankRestarts)],
    ['integrity', `${passed(report)}${integrity.mismatches > 0 ? `   ${count(integrity.mismatches)} MISMATCHED` : ''}`],
    ['leaks', `${count(leaks.gpuBlocks)} GPU blocks, ${count(leaks.cpuBlocks)} CPU blocks`],
    ['step clock', clockRow(report.clock)],
    ['load', loadRow(report.load)],
  ];
  const stretched = clockWarning(report.clock);
  if (stretched !== null) lines.push(['warning', stretched]);
  const slow = slowReplayWarning(report.load);
  if (slow !== null) lines.push(['warning', slow]);
  for (const m of integrity.examples) lines.push(['', `mismatch: request ${m.id} differs first at output ${m.index}`]);
  for (const e of report.errors) lines.push(['error', e]);
  return (
    `${title}\n${labeledRows(lines)}\n\n` +
    'Hits are prompt tokens a tier served the first time their request reached them, as a share of the prompt tokens reached: ' +
    'GPU + CPU hits + prefill computed = prompt reached + recomputed.\n' +
    `Rates: "link" is bytes over the transfers' busy time; "avg over wall" is bytes over the run's wall time.`
  );
}

/** Relative change from `before` to `after`, e.g. "-42.0%". */
function change(before: number | null, after: number | null): string {
  if (before === null || after === null || before === 0) return '-';
  const pct = (100 * (after - before)) / before;
  return `${pct >= 0 ? '+' : ''}${pct.toFixed(1)}%`;
}

/** --compare: offloading off and on side by side, with the change. */
export function formatComparison(off: RunReport, on: RunReport): string {
  type Row = [label: string, off: string, on: string, change: string];
  const metric = (label: string, pick: (r: RunReport) => number | null, show: (x: number | null) => string): Row => [
    label,
    show(pick(off)),
    show(pick(on)),
    change(pick(off), pick(on)),
  ];
  const n = (x: number | null) => (x === null ? '-' : count(x));
  const table: Row[] = [
    ['', 'offload off', 'offload on', 'change'],
    metric('wall time', (r) => r.wallSeconds, (x) => (x === null ? '-' : `${x.toFixed(2)} s`)),
    metric('output tok/s', (r) => r.throughput.outputTokensPerSecond, n),
    metric('requests/s', (r) => r.throughput.requestsPerSecond, (x) => (x === null ? '-' : x.toFixed(2))),
    metric('TTFT p50', (r) => r.latency.ttftMs.p50, ms),
    metric('TTFT p90', (r) => r.latency.ttftMs.p90, ms),
    metric('TTFT p99', (r) => r.latency.ttftMs.p99, ms),
    metric('TPOT p50', (r) => r.latency.tpotMs.p50, ms),
    metric('prefill computed', (r) => r.tokens.prefillComputed, n),
    metric('GPU prefix hits', (r) => r.hits.gpuPrefixTokens, n),
    metric('CPU tier hits', (r) => r.hits.cpuTierTokens, n),
    metric('rereads', (r) => r.rereads.gpuPrefixTokens + r.rereads.cpuTierTokens, n),
    metric('recomputed', (r) => r.tokens.recomputed, n),
    metric('preemptions', (r) => r.preemptions, n),
    metric('queue wait p99', (r) => r.load.p99QueueWaitMs, ms),
    ['integrity', passed(off), passed(on), ''],
  ];
  const widths = [0, 1, 2, 3].map((c) => Math.max(...table.map((row) => row[c].length)));
  const lines = table.map((row) =>
    [row[0].padEnd(widths[0]), row[1].padStart(widths[1]), row[2].padStart(widths[2]), row[3].padStart(widths[3])].join('   ').trimEnd(),
  );
  const notes = [on, off].flatMap((r) => [clockWarning(r.clock), slowReplayWarning(r.load)]).filter((w): w is string => w !== null);
  // The runs differ only in the CPU tier: the "on" run's configuration says everything.
  const configuration = on.configuration === null ? '' : `${labeledRows(configurationRows(on.configuration))}\n`;
  return (
    `kvtier run --compare: ${on.backend} backend, tp ${on.tp}${on.workload === null ? '' : `, ${on.workload}`}, step clock ${on.clock.description}\n` +
    configuration +
    `${lines.join('\n')}${[...new Set(notes)].map((w) => `\nwarning: ${w}`).join('')}`
  );
}

const percent = (x: number | null) => (x === null ? '-' : `${(100 * x).toFixed(1)}%`);

const jobs = (n: number) => `${count(n)} job${n === 1 ? '' : 's'}`;

/** "beside forwards 150 jobs at 29.80 GB/s"; later classes drop the word "jobs" (the first says what the numbers count). */
function copyClass(name: string, totals: CopyJobTotals | null, first: boolean): string {
  return totals === null ? `${name} none` : `${name} ${first ? jobs(totals.jobs) : count(totals.jobs)} at ${rate(totals.gbps)}`;
}

function copyDirection(d: CopyDirectionSummary): string {
  if (d.jobs === 0) return 'no timed copy jobs';
  const failed = d.failedJobs > 0 ? ` (${count(d.failedJobs)} failed)` : '';
  const { beside, alone, mixed } = d.byForwards;
  const concurrent = d.stream.concurrentMs > 0 ? `; jobs overlapped each other for ${ms(d.stream.concurrentMs)}` : '';
  return (
    `${jobs(d.jobs)}${failed}, ${formatDecimalBytes(d.bytes)}, ${rate(d.gbps)}; ` +
    `${copyClass('beside forwards', beside, true)}, ${copyClass('alone', alone, false)}, ${copyClass('mixed', mixed, false)}; ` +
    `${percent(d.besideForwardsShare)} of busy time beside forwards; stream idle ${percent(d.stream.idleShare)} of its span${concurrent}` +
    hostSide(d.host)
  );
}

/** "; host enqueue 12.0% of busy time, queued before start mean 0.40 ms" ('-' for a figure not measured). */
function hostSide(h: HostSideTotals): string {
  if (h.enqueue.spans === 0 && h.queued.spans === 0) return '; host side not measured';
  return `; host enqueue ${percent(h.enqueue.busyShare)} of busy time, queued before start mean ${ms(h.queued.meanMs)}`;
}

function forwardsLine(r: RankTraceSummary): string {
  const f = r.forwards;
  if (f.count === 0) return 'no timed forwards';
  const { enqueue, queued } = f.host;
  if (enqueue.spans === 0 && queued.spans === 0) return `${count(f.count)} timed; host side not measured`;
  return `${count(f.count)} timed, host enqueue mean ${ms(enqueue.meanMs)}, queued before start mean ${ms(queued.meanMs)}`;
}

/** The device trace's summary: a line per rank and direction, then what the classes mean. */
export function formatDeviceTraceSummary(summary: DeviceTraceSummary): string {
  const lines = summary.ranks.flatMap((r) => {
    const rank = `device trace rank ${r.rank}${r.deviceOpens > 1 ? ` (${r.deviceOpens} device opens)` : ''}`;
    return [`${rank} loads: ${copyDirection(r.load)}`, `${rank} stores: ${copyDirection(r.store)}`, `${rank} forwards: ${forwardsLine(r)}`];
  });
  return (
    `${lines.join('\n')}\n` +
    `Copy jobs beside forwards ran at least ${100 * summary.besideAtLeast}% of their span beside a forward of their rank, alone at most ` +
    `${100 * summary.aloneAtMost}%, mixed in between; rates are bytes over each class's device busy time; ` +
    "stream idle is the time between a direction's jobs, from its first job's start to its last job's end; " +
    "host enqueue is the host's time enqueueing a span's own work after its start mark (inside the span when the stream was idle), " +
    'queued the time from its submit call to its start on the device.'
  );
}
