import { spawn } from 'node:child_process';
import { withSwitches } from '../../src/testing/index.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect } from 'vitest';
import type { EngineOptions } from '../../src/runtime/engine.js';
import type { EngineConfigInput, EngineMetrics, FinishedRequest, RequestSpec } from '../../src/runtime/engine-types.js';
import type { RemoteTestSwitches } from '../../src/protocol/remote-jobs.js';
import type { RemoteTierMetrics } from '../../src/remote/remote-stats.js';
import { mismatches, tokens, withEngine } from '../e2e/helpers.js';

/**
 * Scenario builders for the remote tier: engines (in this process or in
 * child processes) sharing one redis-server, and what each run produced.
 */

export { mismatches, tokens };

/** Two ranks (each writes and reads its own shard), a CPU tier, light compute emulation. */
export function remoteConfig(url: string, extra: EngineConfigInput = {}): EngineConfigInput {
  return { tp: 2, gpuBlocks: 64, cpuBlocks: 256, computeNsPerToken: 2_000, remote: url, remoteTimeoutMs: 500, ...extra };
}

/** Eight 128-token prompts (eight 16-token blocks each). */
export function prompts(seed = 900, count = 8, length = 128): number[][] {
  return Array.from({ length: count }, (_, i) => tokens(seed + i, length));
}

/** The prompts as requests, each followed by a few fresh tokens so its whole prefix can be a hit. */
export function asRequests(list: readonly number[][], tag: string, tail = 0): RequestSpec[] {
  return list.map((p, i) => ({ id: `${tag}${i}`, promptTokens: [...p, ...tokens(7_000 + i, tail)], maxTokens: 4, seed: i }));
}

export interface RemoteRun {
  readonly finished: readonly FinishedRequest[];
  readonly metrics: EngineMetrics;
  readonly remote: RemoteTierMetrics;
  /** load_failed_blocks_total{cause="remote"} (in-process runs only). */
  readonly remoteLoadFailedBlocks?: number;
}

/** Runs the requests in one engine in this process; `between` runs after every step (to kill the server mid-run). */
export async function runEngine(
  config: EngineConfigInput,
  requests: readonly RequestSpec[],
  remote: RemoteTestSwitches = {},
  between?: (metrics: EngineMetrics) => Promise<void> | void,
): Promise<RemoteRun> {
  const options: EngineOptions = withSwitches({ remote });
  return withEngine(
    config,
    async (engine) => {
      await engine.addRequests(requests);
      const finished: FinishedRequest[] = [];
      while (engine.hasPendingWork()) {
        finished.push(...(await engine.step()).finished);
        await between?.(engine.metrics());
      }
      const metrics = engine.metrics();
      expect(metrics.leaks).toEqual({ gpuBlocks: 0, cpuBlocks: 0 });
      const remoteLoadFailedBlocks = engine.monitoring().monitor.loadFailedBlocks.remote;
      return { finished, metrics, remote: metrics.remote as RemoteTierMetrics, remoteLoadFailedBlocks };
    },
    options,
  );
}

const ENGINE_MODULE = pathToFileURL(fileURLToPath(new URL('../../dist/src/runtime/engine.js', import.meta.url))).href;
const TESTING_MODULE = pathToFileURL(fileURLToPath(new URL('../../dist/src/testing/index.js', import.meta.url))).href;

/** Runs the requests in an engine of its own, in a child Node process (dist/ build). */
export async function runEngineProcess(
  config: EngineConfigInput,
  requests: readonly RequestSpec[],
  remote: RemoteTestSwitches = {},
  env: NodeJS.ProcessEnv = {},
): Promise<RemoteRun> {
  const script = `
    const { Engine } = await import(${JSON.stringify(ENGINE_MODULE)});
    const { withSwitches } = await import(${JSON.stringify(TESTING_MODULE)});
    const input = JSON.parse(process.argv[2]);
    const engine = await Engine.create(input.config, withSwitches({ remote: input.remote }));
    await engine.addRequests(input.requests);
    const finished = await engine.run();
    const metrics = engine.metrics();
    await engine.shutdown();
    process.stdout.write(JSON.stringify({
      finished: finished.map((f) => ({ ...f, promptTokens: Array.from(f.promptTokens) })),
      metrics,
    }));`;
  // A file, not --eval: rank worker threads inherit the process's flags, and --input-type would break them.
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-engine-'));
  const file = join(dir, 'engine-process.mjs');
  writeFileSync(file, script);
  const child = spawn(process.execPath, [file, JSON.stringify({ config: { backend: 'host', model: 'tiny', ...config }, requests, remote })], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  rmSync(dir, { recursive: true, force: true });
  if (code !== 0) throw new Error(`engine process exited with ${code}: ${err}`);
  const parsed = JSON.parse(out) as { finished: (FinishedRequest & { promptTokens: number[] })[]; metrics: EngineMetrics };
  const finished = parsed.finished.map((f) => ({ ...f, promptTokens: Int32Array.from(f.promptTokens) }));
  expect(parsed.metrics.leaks).toEqual({ gpuBlocks: 0, cpuBlocks: 0 });
  return { finished, metrics: parsed.metrics, remote: parsed.metrics.remote as RemoteTierMetrics };
}

/** Every request finished, and each one's tokens equal the reference model's. */
export function expectAllCorrect(run: RemoteRun, count: number): void {
  expect(run.finished.filter((f) => f.finishReason === 'length' || f.finishReason === 'stopped')).toHaveLength(count);
  expect(mismatches(run.finished)).toEqual([]);
}
