import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'vitest';
import type { RunReport } from '../../src/report/report.js';

/**
 * Runs the built `kvtier` command line as a child process, the way a user
 * does (`npm test` compiles dist/ before vitest starts), and reads back its
 * exit code, output and --json report.
 */

const REPO = resolve(import.meta.dirname, '../..');
const CLI = join(REPO, 'dist', 'src', 'cli', 'main.js');
/** A child that runs longer than this is killed, so a hung CLI fails its test instead of stalling the suite. */
const CHILD_LIMIT_MS = 50_000;

export const CONVERSATION_TRACE = '/work/shared/traces/mooncake/conversation_trace.jsonl';

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** `env`: variables set for the child on top of this process's environment. */
export async function kvtier(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build kvtier first (npm run build:ts)`);
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_LIMIT_MS);
    child.on('error', fail);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

/** A fresh folder for this test's files. */
export function scratchDir(): string {
  return mkdtempSync(join(tmpdir(), 'kvtier-cli-'));
}

/** Writes `text` to `name` in a fresh folder and returns its path. */
export function scratchFile(name: string, text: string): string {
  const file = join(scratchDir(), name);
  writeFileSync(file, text);
  return file;
}

/** `kvtier run ARGS --json FILE`: the process result and the parsed report. */
export async function runWithReport<T = RunReport>(args: readonly string[]): Promise<CliResult & { readonly report: T }> {
  const json = join(scratchDir(), 'report.json');
  const result = await kvtier(['run', ...args, '--json', json]);
  if (result.code !== 0) throw new Error(`kvtier run ${args.join(' ')} exited ${result.code}:\n${result.stderr}`);
  return { ...result, report: JSON.parse(readFileSync(json, 'utf8')) as T };
}

/** What --compare writes with --json. */
export interface ComparisonReport {
  readonly offloadOff: RunReport;
  readonly offloadOn: RunReport;
}

/** Bad input: exit code 2, nothing on stdout, and exactly one `kvtier: ...` line on stderr; returns that line. */
export function expectUsageFailure(result: CliResult): string {
  expect(result.stdout).toBe('');
  const lines = result.stderr.split('\n').filter((line) => line !== '');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^kvtier: /);
  expect(result.code).toBe(2);
  return lines[0];
}

/** Bytes of one 16-token block of the tiny model over all ranks: 2 layers x K,V x 4 heads x 8 dims x 2 bytes x 16 tokens. */
export const TINY_BLOCK_BYTES = 2 * 2 * 4 * 8 * 2 * 16;

/**
 * What every clean run must show, whatever the workload: every request
 * finished and matched the reference model, nothing leaked, and each prompt
 * token was either a hit or computed (computed more than once only when a
 * preemption threw work away).
 */
export function expectCleanRun(report: RunReport): void {
  expect(report.requests.total).toBeGreaterThan(0);
  expect(report.requests.finished).toBe(report.requests.total);
  expect(report.requests.failed + report.requests.aborted).toBe(0);
  expect(report.integrity.checked).toBe(report.requests.finished);
  expect(report.integrity.mismatches).toBe(0);
  expect(report.leaks).toEqual({ gpuBlocks: 0, cpuBlocks: 0 });
  const served = report.hits.gpuPrefixTokens + report.hits.cpuTierTokens + report.tokens.prefillComputed;
  if (report.preemptions === 0) expect(served).toBe(report.tokens.prompt);
  else expect(served).toBeGreaterThanOrEqual(report.tokens.prompt);
}

/** With offloading on, the CPU tier served prompt tokens, and the bytes loaded are exactly those hits' blocks. */
export function expectCpuTierUsed(report: RunReport, blockBytes = TINY_BLOCK_BYTES, blockSize = 16): void {
  expect(report.offload).toBe(true);
  expect(report.hits.cpuTierTokens).toBeGreaterThan(0);
  expect(report.transfers.gpuToCpu.jobs).toBeGreaterThan(0);
  expect(report.transfers.gpuToCpu.failedJobs).toBe(0);
  expect(report.transfers.gpuToCpu.bytes % blockBytes).toBe(0);
  expect(report.transfers.cpuToGpu.failedJobs).toBe(0);
  expect(report.transfers.cpuToGpu.bytes).toBe((report.hits.cpuTierTokens / blockSize) * blockBytes);
}

/** With offloading off, nothing touched a CPU tier. */
export function expectNoCpuTier(report: RunReport): void {
  expect(report.offload).toBe(false);
  expect(report.hits.cpuTierTokens).toBe(0);
  expect(report.transfers.gpuToCpu).toMatchObject({ jobs: 0, bytes: 0 });
  expect(report.transfers.cpuToGpu).toMatchObject({ jobs: 0, bytes: 0 });
}
