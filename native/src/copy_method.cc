#include "copy_method.h"

#include <stdexcept>

#include "transfer_plan.h"

namespace kvtier {

CopyMethod parseCopyMethod(const std::string& text) {
  if (text == "auto") return CopyMethod::Auto;
  if (text == "kernel") return CopyMethod::Kernel;
  if (text == "dma") return CopyMethod::Dma;
  throw std::invalid_argument("copyMethod = '" + text + "' must be 'kernel', 'dma' or 'auto'");
}

const char* copyMethodName(CopyMethod method) {
  switch (method) {
    case CopyMethod::Kernel:
      return "kernel";
    case CopyMethod::Dma:
      return "dma";
    default:
      return "auto";
  }
}

CopyMethod chooseCopyMethod(CopyMethod requested, uint64_t copyBytes, uint64_t copyRegions, bool besideCompute) {
  if (requested != CopyMethod::Auto) return requested;
  if (besideCompute) return CopyMethod::Dma;
  if (copyRegions == 0) return CopyMethod::Kernel;  // poison only: one launch, not a copy per segment
  return copyBytes / copyRegions >= kDmaMinRegionBytes ? CopyMethod::Dma : CopyMethod::Kernel;
}

CopyMethod chooseCopyMethod(CopyMethod requested, const TransferPlan& plan, bool besideCompute) {
  uint64_t bytes = 0;
  for (const CopyRegion& r : plan.copies) bytes += r.bytes;
  return chooseCopyMethod(requested, bytes, plan.copies.size(), besideCompute);
}

}  // namespace kvtier
