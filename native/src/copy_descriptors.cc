#include "copy_descriptors.h"

#include <algorithm>

namespace kvtier {

unsigned copyGridSize(uint64_t tiles) {
  const uint64_t warpsPerCta = kCopyThreads / 32;
  const uint64_t ctas = (tiles + warpsPerCta - 1) / warpsPerCta;
  return static_cast<unsigned>(std::min<uint64_t>(std::max<uint64_t>(ctas, 1), kMaxCopyCtas));
}

void orderTilesLargestFirst(std::vector<CopyDescriptor>& tiles) {
  // Most tiles are full: one linear pass moves them ahead, and only the
  // partial tail tiles (one per region at most) are sorted.
  auto partial = std::stable_partition(tiles.begin(), tiles.end(),
                                       [](const CopyDescriptor& t) { return t.bytes == kCopyTileBytes; });
  std::stable_sort(partial, tiles.end(),
                   [](const CopyDescriptor& a, const CopyDescriptor& b) { return a.bytes > b.bytes; });
}

void appendRange(const void* src, void* dst, uint64_t bytes, std::vector<CopyDescriptor>& out) {
  const uint64_t s = reinterpret_cast<uint64_t>(src);
  const uint64_t d = reinterpret_cast<uint64_t>(dst);
  for (uint64_t done = 0; done < bytes; done += kCopyTileBytes) {
    out.push_back(CopyDescriptor{s + done, d + done, std::min(kCopyTileBytes, bytes - done)});
  }
}

void appendCopyDescriptors(const TransferPlan& plan, bool store, const CopyEndpoints& at,
                           std::vector<CopyDescriptor>& out) {
  for (const CopyRegion& r : plan.copies) {
    uint8_t* gpu = at.gpu + r.gpuOffset;
    uint8_t* cpu = (*at.cpu)[r.cpuChunk] + r.cpuOffset;
    appendRange(store ? gpu : cpu, store ? cpu : gpu, r.bytes, out);
  }
  for (const CopyRegion& r : plan.poison) {
    void* dst = store ? static_cast<void*>((*at.cpu)[r.cpuChunk] + r.cpuOffset) : at.gpu + r.gpuOffset;
    appendRange(at.poison, dst, r.bytes, out);
  }
}

}  // namespace kvtier
