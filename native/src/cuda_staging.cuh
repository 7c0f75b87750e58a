// Staging memory: device buffers, and mapped pinned host buffers that the
// JS thread writes and kernels read (or kernels write and the host reads)
// without a copy engine.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda_check.cuh"

namespace kvtier {

enum class StagingKind { Device, MappedHost };

// Grow-only (doubling); regrown only while no queued work uses it. Move-only.
struct StagingBuffer {
  StagingKind kind = StagingKind::Device;
  uint8_t* data = nullptr;    // host address (MappedHost) or device address (Device)
  uint8_t* device = nullptr;  // the address kernels use
  size_t capacity = 0;

  StagingBuffer() = default;
  explicit StagingBuffer(StagingKind k) : kind(k) {}
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;
  StagingBuffer(StagingBuffer&& other) noexcept { *this = std::move(other); }
  StagingBuffer& operator=(StagingBuffer&& other) noexcept {
    if (this != &other) {
      release();
      kind = other.kind;
      data = std::exchange(other.data, nullptr);
      device = std::exchange(other.device, nullptr);
      capacity = std::exchange(other.capacity, 0);
    }
    return *this;
  }
  ~StagingBuffer() { release(); }

  void ensure(size_t bytes) {
    if (bytes <= capacity) return;
    const size_t grown = std::max({bytes, capacity * 2, size_t{256}});
    release();
    void* p = nullptr;
    if (kind == StagingKind::MappedHost) {
      check(cudaHostAlloc(&p, grown, cudaHostAllocMapped), "cudaHostAlloc (mapped staging)");
      data = static_cast<uint8_t*>(p);
      void* d = nullptr;
      const cudaError_t status = cudaHostGetDevicePointer(&d, p, 0);
      if (status != cudaSuccess) {
        cudaFreeHost(p);
        data = nullptr;
        check(status, "cudaHostGetDevicePointer (mapped staging)");
      }
      device = static_cast<uint8_t*>(d);
    } else {
      check(cudaMalloc(&p, grown), "cudaMalloc (staging)");
      data = device = static_cast<uint8_t*>(p);
    }
    capacity = grown;
  }

  // Grows to at least `bytes` without freeing: the old buffer goes to
  // `retired` (freed at shutdown), because freeing pinned or device memory
  // waits for the whole device, which would stall the JS thread behind the
  // copies in flight.
  void grow(size_t bytes, std::vector<StagingBuffer>& retired) {
    if (bytes <= capacity) return;
    StagingBuffer fresh(kind);
    fresh.ensure(std::max(bytes, capacity * 2));
    retired.push_back(std::move(*this));
    *this = std::move(fresh);
  }

  void release() {
    if (data != nullptr) kind == StagingKind::MappedHost ? cudaFreeHost(data) : cudaFree(data);
    data = device = nullptr;
    capacity = 0;
  }
};

}  // namespace kvtier
