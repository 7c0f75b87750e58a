// Runs CUDA kernels on the CPU: one std::thread per CUDA thread of a block,
// the blocks of a grid one after another in reverse order (a GPU promises no
// order), __syncthreads and warp shuffles through barriers, __shared__
// variables as statics (one block runs at a time).
#pragma once

#include <barrier>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

struct CpuDim3 {
  unsigned x = 0, y = 0, z = 0;
};

inline thread_local CpuDim3 threadIdx, blockIdx;
inline CpuDim3 blockDim, gridDim;
inline std::unique_ptr<std::barrier<>> cpuBlockBarrier;
inline std::vector<std::unique_ptr<std::barrier<>>> cpuWarpBarriers;
inline uint32_t cpuShuffleSlots[1024];
inline std::mutex cpuAtomicMutex;

inline void __syncthreads() { cpuBlockBarrier->arrive_and_wait(); }

inline uint32_t __shfl_down_sync(unsigned /*mask*/, uint32_t value, int offset) {
  const unsigned t = threadIdx.x;
  const unsigned lane = t % 32;
  cpuShuffleSlots[t] = value;
  cpuWarpBarriers[t / 32]->arrive_and_wait();
  const uint32_t result = lane + offset < 32 ? cpuShuffleSlots[t + offset] : value;
  cpuWarpBarriers[t / 32]->arrive_and_wait();
  return result;
}

inline uint32_t atomicAdd(uint32_t* address, uint32_t value) {
  std::lock_guard<std::mutex> lock(cpuAtomicMutex);
  const uint32_t old = *address;
  *address = old + value;
  return old;
}

/** kernel<<<grid, block>>>(...) as cpuLaunch(grid, block, [&] { kernel(...); }). */
template <class Kernel>
void cpuLaunch(unsigned grid, unsigned block, Kernel kernel) {
  blockDim.x = block;
  gridDim.x = grid;
  for (unsigned i = 0; i < grid; i++) {
    const unsigned b = grid - 1 - i;
    cpuBlockBarrier = std::make_unique<std::barrier<>>(block);
    cpuWarpBarriers.clear();
    for (unsigned w = 0; w < (block + 31) / 32; w++) cpuWarpBarriers.push_back(std::make_unique<std::barrier<>>(32));
    std::vector<std::thread> threads;
    threads.reserve(block);
    for (unsigned t = 0; t < block; t++) {
      threads.emplace_back([=] {
        threadIdx.x = t;
        blockIdx.x = b;
        kernel();
      });
    }
    for (auto& thread : threads) thread.join();
  }
}
