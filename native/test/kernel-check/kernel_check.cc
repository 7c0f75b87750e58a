// Checks the CUDA backend's model kernels (src/cuda_model_kernels.cuh) on the
// CPU against the host backend's forward (src/host_model.cc), step by step:
// the whole cache and the digests must be equal. Random batches over both
// layouts, several ranks of tp, block sizes and head dims, prefix blocks
// shared inside one batch, and a batch writing one slot twice.
//
//   g++ -std=c++20 -O1 -pthread -I. -I../../src kernel_check.cc ../../src/{host_model,kv_geometry,forward_batch}.cc
//   ./a.out [--quick]
#include "cuda_cpu_shim.h"

#include "cuda_kernels.cuh"
#include "host_model.h"
#include "reference_model.h"
#include "cuda_model_kernels.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

namespace kvtier {
namespace {

// What CudaBackend packs for a forward and what launchForward launches, on the CPU.
std::vector<uint32_t> cpuForward(const KvGeometry& kv, uint32_t seed, uint16_t* cache, ForwardBatchData& b) {
  std::vector<int32_t> sampled;
  std::vector<int64_t> pairOffsets{0};
  for (uint32_t r = 0; r < b.numRequests; r++) {
    if (!b.sample[r]) continue;
    sampled.push_back(static_cast<int32_t>(r));
    pairOffsets.push_back(pairOffsets.back() + b.contextEnd(r));
  }
  const size_t numTokens = b.numTokens();
  std::vector<uint32_t> blocks(numTokens), slots(numTokens), digests(b.numRequests, 0);
  DeviceForwardBatch d{};
  d.numRequests = b.numRequests;
  d.numTokens = static_cast<uint32_t>(numTokens);
  d.numSampled = static_cast<uint32_t>(sampled.size());
  d.numPairs = static_cast<uint64_t>(pairOffsets.back());
  d.blockTableOffsets = b.blockTableOffsets.data();
  d.blockTables = b.blockTables.data();
  d.startPositions = b.startPositions.data();
  d.tokenOffsets = b.tokenOffsets.data();
  d.tokens = b.tokens.data();
  d.sampledRequests = sampled.data();
  d.pairOffsets = pairOffsets.data();
  d.tokenBlocks = blocks.data();
  d.tokenSlots = slots.data();
  d.digests = digests.data();
  if (d.numTokens > 0) {
    cpuLaunch(1, 1, [&] { chainKernel(kv, seed, cache, d); });
    cpuLaunch(d.numTokens, kThreads, [&] { writeKernel(kv, cache, d); });
  }
  if (d.numPairs > 0) cpuLaunch(static_cast<unsigned>(d.numPairs), kThreads, [&] { digestKernel(kv, cache, d); });
  return digests;
}

DeviceConfig configOf(KvLayout layout, uint32_t tp, uint32_t blockSize, uint32_t headDim, uint32_t numGpuBlocks) {
  DeviceConfig c;
  c.tp = tp;
  c.rank = tp - 1;  // the last rank: its heads start past 0
  c.blockSize = blockSize;
  c.layout = layout;
  c.model.layers = 3;
  c.model.kvHeads = 4;
  c.model.headDim = headDim;
  c.model.vocabSize = 1000;
  c.model.modelSeed = 0xC0FFEE + tp;
  c.numGpuBlocks = numGpuBlocks;
  c.numCpuBlocks = 0;
  c.offloadFactor = 1;
  return c;
}

struct Tally {
  int configs = 0;
  int steps = 0;
  int mismatches = 0;
};

void compare(const DeviceGeometry& g, uint32_t seed, ForwardBatchData& b, std::vector<uint16_t>& hostCache,
             std::vector<uint16_t>& cpuCache, Tally& tally, const char* what) {
  validateForwardBatch(g.kv, 1000, b);
  const auto want = runHostForward(g.kv, seed, hostCache.data(), b);
  const auto got = cpuForward(g.kv, seed, cpuCache.data(), b);
  tally.steps++;
  if (want != got || hostCache != cpuCache) {
    tally.mismatches++;
    std::printf("MISMATCH %s: digests %s, cache %s\n", what, want == got ? "equal" : "differ",
                hostCache == cpuCache ? "equal" : "differs");
  }
}

// Three requests prefilled in random chunks; requests 0 and 1 share their first blocks.
void randomBatches(KvLayout layout, uint32_t tp, uint32_t bs, uint32_t D, std::mt19937& rng, Tally& tally) {
  const DeviceConfig c = configOf(layout, tp, bs, D, 80);
  const DeviceGeometry g = makeDeviceGeometry(c);
  std::vector<uint16_t> hostCache(g.gpuBytes / 2), cpuCache(g.gpuBytes / 2);
  tally.configs++;
  const uint32_t shared = 2;
  std::vector<std::vector<int32_t>> tokens(3), tables(3);
  std::vector<uint32_t> done(3, 0);
  int32_t nextBlock = 0;
  for (auto& t : tokens) {
    const uint32_t len = 8 + rng() % 12;
    for (uint32_t i = 0; i < len; i++) t.push_back(static_cast<int32_t>(rng() % 1000));
  }
  for (uint32_t i = 0; i < shared * bs; i++) tokens[1][i] = tokens[0][i];
  for (int r = 0; r < 3; r++) {
    for (uint32_t k = 0; k < (tokens[r].size() + bs - 1) / bs; k++) {
      tables[r].push_back(r == 1 && k < shared ? tables[0][k] : nextBlock++);
    }
  }
  done[1] = shared * bs;  // request 1 starts after the shared prefix
  char what[96];
  for (int step = 0; step < 12; step++) {
    ForwardBatchData b;
    b.blockTableOffsets.push_back(0);
    b.tokenOffsets.push_back(0);
    for (int r = 0; r < 3; r++) {
      if (done[r] >= tokens[r].size()) continue;
      if (r == 1 && done[0] < shared * bs) continue;  // its prefix is not written yet
      const uint32_t n = std::min<uint32_t>(1 + rng() % 6, static_cast<uint32_t>(tokens[r].size()) - done[r]);
      b.startPositions.push_back(static_cast<int32_t>(done[r]));
      for (uint32_t i = 0; i < n; i++) b.tokens.push_back(tokens[r][done[r] + i]);
      b.tokenOffsets.push_back(static_cast<int32_t>(b.tokens.size()));
      b.blockTables.insert(b.blockTables.end(), tables[r].begin(), tables[r].end());
      b.blockTableOffsets.push_back(static_cast<int32_t>(b.blockTables.size()));
      b.sample.push_back(static_cast<uint8_t>(rng() % 2));
      done[r] += n;
      b.numRequests++;
    }
    if (b.numRequests == 0) break;
    std::snprintf(what, sizeof what, "layout=%d tp=%u blockSize=%u headDim=%u step=%d", static_cast<int>(layout), tp,
                  bs, D, step);
    compare(g, c.model.modelSeed, b, hostCache, cpuCache, tally, what);
  }
}

// Two requests of one batch writing the same slots (the scheduler never builds
// such a batch): the host backend keeps the last write, so must the kernels.
void duplicateSlots(KvLayout layout, Tally& tally) {
  const DeviceConfig c = configOf(layout, 2, 4, 3, 8);
  const DeviceGeometry g = makeDeviceGeometry(c);
  std::vector<uint16_t> hostCache(g.gpuBytes / 2), cpuCache(g.gpuBytes / 2);
  ForwardBatchData b;
  b.numRequests = 2;
  b.blockTableOffsets = {0, 2, 4};
  b.blockTables = {3, 5, 3, 5};
  b.startPositions = {0, 2};
  b.tokenOffsets = {0, 6, 10};
  b.tokens = {1, 2, 3, 4, 5, 6, 9, 8, 7, 6};
  b.sample = {1, 1};
  compare(g, c.model.modelSeed, b, hostCache, cpuCache, tally, "duplicate slots");
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  using namespace kvtier;
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::mt19937 rng(12345);
  Tally tally;
  const std::vector<uint32_t> tps = quick ? std::vector<uint32_t>{1, 4} : std::vector<uint32_t>{1, 2, 4};
  const std::vector<uint32_t> blockSizes = quick ? std::vector<uint32_t>{3} : std::vector<uint32_t>{1, 3, 4};
  const std::vector<uint32_t> headDims = quick ? std::vector<uint32_t>{5} : std::vector<uint32_t>{2, 5};
  for (KvLayout layout : {KvLayout::CrossLayer, KvLayout::PerLayer}) {
    for (uint32_t tp : tps)
      for (uint32_t bs : blockSizes)
        for (uint32_t D : headDims) randomBatches(layout, tp, bs, D, rng, tally);
    duplicateSlots(layout, tally);
  }
  std::printf("%d configs, %d steps, %d mismatches\n", tally.configs, tally.steps, tally.mismatches);
  return tally.mismatches == 0 ? 0 : 1;
}
