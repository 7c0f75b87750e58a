// Checks the CUDA backend's kernels on the CPU, step by step:
//
// - the forward path (src/forward_pack.h, src/cuda_copy_kernels.cuh,
//   src/cuda_model_kernels.cuh): the batch packed into a staging image, staged
//   by the stage kernel, the model kernels, the digests published by their
//   kernel; the whole cache and the digests must equal the host backend's
//   forward (src/host_model.cc). Random batches over both layouts, several
//   ranks of tp, block sizes and head dims, prefix blocks shared inside one
//   batch, and a batch writing one slot twice.
// - the copy kernel (src/copy_descriptors.h, src/cuda_copy_kernels.cuh):
//   random store and load jobs over both layouts, offload factors 1 to 4,
//   CPU tiers of several chunks, loads starting mid-block (firstSubBlock),
//   poisoned blocks, segment sizes with and without 16-byte alignment, and
//   runs longer than one tile; the GPU buffer and the CPU tier must equal
//   what the host backend's memcpy of the same plan leaves.
//
//   g++ -std=c++20 -O1 -pthread -I. -I../../src kernel_check.cc
//     ../../src/{host_model,kv_geometry,forward_batch,forward_pack,transfer_plan,copy_descriptors,copy_method}.cc
//   ./a.out [--quick]
#include "cuda_cpu_shim.h"

#include "copy_descriptors.h"
#include "copy_method.h"
#include "cuda_kernels.cuh"
#include "forward_pack.h"
#include "host_model.h"
#include "poison.h"
#include "reference_model.h"
#include "transfer_plan.h"
#include "cuda_copy_kernels.cuh"
#include "cuda_model_kernels.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>

namespace kvtier {
namespace {

// 64-byte aligned, zeroed bytes (what cudaMalloc and cudaHostAlloc give at least).
struct Aligned {
  uint8_t* data = nullptr;
  size_t size = 0;
  explicit Aligned(size_t bytes) : size(bytes) {
    data = static_cast<uint8_t*>(std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) & ~size_t{63}));
    std::memset(data, 0, bytes);
  }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  ~Aligned() { std::free(data); }
};

// What CudaBackend::submitForward enqueues on the compute stream, on the CPU:
// the packed image in "mapped" memory, staged into "device" memory by the
// stage kernel, the model kernels, then the digests published to "mapped" memory.
std::vector<uint32_t> cpuForward(const KvGeometry& kv, uint32_t seed, uint16_t* cache, ForwardBatchData& b) {
  const ForwardLayout layout = layoutForward(b);
  Aligned mappedImage(layout.stagedBytes);
  Aligned device(layout.deviceBytes);
  Aligned mappedDigests(b.numRequests * sizeof(uint32_t));
  // Stale bytes where the kernels must not rely on zeros: the digests'
  // accumulators are zeroed by the staged image, not by the allocation.
  std::memset(device.data, 0xA5, layout.deviceBytes);
  packForward(layout, b, mappedImage.data);
  const DeviceForwardBatch d = bindForward(layout, device.data);
  cpuLaunch(stageGridSize(layout.stagedBytes), 256,
            [&] { stageKernel(device.data, mappedImage.data, layout.stagedBytes); });
  if (d.numTokens > 0) {
    cpuLaunch(1, 1, [&] { chainKernel(kv, seed, cache, d); });
    cpuLaunch(d.numTokens, kThreads, [&] { writeKernel(kv, cache, d); });
  }
  if (d.numPairs > 0) cpuLaunch(static_cast<unsigned>(d.numPairs), kThreads, [&] { digestKernel(kv, cache, d); });
  uint32_t* out = reinterpret_cast<uint32_t*>(mappedDigests.data);
  if (b.numRequests > 0) {
    cpuLaunch((b.numRequests + 255) / 256, 256, [&] { publishDigestsKernel(d.digests, out, b.numRequests); });
  }
  return std::vector<uint32_t>(out, out + b.numRequests);
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

// The GPU buffer and the CPU tier's chunks of one device, as plain memory.
struct TierMemory {
  Aligned gpu;
  std::vector<std::unique_ptr<Aligned>> chunks;
  std::vector<uint8_t*> chunkData;

  TierMemory(const DeviceGeometry& g, std::mt19937& rng) : gpu(g.gpuBytes) {
    for (uint64_t k = 0; k < g.cpu.numChunks; k++) {
      chunks.push_back(std::make_unique<Aligned>(g.cpu.chunkBytes(k)));
      chunkData.push_back(chunks.back()->data);
    }
    fill(gpu, rng);
    for (auto& chunk : chunks) fill(*chunk, rng);
  }
  static void fill(Aligned& a, std::mt19937& rng) {
    for (size_t i = 0; i < a.size; i++) a.data[i] = static_cast<uint8_t>(rng());
  }
  void copyFrom(const TierMemory& o) {
    std::memcpy(gpu.data, o.gpu.data, gpu.size);
    for (size_t k = 0; k < chunks.size(); k++) std::memcpy(chunks[k]->data, o.chunks[k]->data, chunks[k]->size);
  }
  bool operator==(const TierMemory& o) const {
    if (std::memcmp(gpu.data, o.gpu.data, gpu.size) != 0) return false;
    for (size_t k = 0; k < chunks.size(); k++) {
      if (std::memcmp(chunks[k]->data, o.chunks[k]->data, chunks[k]->size) != 0) return false;
    }
    return true;
  }
};

// What HostBackend::runTransfer does with a plan.
void memcpyPlan(const TransferPlan& plan, bool store, TierMemory& m) {
  for (const CopyRegion& r : plan.copies) {
    uint8_t* gpu = m.gpu.data + r.gpuOffset;
    uint8_t* cpu = m.chunkData[r.cpuChunk] + r.cpuOffset;
    std::memcpy(store ? cpu : gpu, store ? gpu : cpu, r.bytes);
  }
  for (const CopyRegion& r : plan.poison) {
    fillPoison(store ? m.chunkData[r.cpuChunk] + r.cpuOffset : m.gpu.data + r.gpuOffset, r.bytes);
  }
}

// What CudaBackend enqueues for a job run by the copy kernel: the tile list
// in "mapped" memory, then one copy kernel of copyGridSize CTAs.
void kernelPlan(const TransferPlan& plan, bool store, const uint8_t* poison, TierMemory& m) {
  std::vector<CopyDescriptor> tiles;
  appendCopyDescriptors(plan, store, CopyEndpoints{m.gpu.data, &m.chunkData, poison}, tiles);
  orderTilesLargestFirst(tiles);
  Aligned mapped(tiles.size() * sizeof(CopyDescriptor));
  std::memcpy(mapped.data, tiles.data(), mapped.size);
  const auto* list = reinterpret_cast<const CopyDescriptor*>(mapped.data);
  const uint64_t n = tiles.size();
  if (n > 0) cpuLaunch(copyGridSize(n), kCopyThreads, [&] { copyKernel(list, n); });
}

// `count` distinct ids below `limit`: a consecutive run from a random start
// (what the device coalesces), or a random sample.
std::vector<int32_t> pickIds(std::mt19937& rng, size_t count, uint64_t limit) {
  std::vector<int32_t> ids(limit);
  std::iota(ids.begin(), ids.end(), 0);
  if (rng() % 2 == 0) {
    const size_t start = rng() % (limit - count + 1);
    return std::vector<int32_t>(ids.begin() + start, ids.begin() + start + count);
  }
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(count);
  return ids;
}

struct CopyCase {
  KvLayout layout;
  uint32_t tp, blockSize, headDim;
  uint64_t offloadFactor;
  uint32_t cpuBlocks = 10;       // the GPU has this many + 14 blocks
  uint32_t maxCpuPerJob = 4;
};

// Random store and load jobs, each run by the copy kernel on one copy of the
// memory and by memcpy on another; both copies must stay equal.
void copyJobs(const CopyCase& k, int jobs, std::mt19937& rng, Tally& tally) {
  DeviceConfig c = configOf(k.layout, k.tp, k.blockSize, k.headDim, k.cpuBlocks + 14);
  c.offloadFactor = k.offloadFactor;
  c.numCpuBlocks = k.cpuBlocks;
  c.model.kvHeads = 4;
  const DeviceGeometry g0 = makeDeviceGeometry(c);
  c.cpuChunkBytes = 3 * g0.bytesPerCpuBlock;  // several chunks: runs must split at chunk ends
  const DeviceGeometry g = makeDeviceGeometry(c);
  tally.configs++;
  TierMemory expected(g, rng);
  TierMemory got(g, rng);
  got.copyFrom(expected);
  std::vector<uint8_t> poison(g.kv.segmentBytes());
  fillPoison(poison.data(), poison.size());
  const uint64_t f = k.offloadFactor;
  char what[160];
  for (int j = 0; j < jobs; j++) {
    const bool store = rng() % 2 == 0;
    const size_t cpuCount = 1 + rng() % k.maxCpuPerJob;
    const std::vector<int32_t> cpuIds = pickIds(rng, cpuCount, g.cpu.numCpuBlocks);
    const uint32_t first = store ? 0 : static_cast<uint32_t>(rng() % f);
    const size_t gpuCount = cpuCount * f - first;
    const std::vector<int32_t> gpuIds = pickIds(rng, gpuCount, g.kv.numGpuBlocks);
    std::vector<uint8_t> poisoned(gpuCount);
    for (auto& p : poisoned) p = rng() % 6 == 0;
    const TransferRequest request{store ? Direction::GpuToCpu : Direction::CpuToGpu, gpuIds.data(), gpuCount,
                                  cpuIds.data(), cpuCount, first};
    validateTransfer(g, request);
    const TransferPlan plan = planTransfer(g, request, poisoned);
    memcpyPlan(plan, store, expected);
    kernelPlan(plan, store, poison.data(), got);
    tally.steps++;
    if (!(expected == got)) {
      tally.mismatches++;
      std::snprintf(what, sizeof what, "layout=%d tp=%u blockSize=%u headDim=%u offloadFactor=%u job=%d %s first=%u",
                    static_cast<int>(k.layout), k.tp, k.blockSize, k.headDim, static_cast<unsigned>(f), j,
                    store ? "store" : "load", first);
      std::printf("MISMATCH copy kernel %s\n", what);
      got.copyFrom(expected);
    }
  }
}

// `auto` follows the mean region size; explicit choices pass through; the
// copy and stage kernels' grids stay bounded.
void copyMethodChoice(Tally& tally) {
  auto planOf = [](std::vector<uint64_t> sizes) {
    TransferPlan p;
    for (uint64_t bytes : sizes) p.copies.push_back(CopyRegion{0, 0, 0, bytes});
    return p;
  };
  const struct {
    CopyMethod requested;
    TransferPlan plan;
    CopyMethod want;
  } cases[] = {
      {CopyMethod::Auto, planOf({4096, 4096}), CopyMethod::Kernel},
      {CopyMethod::Auto, planOf({kDmaMinRegionBytes - 16}), CopyMethod::Kernel},
      {CopyMethod::Auto, planOf({kDmaMinRegionBytes}), CopyMethod::Dma},
      {CopyMethod::Auto, planOf({}), CopyMethod::Kernel},
      {CopyMethod::Kernel, planOf({64ull << 20}), CopyMethod::Kernel},
      {CopyMethod::Dma, planOf({1024}), CopyMethod::Dma},
  };
  // The copy kernel never takes more than kMaxCopyCtas CTAs, whatever the job.
  const struct {
    unsigned got, want;
  } grids[] = {
      {copyGridSize(0), 1},          {copyGridSize(8), 1}, {copyGridSize(9), 2}, {copyGridSize(1ull << 20), kMaxCopyCtas},
      {stageGridSize(1ull << 30), 32}};
  for (const auto& g : grids) {
    tally.steps++;
    if (g.got != g.want || kMaxCopyCtas != 12) {
      tally.mismatches++;
      std::printf("MISMATCH grid: %u CTAs, expected %u\n", g.got, g.want);
    }
  }
  for (const auto& c : cases) {
    tally.steps++;
    if (chooseCopyMethod(c.requested, c.plan, false) != c.want) {
      tally.mismatches++;
      std::printf("MISMATCH copy method: %s chose %s\n", copyMethodName(c.requested),
                  copyMethodName(chooseCopyMethod(c.requested, c.plan, false)));
    }
  }
}

// Tiles go out largest first: full tiles, then partial ones by size, none
// lost or changed.
void tileOrder(std::mt19937& rng, Tally& tally) {
  std::vector<CopyDescriptor> tiles;
  for (uint64_t region = 0; region < 200; region++) {
    const uint64_t bytes = 1 + rng() % (3 * kCopyTileBytes);
    appendRange(reinterpret_cast<const void*>(region << 32), reinterpret_cast<void*>((region << 32) + (1ull << 31)),
                bytes, tiles);
  }
  std::vector<CopyDescriptor> ordered = tiles;
  orderTilesLargestFirst(ordered);
  auto key = [](const CopyDescriptor& t) { return std::make_tuple(t.src, t.dst, t.bytes); };
  auto sorted = [&](std::vector<CopyDescriptor> v) {
    std::sort(v.begin(), v.end(), [&](const CopyDescriptor& a, const CopyDescriptor& b) { return key(a) < key(b); });
    return v;
  };
  bool ok = ordered.size() == tiles.size();
  for (size_t i = 1; ok && i < ordered.size(); i++) ok = ordered[i - 1].bytes >= ordered[i].bytes;
  const std::vector<CopyDescriptor> a = sorted(tiles);
  const std::vector<CopyDescriptor> b = sorted(ordered);
  for (size_t i = 0; ok && i < a.size(); i++) ok = key(a[i]) == key(b[i]);
  tally.steps++;
  if (!ok) {
    tally.mismatches++;
    std::printf("MISMATCH tile order: not largest first, or tiles changed\n");
  }
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
  // Segments of 180/60 bytes (odd head dim: 4-byte copies), of 96/32 bytes
  // (16-byte copies, offload factor 3), and of 48/16 KiB (runs of several tiles).
  std::vector<CopyCase> copyCases;
  for (KvLayout layout : {KvLayout::CrossLayer, KvLayout::PerLayer}) {
    copyCases.push_back({layout, 4, 3, 5, 1});
    copyCases.push_back({layout, 2, 2, 2, 3});
    copyCases.push_back({layout, 1, 16, 64, 4});
    if (!quick) copyCases.push_back({layout, 1, 4, 8, 2});
  }
  // Jobs of up to 300 blocks, in three layers: more tiles than the grid has
  // warps, so warps loop and prefetch their next descriptor.
  copyCases.push_back({KvLayout::PerLayer, 1, 3, 8, 1, 400, 300});
  for (const CopyCase& k : copyCases) copyJobs(k, quick ? 4 : 20, rng, tally);
  copyMethodChoice(tally);
  tileOrder(rng, tally);
  std::printf("%d configs, %d steps, %d mismatches\n", tally.configs, tally.steps, tally.mismatches);
  return tally.mismatches == 0 ? 0 : 1;
}
