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

// `auto` decides per job, from its regions and from whether the device runs
// forwards, with figures measured on an H100 over PCIe Gen5 x16 (contiguous
// DMA: 55 GB/s):
//
// - DMA from this mean region size on. cudaMemcpyBatchAsync over 64 MiB of
//   scattered regions reached 1-2% of a contiguous copy at 1-2 KiB, 4-9% at
//   4 KiB, 26-31% at 16 KiB, 56-65% at 64 KiB, 87-88% at 256 KiB and 96% at
//   1 MiB; the copy kernel 89-96% at every size. From 256 KiB DMA is within a
//   few percent of the kernel and uses no SM.
constexpr uint64_t kDmaMinRegionBytes = 256ull << 10;
// - Never the kernel beside the model. With forwards running, the kernel
//   slowed them +12..+20% (loads), +39..+66% (stores), +57..+113% (both),
//   DMA +0.3..+14.6%: its loads and stores over the link raise every other
//   host-memory access's round trip and its CTAs take SM room from the
//   forward's kernels. Until the kernel is measured cheaper there, a device
//   that runs forwards moves every job by DMA, small regions included.
// - The kernel otherwise for small regions (a device that only transfers:
//   benches, tools), and for poison-only plans, whose fills are one small
//   region per block segment.

// The method a job runs with: `requested` unless it is Auto. `copyBytes` and
// `copyRegions` are the plan's copies (not its poison fills); `besideCompute`:
// the device runs forwards, so the job's copies overlap the model's work.
CopyMethod chooseCopyMethod(CopyMethod requested, uint64_t copyBytes, uint64_t copyRegions, bool besideCompute);
CopyMethod chooseCopyMethod(CopyMethod requested, const TransferPlan& plan, bool besideCompute);

}  // namespace kvtier
