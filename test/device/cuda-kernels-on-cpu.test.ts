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
 * The CUDA backend cannot run without a GPU, but its kernels can: the same
 * sources (native/src/cuda_model_kernels.cuh, cuda_copy_kernels.cuh) are
 * compiled for the CPU through a shim of the CUDA built-ins. The forward,
 * fed through the staged inputs path, must leave the cache and digests
 * exactly as the host backend's forward does, and the copy kernel must leave
 * the GPU buffer and the CPU tier exactly as the host backend's memcpy of
 * the same transfer plans (stores, loads from mid-block, poisoned blocks,
 * both layouts).
 */
describe.skipIf(!hasCxx20())('the CUDA kernels, run on the CPU', () => {
  it('write the same cache, digests and copied blocks as the host backend on random batches and jobs', async () => {
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
        join(native, 'src', 'forward_pack.cc'),
        join(native, 'src', 'transfer_plan.cc'),
        join(native, 'src', 'copy_descriptors.cc'),
        join(native, 'src', 'copy_method.cc'),
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
