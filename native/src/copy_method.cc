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

CopyMethod chooseCopyMethod(CopyMethod requested, const TransferPlan& plan) {
  if (requested != CopyMethod::Auto) return requested;
  if (plan.copies.empty()) return CopyMethod::Dma;
  uint64_t bytes = 0;
  for (const CopyRegion& r : plan.copies) bytes += r.bytes;
  return bytes / plan.copies.size() < kAutoKernelBelowBytes ? CopyMethod::Kernel : CopyMethod::Dma;
}

}  // namespace kvtier
