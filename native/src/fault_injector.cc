#include "fault_injector.h"

namespace kvtier {

FaultInjector::FaultInjector() { configure(FaultSettings{}); }

void FaultInjector::configure(const FaultSettings& settings) {
  settings_ = settings;
  failBlocks_.clear();
  failBlocks_.insert(settings.loadFailBlocks.begin(), settings.loadFailBlocks.end());
  rngState_ = settings.seed;
  failuresLeft_ = settings.loadFailLimit;
}

// splitmix64: small, well mixed, and the same on every platform.
double FaultInjector::nextUniform() {
  uint64_t z = (rngState_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

std::vector<int32_t> FaultInjector::decideLoad(const int32_t* gpuIds, size_t n, std::vector<uint8_t>& poisoned) {
  poisoned.assign(n, 0);
  std::vector<int32_t> failed;
  const bool listed = !failBlocks_.empty();
  const bool random = settings_.loadFailProbability > 0;
  if (!listed && !random) return failed;
  for (size_t i = 0; i < n; i++) {
    bool fails = listed && failBlocks_.count(gpuIds[i]) != 0;
    // Draw for every block so the sequence does not depend on the listed ones.
    if (random && nextUniform() < settings_.loadFailProbability) fails = true;
    if (!fails || failuresLeft_ == 0) continue;
    if (failuresLeft_ > 0) failuresLeft_--;
    poisoned[i] = 1;
    failed.push_back(gpuIds[i]);
    counters_.loadBlocksFailed++;
  }
  return failed;
}

bool FaultInjector::decideStore() {
  if (settings_.storeFailProbability <= 0) return false;
  const bool fails = nextUniform() < settings_.storeFailProbability;
  if (fails) counters_.storesFailed++;
  return fails;
}

double FaultInjector::delayForJob() {
  // Draw only when jitter is asked for, so other faults' sequences stay as they were.
  const double jitter = settings_.delayJitterMs > 0 ? nextUniform() * settings_.delayJitterMs : 0;
  const double delay = settings_.delayMs + jitter;
  if (delay <= 0) return 0;
  counters_.jobsDelayed++;
  return delay;
}

std::string FaultInjector::decideDeviceError(int64_t jobId) {
  if (settings_.jobErrorProbability <= 0 || nextUniform() >= settings_.jobErrorProbability) return "";
  counters_.jobsFailedOnDevice++;
  return "injected device error (job " + std::to_string(jobId) + ")";
}

}  // namespace kvtier
