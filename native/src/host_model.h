// The reference model on the host backend: C++ functions over the GPU buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "forward_batch.h"
#include "kv_geometry.h"

namespace kvtier {

// Writes every new position of the batch (requests in order, positions in
// order, each reading the previous chain state from the cache), then returns
// each sampled request's digest read back from the cache (0 where not sampled).
std::vector<uint32_t> runHostForward(const KvGeometry& kv, uint32_t modelSeed, uint16_t* cache,
                                     const ForwardBatchData& batch);

}  // namespace kvtier
