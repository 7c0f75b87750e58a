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
using Vec16 = uint4;
#else
struct alignas(16) Vec16 {
  uint32_t x, y, z, w;
};
#endif

// Copies `bytes` with the calling threads: thread `t` of `stride` moves
// elements t, t + stride, ... Sixteen-byte elements when both ends and the
// length allow it (the usual case: regions are whole KV segments), else four
// or one. Four loads are issued before their stores so each thread keeps
// several reads in flight across the link.
template <typename T>
__device__ __forceinline__ void copyElements(T* dst, const T* src, uint64_t n, uint64_t t, uint64_t stride) {
  uint64_t i = t;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const T v0 = src[i];
    const T v1 = src[i + stride];
    const T v2 = src[i + 2 * stride];
    const T v3 = src[i + 3 * stride];
    dst[i] = v0;
    dst[i + stride] = v1;
    dst[i + 2 * stride] = v2;
    dst[i + 3 * stride] = v3;
  }
  for (; i < n; i += stride) dst[i] = src[i];
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

// A transfer job: CTA b copies tiles b, b + gridDim.x, ... The descriptor
// list lives in mapped pinned memory; one thread reads each descriptor into
// shared memory rather than every warp reading it across the link.
__global__ void copyKernel(const CopyDescriptor* tiles, uint64_t numTiles) {
  __shared__ CopyDescriptor tile;
  for (uint64_t i = blockIdx.x; i < numTiles; i += gridDim.x) {
    if (threadIdx.x == 0) tile = tiles[i];
    __syncthreads();
    copySpan(tile.dst, tile.src, tile.bytes, threadIdx.x, blockDim.x);
    __syncthreads();  // every thread is done with `tile` before thread 0 reads the next
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
