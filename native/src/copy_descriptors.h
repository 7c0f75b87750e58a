// The copy kernel's work list: a transfer plan's regions (copies and poison
// fills) as device addresses, cut into tiles so that a few CTAs share the
// work of one long run evenly. Plain C++: the CUDA backend builds it, and the
// CPU check of the kernels (native/test/kernel-check) builds the same list.
#pragma once

#include <cstdint>
#include <vector>

#include "transfer_plan.h"

namespace kvtier {

// One tile: `bytes` from `src` to `dst`, addresses as the device sees them.
struct CopyDescriptor {
  uint64_t src;
  uint64_t dst;
  uint64_t bytes;
};

// Largest tile, the unit one warp copies: 32 passes of 32 lanes moving 16
// bytes each. Small enough that a long run spreads over many warps.
constexpr uint64_t kCopyTileBytes = 16 << 10;
// Threads per CTA of the copy kernel (8 warps).
constexpr unsigned kCopyThreads = 256;
// At most this many CTAs per copy kernel, so copies cannot starve compute.
// On an H100 a copy kernel over mapped pinned memory (16 KiB regions)
// reached 52 GB/s device-to-host from 8 CTAs and 51 GB/s host-to-device
// from 32; beside a compute kernel filling every SM, 32 CTAs slowed it by
// 0.2% and 132 CTAs by 2.3%.
constexpr unsigned kMaxCopyCtas = 32;

// Grid of the copy kernel for `tiles` descriptors: one warp per tile, at most kMaxCopyCtas CTAs.
unsigned copyGridSize(uint64_t tiles);

// Where the copies read and write, as the device addresses them.
struct CopyEndpoints {
  uint8_t* gpu;                       // the GPU KV cache
  const std::vector<uint8_t*>* cpu;   // the CPU tier's chunks (mapped pinned memory)
  const uint8_t* poison;              // one segment of the poison pattern, device memory
};

// Appends the tiles of every copy and poison fill of `plan`, copies first,
// in plan order.
void appendCopyDescriptors(const TransferPlan& plan, bool store, const CopyEndpoints& at,
                           std::vector<CopyDescriptor>& out);

// Appends the tiles of one contiguous range.
void appendRange(const void* src, void* dst, uint64_t bytes, std::vector<CopyDescriptor>& out);

}  // namespace kvtier
