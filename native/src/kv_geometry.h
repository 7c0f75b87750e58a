// Where every KV element and every block lives, in the GPU buffer and in the
// CPU tier, for both layouts. The canonical block image is
// [layer][k 2][local head][slot][dim] of uint16.
#pragma once

#include <cstdint>
#include <string>

#include "copy_method.h"
#include "reference_model.h"

namespace kvtier {

enum class KvLayout { CrossLayer, PerLayer };

struct ModelConfig {
  std::string name;
  uint32_t layers = 0;
  uint32_t kvHeads = 0;
  uint32_t headDim = 0;
  uint32_t vocabSize = 0;
  uint32_t modelSeed = 0;
  uint64_t computeNsPerToken = 0;
};

// The host backend's model of a GPU's host link: a transfer job completes no
// sooner than its latency, its regions' overhead and its bytes over the rate
// (the one-way rate, or half the two-way rate while the other direction runs).
// Off (oneWayBytesPerSecond 0): jobs complete when their memcpy does.
struct HostLink {
  double oneWayBytesPerSecond = 0;
  double bothWaysBytesPerSecond = 0;
  double jobLatencyNs = 0;
  double regionOverheadNs = 0;
  bool enabled() const { return oneWayBytesPerSecond > 0; }
};

struct DeviceConfig {
  std::string backend;  // "host" or "cuda"
  uint32_t rank = 0;
  uint32_t tp = 1;
  uint32_t deviceIndex = 0;
  ModelConfig model;
  uint32_t blockSize = 0;
  KvLayout layout = KvLayout::CrossLayer;
  uint64_t numGpuBlocks = 0;
  uint64_t numCpuBlocks = 0;
  uint64_t offloadFactor = 1;
  uint64_t cpuChunkBytes = 0;  // 0: the default (1 GiB, or one CPU block if larger)
  // CUDA: DMA or the copy kernel for transfer jobs. The host backend copies
  // with memcpy whatever it says.
  CopyMethod copyMethod = CopyMethod::Auto;
  HostLink hostLink;
};

// GPU-side geometry. Plain data so CUDA kernels take it by value.
struct KvGeometry {
  uint32_t layers;
  uint32_t kvHeads;     // global heads H
  uint32_t headDim;
  uint32_t blockSize;
  uint32_t localHeads;  // Hr = H / tp
  uint32_t firstHead;   // rank * Hr
  uint32_t segments;    // regions per block: 1 (cross-layer) or layers (per-layer)
  uint64_t numGpuBlocks;
  uint64_t elementsPerToken;  // this rank's elements of one position
  uint64_t imageElements;     // one block's canonical image
  uint64_t segmentElements;   // imageElements / segments

  KVTIER_HD uint64_t imageBytes() const { return imageElements * 2; }
  KVTIER_HD uint64_t segmentBytes() const { return segmentElements * 2; }

  // Byte offset in the GPU buffer of region `segment` of `block`.
  KVTIER_HD uint64_t segmentByteOffset(uint64_t block, uint32_t segment) const {
    return (static_cast<uint64_t>(segment) * numGpuBlocks + block) * segmentBytes();
  }

  // Index (in uint16 units) in the GPU buffer of one element.
  KVTIER_HD uint64_t elementIndex(uint64_t block, uint32_t layer, uint32_t k, uint32_t localHead, uint32_t slot,
                                  uint32_t dim) const {
    const uint64_t image =
        (((static_cast<uint64_t>(layer) * 2 + k) * localHeads + localHead) * blockSize + slot) * headDim + dim;
    const uint32_t segment = segments == 1 ? 0 : layer;
    return (static_cast<uint64_t>(segment) * numGpuBlocks + block) * segmentElements +
           (image - static_cast<uint64_t>(segment) * segmentElements);
  }
};

// CPU tier geometry: CPU block c holds sub-blocks c*f .. c*f+f-1, chunks hold
// whole CPU blocks, and inside a chunk each region (segment) of all its
// sub-blocks is contiguous, mirroring the GPU layout.
struct CpuTierGeometry {
  uint64_t numCpuBlocks;
  uint64_t offloadFactor;
  uint64_t cpuBlocksPerChunk;
  uint64_t numChunks;
  uint32_t segments;
  uint64_t segmentBytes;

  struct Location {
    uint32_t chunk;
    uint64_t offset;
  };

  uint64_t chunkCpuBlocks(uint64_t chunk) const;
  uint64_t chunkBytes(uint64_t chunk) const;
  uint64_t totalBytes() const;
  // Where region `segment` of sub-block `subBlock` lives.
  Location locate(uint64_t subBlock, uint32_t segment) const;
};

struct DeviceGeometry {
  KvGeometry kv;
  CpuTierGeometry cpu;
  uint64_t bytesPerGpuBlock;
  uint64_t bytesPerCpuBlock;
  uint64_t gpuBytes;
  uint64_t cpuBytes;
};

// Checks the configuration (throws std::invalid_argument naming the field and
// value) and derives the geometry.
DeviceGeometry makeDeviceGeometry(const DeviceConfig& config);

}  // namespace kvtier
