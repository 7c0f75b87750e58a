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

// The copy kernel's footprint, in one place. It shares the host link and the
// SMs with the model, so it keeps only as many bytes in flight as the link
// needs to reach its knee, and leaves SM room to the forward's kernels.
// Figures from an H100 over PCIe Gen5 x16 (contiguous DMA: 55 GB/s):
// - 32 CTAs x 8 warps x 4 vectors (512 KiB in flight) raised the round trip
//   every other host-memory access sees from 1.26 us to 6.4 us (loads) and
//   9.1 us (stores); 12 CTAs with 4 vectors in flight per thread kept
//   49.8 / 51.2 GB/s at 3.2 / 5.0 us: the knee is near 192 KiB in flight.
// - The forward's chain/write/digest kernels slowed +23% (llama-8b) to +253%
//   (small model) beside 64-register, 256-thread copy CTAs on 32 SMs.
//
// Threads per CTA of the copy kernel (8 warps).
constexpr unsigned kCopyThreads = 256;
// Vectors (16 bytes) each thread loads before storing them.
constexpr unsigned kCopyVectorsInFlight = 4;
// At most this many CTAs per copy kernel.
constexpr unsigned kMaxCopyCtas = 12;
// Bytes the whole kernel keeps in flight across the link.
constexpr uint64_t kCopyBytesInFlight = uint64_t{kMaxCopyCtas} * kCopyThreads * kCopyVectorsInFlight * 16;
static_assert(kCopyBytesInFlight == 192u << 10, "the copy kernel's bytes in flight are sized to the link's knee");
// Registers per thread of the copy kernel: the fewest it compiles to without
// spilling (ptxas, sm_75/80/90: 56; 48 spills 80 bytes, unbounded it takes
// 80). Per SM it holds 256 x 56 = 14k of 64k registers, and on 12 SMs, where
// the 64-register kernel held 16k on each of 32.
constexpr unsigned kCopyMaxRegisters = 56;

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

// Orders tiles largest first (full tiles, then partial ones by size), so the
// job does not end on a long tile that started last.
void orderTilesLargestFirst(std::vector<CopyDescriptor>& tiles);

// Appends the tiles of one contiguous range.
void appendRange(const void* src, void* dst, uint64_t bytes, std::vector<CopyDescriptor>& out);

}  // namespace kvtier
