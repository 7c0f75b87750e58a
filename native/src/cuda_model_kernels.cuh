// The reference model's kernels (docs/architecture.md, "Reference model"), kept apart from the
// launch code so the same source can also be compiled for the CPU, through a
// shim of the CUDA built-ins, and checked against the host backend
// (native/test/kernel-check). Include it once, after cuda_kernels.cuh and
// reference_model.h, in a translation unit that provides the CUDA built-ins.
#pragma once

namespace kvtier {
namespace {

constexpr unsigned kThreads = 256;

// Sequential on purpose: a position's chain state is read from the cache
// slot of the previous position, which an earlier request of the same batch
// may have just written (shared prefix blocks).
__global__ void chainKernel(KvGeometry kv, uint32_t modelSeed, uint16_t* cache, DeviceForwardBatch b) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const uint32_t bs = kv.blockSize;
  for (uint32_t r = 0; r < b.numRequests; r++) {
    const int32_t* table = b.blockTables + b.blockTableOffsets[r];
    const int32_t first = b.tokenOffsets[r];
    for (int32_t i = first; i < b.tokenOffsets[r + 1]; i++) {
      const uint32_t p = static_cast<uint32_t>(b.startPositions[r] + (i - first));
      uint32_t prev;
      if (p == 0) {
        prev = chainInit(modelSeed);
      } else {
        const uint64_t at = kv.elementIndex(table[(p - 1) / bs], 0, 0, 0, (p - 1) % bs, 0);
        prev = static_cast<uint32_t>(cache[at]) | (static_cast<uint32_t>(cache[at + 1]) << 16);
      }
      const uint32_t s = chainNext(prev, static_cast<uint32_t>(b.tokens[i]), p);
      const uint32_t block = static_cast<uint32_t>(table[p / bs]);
      const uint32_t slot = p % bs;
      for (uint32_t h = 0; h < kv.localHeads; h++) {
        const uint64_t at = kv.elementIndex(block, 0, 0, h, slot, 0);
        cache[at] = static_cast<uint16_t>(s & 0xffffu);
        cache[at + 1] = static_cast<uint16_t>(s >> 16);
      }
      b.tokenBlocks[i] = block;
      b.tokenSlots[i] = slot;
    }
  }
}

// One CUDA block per new position; threads stride over its elements with the
// head dimension fastest, so a warp writes contiguous rows.
__global__ void writeKernel(KvGeometry kv, uint16_t* cache, DeviceForwardBatch b) {
  const uint32_t i = blockIdx.x;
  const uint32_t block = b.tokenBlocks[i];
  const uint32_t slot = b.tokenSlots[i];
  // The state as chainKernel left it in the slot, not this token's own: if a
  // batch writes one slot twice, every CUDA block writing it then writes the
  // same values (the last write's, as on the host backend) instead of racing.
  const uint64_t at = kv.elementIndex(block, 0, 0, 0, slot, 0);
  const uint32_t s = static_cast<uint32_t>(cache[at]) | (static_cast<uint32_t>(cache[at + 1]) << 16);
  const uint32_t D = kv.headDim;
  const uint32_t Hr = kv.localHeads;
  for (uint64_t idx = threadIdx.x; idx < kv.elementsPerToken; idx += blockDim.x) {
    const uint32_t d = static_cast<uint32_t>(idx % D);
    const uint64_t row = idx / D;
    const uint32_t h = static_cast<uint32_t>(row % Hr);
    const uint32_t layerK = static_cast<uint32_t>(row / Hr);
    const uint32_t layer = layerK >> 1;
    const uint32_t k = layerK & 1u;
    // Global element index with the model's wrapping 32-bit arithmetic.
    const uint32_t e = ((layer * 2u + k) * kv.kvHeads + kv.firstHead + h) * D + d;
    cache[kv.elementIndex(block, layer, k, h, slot, d)] = elementValue(s, layer, k, d, e);
  }
}

__device__ __forceinline__ uint32_t warpSum(uint32_t v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// One CUDA block per (sampled request, position): sums that position's
// elements as the cache holds them and adds imul(p + 1, sum) to the request's
// digest (addition mod 2^32 is order independent).
__global__ void digestKernel(KvGeometry kv, const uint16_t* cache, DeviceForwardBatch b) {
  const uint64_t pair = blockIdx.x;
  uint32_t lo = 0;
  uint32_t hi = b.numSampled;  // pairOffsets[lo] <= pair < pairOffsets[hi]
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (static_cast<uint64_t>(b.pairOffsets[mid]) <= pair) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const uint32_t r = static_cast<uint32_t>(b.sampledRequests[lo]);
  const uint32_t p = static_cast<uint32_t>(pair - static_cast<uint64_t>(b.pairOffsets[lo]));
  const int32_t* table = b.blockTables + b.blockTableOffsets[r];
  const uint32_t block = static_cast<uint32_t>(table[p / kv.blockSize]);
  const uint32_t slot = p % kv.blockSize;
  const uint32_t D = kv.headDim;
  const uint32_t Hr = kv.localHeads;

  uint32_t sum = 0;
  for (uint64_t idx = threadIdx.x; idx < kv.elementsPerToken; idx += blockDim.x) {
    const uint32_t d = static_cast<uint32_t>(idx % D);
    const uint64_t row = idx / D;
    const uint32_t h = static_cast<uint32_t>(row % Hr);
    const uint32_t layerK = static_cast<uint32_t>(row / Hr);
    sum += cache[kv.elementIndex(block, layerK >> 1, layerK & 1u, h, slot, d)];
  }
  __shared__ uint32_t warpSums[kThreads / 32];
  sum = warpSum(sum);
  const unsigned lane = threadIdx.x & 31u;
  const unsigned warp = threadIdx.x >> 5;
  if (lane == 0) warpSums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    sum = lane < blockDim.x / 32 ? warpSums[lane] : 0u;
    sum = warpSum(sum);
    if (lane == 0) atomicAdd(&b.digests[r], (p + 1u) * sum);
  }
}

}  // namespace
}  // namespace kvtier
