import { describe, expect, it } from 'vitest';
import { ProgressLine, formatProgressLine, ratesBetween, snapshotFromMetrics, type ProgressSnapshot } from '../../src/cli/progress.js';
import type { EngineMetrics } from '../../src/runtime/engine-types.js';

function snapshot(overrides: Partial<ProgressSnapshot> = {}): ProgressSnapshot {
  return {
    requestsDone: 0,
    requestsTotal: 10,
    promptTokens: 0,
    promptReachedTokens: 0,
    outputTokens: 0,
    gpuHitTokens: 0,
    cpuTierHitTokens: 0,
    bytesGpuToCpu: 0,
    bytesCpuToGpu: 0,
    ...overrides,
  };
}

/** A writable that records what was written, as a terminal or as a log file. */
function capture(isTTY: boolean) {
  const chunks: string[] = [];
  const stream = {
    isTTY,
    columns: 200,
    write: (chunk: string) => (chunks.push(chunk), true),
    // readline.cursorTo and clearLine call these on terminals.
    cursorTo: () => true,
    clearLine: () => true,
  };
  return { stream: stream as unknown as NodeJS.WritableStream & { isTTY?: boolean }, text: () => chunks.join('') };
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe('the progress line', () => {
  it('shows requests, token rate, hit shares of the prompt tokens reached per tier and transfer rates', () => {
    // Prompt tokens of requests still queued are not reached yet: the shares are of the 1,000 reached.
    const now = snapshot({ requestsDone: 4, requestsTotal: 10, promptTokens: 1500, promptReachedTokens: 1000, gpuHitTokens: 250, cpuTierHitTokens: 125 });
    const rates = { outputTokensPerSecond: 1234.4, gbpsGpuToCpu: 1.5, gbpsCpuToGpu: 0.25 };
    expect(formatProgressLine(now, rates, 12_340)).toBe(
      '[12.3s] requests 4/10 | 1,234 tok/s | hits GPU 25.0% CPU 12.5% | GPU->CPU 1.50 GB/s CPU->GPU 250.0 MB/s',
    );
  });

  it('names the run it belongs to when a command makes several', () => {
    const now = snapshot({ requestsDone: 1, requestsTotal: 10 });
    const rates = { outputTokensPerSecond: 0, gbpsGpuToCpu: 0, gbpsCpuToGpu: 0 };
    expect(formatProgressLine(now, rates, 1_000, 'offload off')).toMatch(/^\[offload off\] \[1\.0s\] requests 1\/10 \|/);
  });

  it('measures rates between two snapshots', () => {
    const before = snapshot({ outputTokens: 100, bytesGpuToCpu: 0, bytesCpuToGpu: 1e9 });
    const after = snapshot({ outputTokens: 600, bytesGpuToCpu: 4e9, bytesCpuToGpu: 2e9 });
    expect(ratesBetween(before, after, 2)).toEqual({ outputTokensPerSecond: 250, gbpsGpuToCpu: 2, gbpsCpuToGpu: 0.5 });
  });

  it('reads a snapshot from engine metrics', () => {
    const transfer = (bytes: number) => ({ jobs: 1, failedJobs: 0, bytes, busyMs: 1, copyJobs: 1 });
    const metrics: EngineMetrics = {
      steps: 5,
      preemptions: 0,
      requests: { added: 9, finished: 5, aborted: 1, failed: 2 },
      tokens: { prompt: 900, output: 80, prefillComputed: 300, recomputed: 0, promptReached: 900 },
      hits: { gpuPrefixTokens: 400, cpuTierTokens: 200 },
      rereads: { gpuPrefixTokens: 0, cpuTierTokens: 0 },
      transfers: { gpuToCpu: transfer(10), cpuToGpu: transfer(20) },
      loadFailures: { blocks: 0, requestsRecovered: 0 },
      storeFailures: 0,
      rankRestarts: 0,
      leaks: { gpuBlocks: 0, cpuBlocks: 0 },
      stepClock: { description: 'tiny on h100-sxm (NVIDIA H100 SXM 80GB, default)', modelledComputeMs: 0, forwardMs: 0 },
    };
    expect(snapshotFromMetrics(metrics, 12)).toEqual({
      requestsDone: 8, requestsTotal: 12, promptTokens: 900, promptReachedTokens: 900, outputTokens: 80, gpuHitTokens: 400, cpuTierHitTokens: 200, bytesGpuToCpu: 10, bytesCpuToGpu: 20,
    });
  });

  it('prints plain lines ending in newlines when the output is not a terminal', async () => {
    const out = capture(false);
    let done = 0;
    const progress = new ProgressLine({ snapshot: () => snapshot({ requestsDone: done }), stream: out.stream, plainIntervalSeconds: 0.05 });
    progress.start();
    done = 3;
    await until(() => out.text().includes('requests 3/10'));
    progress.stop();
    const lines = out.text().split('\n');
    expect(lines.at(-1)).toBe('');
    expect(lines.slice(0, -1).every((line) => /^\[\d+\.\ds\] requests \d+\/10 \|/.test(line))).toBe(true);
    expect(out.text()).not.toMatch(/\x1b/);
  });

  it('redraws one line in place on a terminal', async () => {
    const out = capture(true);
    let done = 0;
    const progress = new ProgressLine({ snapshot: () => snapshot({ requestsDone: done }), stream: out.stream });
    progress.start();
    done = 7;
    await until(() => out.text().includes('requests 7/10'));
    progress.stop();
    expect(out.text()).toMatch(/\x1b/);
    expect(out.text().split('\n').length).toBe(2);
  });
});
