// How a transfer job's regions cross between the GPU KV cache and the CPU
// tier on the CUDA backend: DMA on the copy engines, or a copy kernel whose
// threads read and write the mapped pinned CPU tier directly.
#pragma once

#include <cstdint>
#include <string>


namespace kvtier {

struct TransferPlan;

enum class CopyMethod { Auto, Kernel, Dma };

// Throws std::invalid_argument naming the field and the value.
CopyMethod parseCopyMethod(const std::string& text);
const char* copyMethodName(CopyMethod method);

// Regions smaller than this (on average over a job) go through the copy
// kernel under `auto`, larger ones through DMA. On an H100 over PCIe Gen5
// (contiguous DMA: 55 GB/s) the kernel moved 50-52 GB/s at every region size
// from 4 KiB to 2 MiB, while DMA of scattered regions (cudaMemcpyBatchAsync)
// reached 4.8 GB/s at 4 KiB, 32 GB/s at 64 KiB, 46.7 GB/s at 256 KiB and
// 54 GB/s at 2 MiB. DMA also uses no SM. So: the kernel below the point
// where DMA catches up, which lies between 256 KiB (kernel ahead by 10%) and
// 2 MiB (DMA ahead by 4-6%); 1 MiB splits that interval.
constexpr uint64_t kAutoKernelBelowBytes = 1ull << 20;

// The method a job runs with: `requested` unless it is Auto, which picks by
// the plan's mean copy region size. A plan with no copies (all poison) uses DMA.
CopyMethod chooseCopyMethod(CopyMethod requested, const TransferPlan& plan);

}  // namespace kvtier
