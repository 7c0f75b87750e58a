// Data movement kernels: the copy kernel of transfer jobs (between the GPU KV
// cache and the mapped pinned CPU tier) and the forward's input and output
// path over mapped pinned staging memory. None of them enters a copy
// engine's queue, so neither waits behind DMA transfers queued in the same
// direction. Kept apart from the launch code so the same source is also
// compiled for the CPU through a shim of the CUDA built-ins
// (native/test/kernel-check). Include it once, after copy_descriptors.h, in
// a translation unit that provides the CUDA built-ins.
#pragma once

#include <cstdint>

namespace kvtier {
namespace {

#ifdef __CUDACC__
#define KVTIER_UNROLL _Pragma("unroll")
#define KVTIER_COPY_BOUNDS __maxnreg__(kCopyMaxRegisters)
using Vec16 = uint4;
#else
#define KVTIER_UNROLL
#define KVTIER_COPY_BOUNDS
struct alignas(16) Vec16 {
  uint32_t x, y, z, w;
};
#endif

// Copies `bytes` with the calling threads: thread `t` of `stride` moves
// elements t, t + stride, ... Sixteen-byte elements when both ends and the
// length allow it (the usual case: regions are whole KV segments), else four
// or one. Each thread issues up to four loads before their stores, so it
// keeps several reads in flight across the link even on a short span.
template <typename T>
__device__ __forceinline__ void copyElements(T* dst, const T* src, uint64_t n, uint64_t t, uint64_t stride) {
  constexpr int kInFlight = kCopyVectorsInFlight;
  for (uint64_t i = t; i < n; i += kInFlight * stride) {
    T v[kInFlight];
KVTIER_UNROLL
    for (int k = 0; k < kInFlight; k++) {
      if (i + k * stride < n) v[k] = src[i + k * stride];
    }
KVTIER_UNROLL
    for (int k = 0; k < kInFlight; k++) {
      if (i + k * stride < n) dst[i + k * stride] = v[k];
    }
  }
}

__device__ __forceinline__ void copySpan(uint64_t dst, uint64_t src, uint64_t bytes, uint64_t t, uint64_t stride) {
  const uint64_t alignment = dst | src | bytes;
  if ((alignment & 15) == 0) {
    copyElements(reinterpret_cast<Vec16*>(dst), reinterpret_cast<const Vec16*>(src), bytes / 16, t, stride);
  } else if ((alignment & 3) == 0) {
    copyElements(reinterpret_cast<uint32_t*>(dst), reinterpret_cast<const uint32_t*>(src), bytes / 4, t, stride);
  } else {
    copyElements(reinterpret_cast<uint8_t*>(dst), reinterpret_cast<const uint8_t*>(src), bytes, t, stride);
  }
}

// A transfer job. Round r of CTA b copies the kCopyThreads / 32 consecutive
// tiles starting at (r x gridDim + b) x warps per CTA, one per warp, so the
// list, sorted largest first, is worked through largest first over the
// whole grid. The CTA fetches a round's descriptors together: its first
// threads load them as consecutive 8-byte words (one coalesced read across
// the link instead of one per warp) while the warps copy the round before,
// and hand them over through shared memory at the round's barrier.
static_assert(sizeof(CopyDescriptor) == 3 * sizeof(uint64_t), "descriptors are read as three words");

__global__ void KVTIER_COPY_BOUNDS copyKernel(const CopyDescriptor* tiles, uint64_t numTiles) {
  constexpr unsigned kWarps = kCopyThreads / 32;
  constexpr unsigned kWords = kWarps * 3;
  __shared__ uint64_t rounds[2][kWords];
  const unsigned warp = threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  const uint64_t* words = reinterpret_cast<const uint64_t*>(tiles);
  const uint64_t numWords = numTiles * 3;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * kWarps;
  uint64_t first = static_cast<uint64_t>(blockIdx.x) * kWarps;
  // Uniform over the CTA, as every exit below: all its threads reach the same barriers.
  if (first >= numTiles) return;
  if (threadIdx.x < kWords && first * 3 + threadIdx.x < numWords) rounds[0][threadIdx.x] = words[first * 3 + threadIdx.x];
  __syncthreads();
  for (unsigned k = 0;; k ^= 1) {
    const uint64_t next = first + stride;
    // Issued before this round's copy and stored after it, so the read's
    // round trip overlaps the copy.
    uint64_t word = 0;
    const bool fetches = next < numTiles && threadIdx.x < kWords && next * 3 + threadIdx.x < numWords;
    if (fetches) word = words[next * 3 + threadIdx.x];
    if (first + warp < numTiles) {
      const uint64_t* tile = rounds[k] + warp * 3;
      copySpan(tile[1], tile[0], tile[2], lane, 32);
    }
    if (next >= numTiles) return;
    // rounds[k ^ 1] was last read before the previous barrier.
    if (fetches) rounds[k ^ 1][threadIdx.x] = word;
    __syncthreads();
    first = next;
  }
}

// The forward's staged inputs (and zeroed digests), from mapped pinned
// memory into device memory, by every thread of the grid.
__global__ void stageKernel(uint8_t* dst, const uint8_t* src, uint64_t bytes) {
  const uint64_t t = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  copySpan(reinterpret_cast<uint64_t>(dst), reinterpret_cast<uint64_t>(src), bytes, t, stride);
}

// The digests, from device memory into mapped pinned memory the host reads
// once the forward's end event has completed.
__global__ void publishDigestsKernel(const uint32_t* digests, uint32_t* out, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = digests[i];
}

}  // namespace
}  // namespace kvtier
