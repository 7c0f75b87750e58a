// Staging memory for forward batches: pinned host buffers the JS thread
// packs into, device buffers the kernels read (one forward at a time).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cuda_check.cuh"

namespace kvtier {

// Grow-only (doubling) staging memory; regrown only between forwards.
struct StagingBuffer {
  uint8_t* data = nullptr;
  size_t capacity = 0;
  bool pinned = false;  // pinned host memory, else device memory

  void ensure(size_t bytes) {
    if (bytes <= capacity) return;
    const size_t grown = std::max(bytes, capacity * 2);
    release();
    void* p = nullptr;
    check(pinned ? cudaHostAlloc(&p, grown, cudaHostAllocDefault) : cudaMalloc(&p, grown),
          pinned ? "cudaHostAlloc (forward staging)" : "cudaMalloc (forward staging)");
    data = static_cast<uint8_t*>(p);
    capacity = grown;
  }

  void release() {
    if (data != nullptr) pinned ? cudaFreeHost(data) : cudaFree(data);
    data = nullptr;
    capacity = 0;
  }
};

// Lays typed arrays out back to back (8-byte aligned) in a staging buffer.
class BatchPacker {
 public:
  template <typename T>
  size_t reserve(size_t count) {
    const size_t offset = (size_ + 7) & ~size_t{7};
    size_ = offset + count * sizeof(T);
    return offset;
  }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

}  // namespace kvtier
