import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { addonPath } from '../../src/device/native.js';
import { TINY_NO_COMPUTE } from './helpers.js';

const WORKER = new URL('./fixtures/device-worker.mjs', import.meta.url);

interface WorkerRun {
  readonly worker: Worker;
  readonly messages: string[];
  readonly exit: Promise<number>;
}

function startWorker(mode: 'churn' | 'busy' | 'idle' | 'forever', extra: Record<string, unknown> = {}): WorkerRun {
  const worker = new Worker(WORKER, {
    workerData: { addonPath: addonPath('host'), model: TINY_NO_COMPUTE, mode, ...extra },
  });
  const messages: string[] = [];
  worker.on('message', (m: string) => messages.push(m));
  const exit = new Promise<number>((resolve, reject) => {
    worker.on('error', reject);
    worker.on('exit', resolve);
  });
  return { worker, messages, exit };
}

function firstMessage(run: WorkerRun): Promise<string> {
  return new Promise((resolve, reject) => {
    run.worker.once('message', resolve);
    run.exit.then((code) => reject(new Error(`worker exited with ${code} before sending a message`)), reject);
  });
}

describe('devices in worker threads', () => {
  it('many devices opened and closed in several workers at once all finish cleanly', async () => {
    const runs = Array.from({ length: 3 }, () => startWorker('churn', { rounds: 20 }));
    const codes = await Promise.all(runs.map((r) => r.exit));
    expect(codes).toEqual([0, 0, 0]);
    expect(runs.map((r) => r.messages)).toEqual([['done'], ['done'], ['done']]);
  });

  it('terminating a worker mid-transfer and mid-forward leaves the process and later workers healthy', async () => {
    for (let attempt = 0; attempt < 2; attempt++) {
      const run = startWorker('busy');
      expect(await firstMessage(run)).toBe('busy');
      await run.worker.terminate();
      expect(await run.exit).toBe(1);
    }
    const after = startWorker('churn', { rounds: 3 });
    expect(await after.exit).toBe(0);
    expect(after.messages).toEqual(['done']);
  });

  it('terminating workers at arbitrary points of their device use never crashes the process', async () => {
    for (const delayMs of [0, 1, 3, 10, 30, 60]) {
      const run = startWorker('forever');
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      await run.worker.terminate();
      // 1 once the worker's script was running; 0 if stopped before it started.
      expect([0, 1], `terminated after ${delayMs} ms`).toContain(await run.exit);
    }
  });

  it('a worker that ends with a device still open exits on its own', async () => {
    const run = startWorker('idle');
    expect(await run.exit).toBe(0);
    expect(run.messages).toEqual(['idle']);
  });
});
