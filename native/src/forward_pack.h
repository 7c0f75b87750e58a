// How a forward batch is laid out for the CUDA kernels. The JS thread packs
// the inputs, with the digests' zeroed accumulators after them, into one
// image in mapped pinned memory; a kernel on the compute stream stages that
// image into device memory (no copy engine involved), followed there by the
// scratch arrays the kernels fill. Plain C++, shared with the CPU check of
// the kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "device_forward_batch.h"
#include "forward_batch.h"

namespace kvtier {

struct ForwardLayout {
  uint32_t numRequests = 0;
  uint32_t numTokens = 0;
  std::vector<int32_t> sampledRequests;
  std::vector<int64_t> pairOffsets{0};
  // Byte offsets in the image.
  size_t tableOffsets = 0, tables = 0, starts = 0, tokenOffsets = 0, tokens = 0, sampled = 0, pairs = 0,
         digests = 0;
  // The staged image's size: a multiple of 16 (whole vectors for the stage kernel).
  size_t stagedBytes = 0;
  // Byte offsets of the scratch arrays, after the image in device memory.
  size_t tokenBlocks = 0, tokenSlots = 0;
  // Device memory the forward uses: the image, then the scratch arrays.
  size_t deviceBytes = 0;

  uint64_t numPairs() const { return static_cast<uint64_t>(pairOffsets.back()); }
};

// Throws std::invalid_argument when the sampled contexts exceed 2^31 positions.
ForwardLayout layoutForward(const ForwardBatchData& batch);

// Writes the image (inputs and zeroed digests) to `image`, stagedBytes long.
void packForward(const ForwardLayout& layout, const ForwardBatchData& batch, uint8_t* image);

// The kernels' view of the staged batch at `device` (16-byte aligned).
DeviceForwardBatch bindForward(const ForwardLayout& layout, uint8_t* device);

// Grid of the stage kernel: enough CTAs of 256 threads for one 16-byte
// vector per thread, at most 32 (inputs are small; this never fills the GPU).
unsigned stageGridSize(size_t stagedBytes);

}  // namespace kvtier
