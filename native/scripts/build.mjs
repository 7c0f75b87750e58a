#!/usr/bin/env node
// Builds kvtier's native addons with node-gyp, offline: Node's headers come
// from the local install (npm's nodedir, or the include/ beside this node).
//
//   kvtier_host  always
//   kvtier_cuda  too where it can run or when asked: a GPU is present
//                (`nvidia-smi -L` lists one, or /dev/nvidia0 exists), or
//                KVTIER_BUILD_CUDA=1, or --require-cuda; and nvcc is found
//                ($CUDA_HOME/bin, /usr/local/cuda/bin, PATH). nvcc alone is
//                not enough: compiling the CUDA addon takes minutes, which an
//                install on a machine without a GPU should not pay.
//                KVTIER_BUILD_CUDA=0 (or KVTIER_NO_CUDA=1) never builds it.
//
// A failing CUDA build only warns, so users without a working toolkit can
// still install. `--require-cuda` makes a missing nvcc or a failing CUDA
// build an error (the compile check CI runs).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, realpathSync, rmSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const nativeDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const releaseDir = path.join(nativeDir, 'build', 'Release');
const requireCuda = process.argv.includes('--require-cuda');
const skipCuda = process.env.KVTIER_NO_CUDA === '1' || process.env.KVTIER_BUILD_CUDA === '0';
const askedForCuda = requireCuda || process.env.KVTIER_BUILD_CUDA === '1';

function log(message) {
  process.stdout.write(`kvtier native: ${message}\n`);
}

function fail(message) {
  process.stderr.write(`kvtier native: error: ${message}\n`);
  process.exit(1);
}

function findNodeGyp() {
  const candidates = [];
  if (process.env.npm_config_node_gyp) candidates.push(process.env.npm_config_node_gyp);
  try {
    candidates.push(createRequire(path.join(nativeDir, 'package.json')).resolve('node-gyp/bin/node-gyp.js'));
  } catch {
    // not installed locally; npm ships one
  }
  const prefix = path.resolve(path.dirname(process.execPath), '..');
  candidates.push(path.join(prefix, 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
  return candidates.find((file) => existsSync(file)) ?? null;
}

function findNodeHeaders() {
  const candidates = [process.env.npm_config_nodedir, path.resolve(path.dirname(process.execPath), '..')];
  return candidates.find((dir) => dir && existsSync(path.join(dir, 'include', 'node', 'node_api.h'))) ?? null;
}

function findOnPath(name) {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  return null;
}

// A GPU this machine could run the CUDA addon on: the driver lists one, or its device node exists.
function gpuPresent() {
  if (existsSync('/dev/nvidia0')) return true;
  const listed = spawnSync('nvidia-smi', ['-L'], { encoding: 'utf8', timeout: 15_000 });
  return listed.status === 0 && /^GPU \d+/m.test(listed.stdout ?? '');
}

function findNvcc() {
  const candidates = [
    process.env.CUDA_HOME && path.join(process.env.CUDA_HOME, 'bin', 'nvcc'),
    '/usr/local/cuda/bin/nvcc',
    findOnPath('nvcc'),
  ];
  return candidates.find((file) => file && existsSync(file)) ?? null;
}

// The toolkit root as nvcc itself reports it (nvcc on PATH may be a wrapper
// script outside the toolkit), with the usual locations as fallbacks.
function cudaRoots(nvcc) {
  const roots = [];
  if (process.env.CUDA_HOME) roots.push(process.env.CUDA_HOME);
  const dryRun = spawnSync(nvcc, ['--dryrun', '-c', '-x', 'cu', '/dev/null', '-o', '/dev/null'], { encoding: 'utf8' });
  const top = /^#\$ TOP=(.*)$/m.exec(`${dryRun.stdout ?? ''}${dryRun.stderr ?? ''}`);
  if (top) roots.push(top[1].trim());
  roots.push(path.resolve(path.dirname(realpathSync(nvcc)), '..'), '/usr/local/cuda');
  return roots;
}

function findCudaToolkit(nvcc) {
  const arch = process.arch === 'arm64' ? 'sbsa-linux' : 'x86_64-linux';
  for (const root of cudaRoots(nvcc)) {
    const include = [path.join(root, 'include'), path.join(root, 'targets', arch, 'include')].find((dir) =>
      existsSync(path.join(dir, 'cuda_runtime.h')),
    );
    const cudart = [
      path.join(root, 'lib64', 'libcudart_static.a'),
      path.join(root, 'lib', 'libcudart_static.a'),
      path.join(root, 'targets', arch, 'lib', 'libcudart_static.a'),
    ].find((file) => existsSync(file));
    if (include && cudart) return { nvcc, include: realpathSync(include), cudart: realpathSync(cudart) };
  }
  return null;
}

function quoteDefine(name, value) {
  return `${name}='${String(value).replace(/'/g, "'\\''")}'`;
}

function runNodeGyp(nodeGyp, nodedir, defines) {
  const args = [nodeGyp, 'rebuild', `--jobs=${os.availableParallelism()}`];
  if (nodedir) args.push(`--nodedir=${nodedir}`);
  const result = spawnSync(process.execPath, args, {
    cwd: nativeDir,
    stdio: 'inherit',
    env: { ...process.env, GYP_DEFINES: defines.join(' ') },
  });
  return result.status === 0;
}

// Loading the addon in a fresh process proves it links (no missing symbols).
function loads(addonFile) {
  const probe = `const a = require(${JSON.stringify(addonFile)}); if (typeof a.Device !== 'function') process.exit(2); a.cudaDeviceCount();`;
  const result = spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8' });
  if (result.status !== 0) log(`${path.basename(addonFile)} does not load: ${(result.stderr ?? '').trim()}`);
  return result.status === 0;
}

// Two builds in one tree at once (parallel installs) would wreck each other's
// object files: the second waits for the first.
function processAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function sleepSync(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function acquireBuildLock() {
  const tag = createHash('sha1').update(nativeDir).digest('hex').slice(0, 12);
  const lockFile = path.join(os.tmpdir(), `kvtier-native-build-${tag}.lock`);
  for (let waited = 0; ; waited++) {
    try {
      const fd = openSync(lockFile, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      process.on('exit', () => rmSync(lockFile, { force: true }));
      return;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
    }
    let holder = Number.NaN;
    try {
      holder = Number.parseInt(readFileSync(lockFile, 'utf8'), 10);
    } catch {
      continue; // released meanwhile
    }
    if (!Number.isInteger(holder) || !processAlive(holder)) {
      rmSync(lockFile, { force: true });
      continue;
    }
    if (waited === 0) log(`waiting for another build (pid ${holder}) to finish`);
    sleepSync(1000);
  }
}

acquireBuildLock();
const nodeGyp = findNodeGyp();
if (!nodeGyp) fail('node-gyp not found (it ships with npm); install npm or node-gyp');
const nodedir = findNodeHeaders();
if (!nodedir) log('no local Node headers found; node-gyp will fetch them');

if (requireCuda && skipCuda) fail('--require-cuda conflicts with KVTIER_NO_CUDA=1 / KVTIER_BUILD_CUDA=0');
const wantCuda = !skipCuda && (askedForCuda || gpuPresent());
const nvcc = wantCuda ? findNvcc() : null;
if (!skipCuda && !wantCuda && findNvcc()) {
  log('nvcc found but no GPU here: building the host addon only (KVTIER_BUILD_CUDA=1 builds the CUDA addon too)');
}
if (requireCuda && !nvcc) fail('--require-cuda: nvcc not found ($CUDA_HOME/bin, /usr/local/cuda/bin or PATH)');
const toolkit = nvcc ? findCudaToolkit(nvcc) : null;
if (nvcc && !toolkit) {
  if (requireCuda) fail(`--require-cuda: found ${nvcc} but not cuda_runtime.h and libcudart_static.a beside it`);
  log(`warning: found ${nvcc} but not cuda_runtime.h and libcudart_static.a; building the host addon only`);
}

if (toolkit) {
  log(`building kvtier_host and kvtier_cuda (nvcc: ${toolkit.nvcc})`);
  const defines = [
    'kvtier_cuda=1',
    quoteDefine('kvtier_nvcc', toolkit.nvcc),
    quoteDefine('kvtier_cuda_include', toolkit.include),
    quoteDefine('kvtier_cudart_static', toolkit.cudart),
  ];
  const built = runNodeGyp(nodeGyp, nodedir, defines);
  const cudaLoads = built && loads(path.join(releaseDir, 'kvtier_cuda.node'));
  if (built && cudaLoads && loads(path.join(releaseDir, 'kvtier_host.node'))) {
    log('built kvtier_host.node and kvtier_cuda.node');
    process.exit(0);
  }
  if (requireCuda) fail('--require-cuda: the CUDA build failed (see the output above)');
  log('warning: the CUDA build failed; building the host addon only (the cuda backend will be unavailable)');
} else if (wantCuda && !requireCuda) {
  log('nvcc not found; building the host addon only');
}

if (!runNodeGyp(nodeGyp, nodedir, ['kvtier_cuda=0'])) fail('the host addon failed to build (see the output above)');
if (!loads(path.join(releaseDir, 'kvtier_host.node'))) fail('kvtier_host.node was built but does not load');
log('built kvtier_host.node');
