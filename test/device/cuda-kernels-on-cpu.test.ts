import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/core/package-root.js';

const run = promisify(execFile);

function hasCxx20(): boolean {
  try {
    execFileSync('g++', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * The CUDA backend cannot run without a GPU, but its model kernels can: the
 * same source (native/src/cuda_model_kernels.cuh) is compiled for the CPU
 * through a shim of the CUDA built-ins and must leave the cache and digests
 * exactly as the host backend's forward does.
 */
describe.skipIf(!hasCxx20())('the CUDA model kernels, run on the CPU', () => {
  it('write the same cache and digests as the host backend on random batches', async () => {
    const native = join(packageRoot(), 'native');
    const dir = mkdtempSync(join(tmpdir(), 'kvtier-kernel-check-'));
    try {
      const binary = join(dir, 'kernel_check');
      await run('g++', [
        '-std=c++20',
        '-O1',
        '-pthread',
        `-I${join(native, 'test', 'kernel-check')}`,
        `-I${join(native, 'src')}`,
        join(native, 'test', 'kernel-check', 'kernel_check.cc'),
        join(native, 'src', 'host_model.cc'),
        join(native, 'src', 'kv_geometry.cc'),
        join(native, 'src', 'forward_batch.cc'),
        '-o',
        binary,
      ]);
      const { stdout } = await run(binary, ['--quick']);
      expect(stdout).toMatch(/\b0 mismatches\b/);
      expect(stdout).not.toMatch(/MISMATCH/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
