// The reference model's arithmetic (docs/architecture.md, "Reference model"), shared by the host
// backend and the CUDA kernels. Everything is unsigned 32-bit; the TypeScript
// definition in src/model/reference.ts is the oracle these must match.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define KVTIER_HD __host__ __device__ __forceinline__
#else
#define KVTIER_HD inline
#endif

namespace kvtier {

constexpr uint32_t kChainMultiplier = 0x9e3779b9u;
constexpr uint32_t kElementMultiplier = 0x9e3779b1u;

// murmur3's fmix32 finalizer.
KVTIER_HD uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

// Chain state before position 0.
KVTIER_HD uint32_t chainInit(uint32_t modelSeed) { return mix32(modelSeed); }

// Chain state at position p holding `token`, from the state at p - 1.
KVTIER_HD uint32_t chainNext(uint32_t prev, uint32_t token, uint32_t p) {
  return mix32(prev ^ mix32(token + kChainMultiplier * (p + 1u)));
}

// The 16-bit KV element of global element index `e` at a position whose chain
// state is `s`. Layer 0, K, dims 0 and 1 of every head hold the chain state
// itself, which is how the next position finds it in the paged cache.
KVTIER_HD uint16_t elementValue(uint32_t s, uint32_t layer, uint32_t k, uint32_t dim, uint32_t e) {
  if (layer == 0 && k == 0) {
    if (dim == 0) return static_cast<uint16_t>(s & 0xffffu);
    if (dim == 1) return static_cast<uint16_t>(s >> 16);
  }
  return static_cast<uint16_t>(mix32(s ^ ((e + 1u) * kElementMultiplier)) & 0xffffu);
}

}  // namespace kvtier
