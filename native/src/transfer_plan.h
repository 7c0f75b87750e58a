// Turns a transfer job's block id lists into memory regions to copy:
// runs where both the GPU ids and the CPU sub-block ids are consecutive (and
// stay in one CPU chunk) become one copy per region of the layout, listed in
// source address order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv_geometry.h"

namespace kvtier {

enum class Direction { GpuToCpu, CpuToGpu };

const char* directionName(Direction direction);

struct TransferRequest {
  Direction direction;
  const int32_t* gpuIds;
  size_t gpuCount;
  const int32_t* cpuIds;
  size_t cpuCount;
  uint32_t firstSubBlock;  // loads only
};

// One contiguous range on each side; the direction says which is the source.
struct CopyRegion {
  uint64_t gpuOffset;
  uint32_t cpuChunk;
  uint64_t cpuOffset;
  uint64_t bytes;
};

struct TransferPlan {
  std::vector<CopyRegion> copies;
  // Destination ranges filled with the poison pattern instead of data.
  std::vector<CopyRegion> poison;
  uint64_t copiedBytes = 0;
};

// Throws std::invalid_argument naming the argument: ids out of range, length
// mismatch, bad firstSubBlock, duplicate destinations.
void validateTransfer(const DeviceGeometry& geometry, const TransferRequest& request);

// The CPU sub-block that GPU block `index` of the request maps to.
uint64_t subBlockOf(const TransferRequest& request, uint64_t offloadFactor, size_t index);

// `poisoned[i]` (same length as gpuIds, or empty for none) marks GPU blocks
// whose destination receives poison instead of data.
TransferPlan planTransfer(const DeviceGeometry& geometry, const TransferRequest& request,
                          const std::vector<uint8_t>& poisoned);

}  // namespace kvtier
