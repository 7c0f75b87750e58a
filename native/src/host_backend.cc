#include "host_backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include <unistd.h>

#include "host_model.h"
#include "host_stream.h"
#include "poison.h"
#include "steady_ms.h"

namespace kvtier {

namespace {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using HostMemory = std::unique_ptr<uint8_t, FreeDeleter>;

// Page-aligned and touched, so later copies measure copying, not page faults.
HostMemory allocateZeroed(uint64_t bytes, const char* what) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes == 0 ? 4096 : bytes) != 0) {
    throw std::runtime_error(std::string("cannot allocate ") + std::to_string(bytes) + " bytes for the " + what);
  }
  std::memset(p, 0, bytes);
  return HostMemory(static_cast<uint8_t*>(p));
}

// The host's side of one job or forward (Completion::submitMs, enqueueMs).
// Here the stream thread takes the start mark once the submit has handed the
// task over, so the only host enqueue work after the mark is what is left of
// that hand-off call when the task starts: usually none, at most microseconds.
// The task may start and even finish before the call returns, so it reads the
// return time under the lock the submit holds until it is set.
struct HostSubmission {
  std::mutex mutex;
  double submitMs = -1;
  std::chrono::steady_clock::time_point handedOff{};

  void stamp(Completion& done, std::chrono::steady_clock::time_point start) {
    std::lock_guard<std::mutex> lock(mutex);
    done.submitMs = submitMs;
    done.enqueueMs = std::max(0.0, millisecondsBetween(start, handedOff));
  }
};

class HostBackend final : public Backend {
 public:
  HostBackend(const DeviceGeometry& geometry, const HostLink& link, CompletionSink& sink)
      : geometry_(geometry), link_(link), sink_(sink) {}

  ~HostBackend() override { shutdown(); }

  std::string deviceName() const override {
#if defined(__x86_64__)
    return "host (x86_64)";
#elif defined(__aarch64__)
    return "host (aarch64)";
#else
    return "host";
#endif
  }

  void open(const std::atomic<bool>& abort) override {
    // Touching more than the machine has would get the process killed rather
    // than an error; refuse up front.
    const uint64_t physical = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    const uint64_t needed = geometry_.gpuBytes + geometry_.cpuBytes;
    if (needed > physical) {
      throw std::runtime_error("the GPU buffer and CPU tier need " + std::to_string(needed) +
                               " bytes but this machine has " + std::to_string(physical));
    }
    gpu_ = allocateZeroed(geometry_.gpuBytes, "GPU buffer");
    const CpuTierGeometry& cpu = geometry_.cpu;
    uint64_t allocated = 0;
    for (uint64_t k = 0; k < cpu.numChunks; k++) {
      if (abort.load()) throw std::runtime_error("device closed while opening");
      chunks_.push_back(allocateZeroed(cpu.chunkBytes(k), "CPU tier"));
      allocated += cpu.chunkBytes(k);
      Completion progress;
      progress.kind = CompletionKind::AllocProgress;
      progress.allocatedBytes = allocated;
      progress.totalBytes = geometry_.cpuBytes;
      sink_.post(std::move(progress));
    }
    // The time origin of every span's startMs, as a GPU records one event
    // once the device is ready; on this clock it is also the host origin of
    // submitMs, so both share one axis exactly.
    origin_ = std::chrono::steady_clock::now();
    compute_.start();
    store_.start();
    load_.start();
  }

  void submitTransfer(TransferWork&& work) override {
    auto submission = std::make_shared<HostSubmission>();
    submission->submitMs = sinceOrigin(std::chrono::steady_clock::now());
    std::vector<std::shared_ptr<HostEvent>> waits = eventsOf(work.after);
    if (work.direction == Direction::GpuToCpu && work.orderAfterCompute) {
      // A mark behind everything submitted to compute so far.
      auto mark = std::make_shared<HostEvent>();
      compute_.enqueue([this, mark] { board_.signal(*mark); });
      waits.push_back(mark);
    }
    auto end = std::make_shared<HostEvent>();
    jobEnds_[work.jobId] = end;
    auto shared = std::make_shared<TransferWork>(std::move(work));
    handOff(streamFor(shared->direction), *submission,
            [this, shared, waits, end, submission] { runTransfer(*shared, waits, *end, *submission); });
  }

  void releaseJob(int64_t jobId) override { jobEnds_.erase(jobId); }

  void submitForward(ForwardWork&& work) override {
    auto submission = std::make_shared<HostSubmission>();
    submission->submitMs = sinceOrigin(std::chrono::steady_clock::now());
    std::vector<std::shared_ptr<HostEvent>> waits = eventsOf(work.after);
    auto shared = std::make_shared<ForwardWork>(std::move(work));
    handOff(compute_, *submission, [this, shared, waits, submission] { runForward(*shared, waits, *submission); });
  }

  void submitSync(int64_t token) override {
    auto remaining = std::make_shared<std::atomic<int>>(3);
    for (HostStream* stream : {&compute_, &store_, &load_}) {
      stream->enqueue([this, remaining, token] {
        if (remaining->fetch_sub(1) != 1) return;
        Completion done;
        done.kind = CompletionKind::Sync;
        done.id = token;
        sink_.post(std::move(done));
      });
    }
  }

  void submitTimedCopy(int64_t token, Direction direction, uint64_t bytes) override {
    streamFor(direction).enqueue([this, token, direction, bytes] {
      const auto start = std::chrono::steady_clock::now();
      if (direction == Direction::GpuToCpu) {
        std::memcpy(chunks_[0].get(), gpu_.get(), bytes);
      } else {
        std::memcpy(gpu_.get() + geometry_.gpuBytes - bytes, chunks_[0].get() + geometry_.cpu.chunkBytes(0) - bytes,
                    bytes);
      }
      Completion done;
      done.kind = CompletionKind::TimedCopy;
      done.id = token;
      done.startMs = sinceOrigin(start);
      done.elapsedMs = millisecondsSince(start);
      sink_.post(std::move(done));
    });
  }

  void readGpu(uint64_t offset, void* dst, uint64_t bytes) override { std::memcpy(dst, gpu_.get() + offset, bytes); }

  void writeGpu(uint64_t offset, const void* src, uint64_t bytes) override {
    std::memcpy(gpu_.get() + offset, src, bytes);
  }

  uint8_t* cpuChunk(uint32_t chunk) override { return chunks_[chunk].get(); }

  void shutdown() override {
    board_.abort();
    compute_.stop();
    store_.stop();
    load_.stop();
    jobEnds_.clear();
    chunks_.clear();
    gpu_.reset();
  }

 private:
  HostStream& streamFor(Direction direction) { return direction == Direction::GpuToCpu ? store_ : load_; }

  // Enqueues a job's or forward's task, noting when the hand-off returned.
  static void handOff(HostStream& stream, HostSubmission& submission, HostStream::Task task) {
    std::lock_guard<std::mutex> lock(submission.mutex);
    stream.enqueue(std::move(task));
    submission.handedOff = std::chrono::steady_clock::now();
  }

  std::vector<std::shared_ptr<HostEvent>> eventsOf(const std::vector<int64_t>& jobIds) {
    std::vector<std::shared_ptr<HostEvent>> events;
    for (int64_t id : jobIds) {
      auto it = jobEnds_.find(id);
      if (it != jobEnds_.end()) events.push_back(it->second);
    }
    return events;
  }

  bool waitAll(const std::vector<std::shared_ptr<HostEvent>>& events) {
    for (const auto& event : events) {
      if (!board_.wait(*event)) return false;
    }
    return true;
  }

  void runTransfer(const TransferWork& work, const std::vector<std::shared_ptr<HostEvent>>& waits, HostEvent& end,
                   HostSubmission& submission) {
    if (!waitAll(waits)) return;
    const auto start = std::chrono::steady_clock::now();
    if (work.delayMs > 0 && !board_.sleepFor(static_cast<uint64_t>(work.delayMs * 1e6))) return;
    Completion done;
    done.kind = CompletionKind::Job;
    done.id = work.jobId;
    done.copyPath = "memcpy";
    if (!work.injectedError.empty()) {
      // Failed on the device before copying: nothing it wrote is trusted, but
      // jobs ordered after it still run, as after a failed CUDA copy.
      done.error = work.injectedError;
      done.startMs = sinceOrigin(start);
      done.elapsedMs = millisecondsSince(start);
      submission.stamp(done, start);
      board_.signal(end);
      sink_.post(std::move(done));
      return;
    }
    const bool store = work.direction == Direction::GpuToCpu;
    std::atomic<int>& running = store ? storesRunning_ : loadsRunning_;
    const std::atomic<int>& other = store ? loadsRunning_ : storesRunning_;
    running.fetch_add(1);
    const bool otherBusy = other.load() > 0;
    for (const CopyRegion& r : work.plan.copies) {
      uint8_t* gpu = gpu_.get() + r.gpuOffset;
      uint8_t* cpu = chunks_[r.cpuChunk].get() + r.cpuOffset;
      if (store) {
        std::memcpy(cpu, gpu, r.bytes);
      } else {
        std::memcpy(gpu, cpu, r.bytes);
      }
    }
    for (const CopyRegion& r : work.plan.poison) {
      fillPoison(store ? chunks_[r.cpuChunk].get() + r.cpuOffset : gpu_.get() + r.gpuOffset, r.bytes);
    }
    const bool linkWaited = waitForLink(work.plan, start, otherBusy || other.load() > 0);
    running.fetch_sub(1);
    if (!linkWaited) return;
    done.startMs = sinceOrigin(start);
    done.elapsedMs = millisecondsSince(start);
    submission.stamp(done, start);
    board_.signal(end);
    sink_.post(std::move(done));
  }

  // The copy is a real memcpy; the link model only holds its completion back
  // until a GPU's host link would have moved the same bytes.
  bool waitForLink(const TransferPlan& plan, std::chrono::steady_clock::time_point start, bool otherBusy) {
    if (!link_.enabled()) return true;
    uint64_t bytes = 0;
    for (const CopyRegion& r : plan.copies) bytes += r.bytes;
    const double rate =
        otherBusy ? std::min(link_.oneWayBytesPerSecond, link_.bothWaysBytesPerSecond / 2) : link_.oneWayBytesPerSecond;
    const double linkNs = link_.jobLatencyNs + static_cast<double>(plan.copies.size()) * link_.regionOverheadNs +
                          static_cast<double>(bytes) / rate * 1e9;
    const double spentNs = millisecondsSince(start) * 1e6;
    if (linkNs <= spentNs) return true;
    return board_.sleepFor(static_cast<uint64_t>(linkNs - spentNs));
  }

  void runForward(const ForwardWork& work, const std::vector<std::shared_ptr<HostEvent>>& waits,
                  HostSubmission& submission) {
    if (!waitAll(waits)) return;
    const auto start = std::chrono::steady_clock::now();
    // The emulated compute comes before the writes, so a store that does not
    // wait for this forward reliably copies what was there before it. On a
    // GPU the model's kernels are the step's compute; here this backend's own
    // forward work runs after the emulated time, so the wait leaves out what
    // that work is expected to take (from the forwards before, per KV
    // position read): a step lasts the longer of the two, not their sum.
    const uint64_t positions = positionsRead(work.batch);
    const double expectedHostNs = kHostWorkShare * hostNsPerPosition_ * static_cast<double>(positions);
    const uint64_t waitNs =
        static_cast<double>(work.computeNs) > expectedHostNs ? work.computeNs - static_cast<uint64_t>(expectedHostNs) : 0;
    if (waitNs > 0 && !board_.sleepFor(waitNs)) return;
    const auto hostStart = std::chrono::steady_clock::now();
    Completion done;
    done.kind = CompletionKind::Forward;
    try {
      done.digests = runHostForward(geometry_.kv, work.modelSeed, reinterpret_cast<uint16_t*>(gpu_.get()), work.batch);
    } catch (const std::exception& e) {
      done.error = e.what();
    }
    if (positions > 0) {
      const double perPosition = millisecondsSince(hostStart) * 1e6 / static_cast<double>(positions);
      hostNsPerPosition_ = hostNsPerPosition_ == 0 ? perPosition : 0.8 * hostNsPerPosition_ + 0.2 * perPosition;
    }
    done.startMs = sinceOrigin(start);
    done.elapsedMs = millisecondsSince(start);
    submission.stamp(done, start);
    sink_.post(std::move(done));
  }

  // A span's start on this device's time axis (ms since open).
  double sinceOrigin(std::chrono::steady_clock::time_point start) const {
    return millisecondsBetween(origin_, start);
  }

  // KV positions a forward reads: each request's context, its new tokens included.
  static uint64_t positionsRead(const ForwardBatchData& batch) {
    uint64_t positions = 0;
    for (uint32_t r = 0; r < batch.numRequests; r++) positions += static_cast<uint64_t>(batch.contextEnd(r));
    return positions;
  }

  // Of the expected host work, the share the emulated wait leaves out: a
  // little under all of it, so a forward whose work runs faster than
  // expected still lasts about the modelled time.
  static constexpr double kHostWorkShare = 0.9;

  DeviceGeometry geometry_;
  HostLink link_;
  // Set once at open, before any stream thread starts; read-only afterwards.
  std::chrono::steady_clock::time_point origin_{};
  // This backend's forward work per KV position read, averaged over recent
  // forwards (compute stream thread only).
  double hostNsPerPosition_ = 0;
  CompletionSink& sink_;
  // Transfer jobs copying now, per direction: the link model's "other direction busy".
  std::atomic<int> storesRunning_{0};
  std::atomic<int> loadsRunning_{0};
  HostMemory gpu_;
  std::vector<HostMemory> chunks_;
  HostEventBoard board_;
  HostStream compute_;
  HostStream store_;
  HostStream load_;
  // Completion marks of jobs whose completion has not been consumed yet
  // (JS thread only).
  std::unordered_map<int64_t, std::shared_ptr<HostEvent>> jobEnds_;
};

}  // namespace

std::unique_ptr<Backend> createHostBackend(const DeviceGeometry& geometry, const HostLink& link, CompletionSink& sink) {
  return std::make_unique<HostBackend>(geometry, link, sink);
}

}  // namespace kvtier
