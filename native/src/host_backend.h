// The host backend: "GPU" memory and the CPU tier are host allocations,
// streams are threads, copies are memcpy, kernels are C++ functions. Its
// asynchrony is real, so ordering bugs show up here too.
#pragma once

#include <memory>

#include "backend.h"

namespace kvtier {

std::unique_ptr<Backend> createHostBackend(const DeviceGeometry& geometry, const HostLink& link, CompletionSink& sink);

}  // namespace kvtier
