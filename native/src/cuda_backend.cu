#include "cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include "copy_descriptors.h"
#include "copy_method.h"
#include "cuda_check.cuh"
#include "cuda_kernels.cuh"
#include "cuda_poller.cuh"
#include "cuda_staging.cuh"
#include "forward_pack.h"
#include "poison.h"
#include "steady_ms.h"

namespace kvtier {

namespace {

// CTAs per SM of the emulated compute: at least one on every SM, as a real
// forward's kernels have; four of 256 threads give every SM's schedulers
// warps to issue while leaving room for the copy kernel's CTAs.
constexpr unsigned kBusyCtasPerSm = 4;

// The emulated compute's rate, measured once per device and process. Ranks
// that share a GPU and open together would otherwise time the busy kernel
// against each other's calibration runs and each take too few iterations.
template <typename Calibrate>
double busyRateOf(uint32_t deviceIndex, Calibrate calibrate) {
  static std::mutex mutex;
  static std::unordered_map<uint32_t, double> rates;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = rates.find(deviceIndex);
  if (it != rates.end()) return it->second;
  double rate = 0;
  check(calibrate(&rate), "calibrating the emulated compute");
  rates.emplace(deviceIndex, rate);
  return rate;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const DeviceConfig& config, const DeviceGeometry& geometry, CompletionSink& sink)
      : geometry_(geometry),
        sink_(sink),
        device_(static_cast<int>(config.deviceIndex)),
        copyMethod_(config.copyMethod),
        computePoller_(device_, sink),
        storePoller_(device_, sink),
        loadPoller_(device_, sink) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error("backend = 'cuda': " + cudaMessage("cudaGetDeviceCount", status));
    }
    if (device_ >= count) {
      throw std::invalid_argument("deviceIndex = " + std::to_string(device_) + " is out of range: " +
                                  std::to_string(count) + " CUDA device(s) visible");
    }
    cudaDeviceProp properties{};
    check(cudaGetDeviceProperties(&properties, device_), "cudaGetDeviceProperties");
    name_ = properties.name;
    busyGrid_ = static_cast<unsigned>(std::max(1, properties.multiProcessorCount)) * kBusyCtasPerSm;
  }

  ~CudaBackend() override { shutdown(); }

  std::string deviceName() const override { return name_; }

  void open(const std::atomic<bool>& abort) override {
    // Pinned memory cannot be swapped out: asking for more than the machine
    // has gets the process killed rather than an error, so refuse up front.
    const uint64_t physical = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    if (geometry_.cpuBytes > physical) {
      throw std::runtime_error("the CPU tier needs " + std::to_string(geometry_.cpuBytes) +
                               " bytes of pinned memory but this machine has " + std::to_string(physical));
    }
    useDevice();
    check(loadKernels(), "loading the CUDA kernels");
    void* p = nullptr;
    check(cudaMalloc(&p, geometry_.gpuBytes),
          ("cudaMalloc of " + std::to_string(geometry_.gpuBytes) + " bytes (GPU KV cache)").c_str());
    gpu_ = static_cast<uint8_t*>(p);
    check(cudaMemset(gpu_, 0, geometry_.gpuBytes), "cudaMemset (GPU KV cache)");

    // Poison source: one block region of 0xDEAD words, in device memory.
    const uint64_t segmentBytes = geometry_.kv.segmentBytes();
    check(cudaMalloc(&p, segmentBytes), "cudaMalloc (poison pattern)");
    poison_ = static_cast<uint8_t*>(p);
    std::vector<uint8_t> pattern(segmentBytes);
    fillPoison(pattern.data(), segmentBytes);
    check(cudaMemcpy(poison_, pattern.data(), segmentBytes, cudaMemcpyHostToDevice), "cudaMemcpy (poison pattern)");

    // A host flag the spin kernels watch, so shutdown does not wait out
    // emulated compute or injected delays.
    check(cudaHostAlloc(&p, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc (abort flag)");
    abortHost_ = static_cast<volatile int*>(p);
    *abortHost_ = 0;
    check(cudaHostGetDevicePointer(&p, const_cast<int*>(abortHost_), 0), "cudaHostGetDevicePointer");
    abortDevice_ = static_cast<const volatile int*>(p);

    // The forward first: when SMs free up, the block scheduler starts the
    // compute stream's CTAs before the copy kernels'.
    int lowest = 0;
    int highest = 0;
    check(cudaDeviceGetStreamPriorityRange(&lowest, &highest), "cudaDeviceGetStreamPriorityRange");
    check(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, highest), "cudaStreamCreateWithPriority");
    check(cudaStreamCreateWithPriority(&store_, cudaStreamNonBlocking, lowest), "cudaStreamCreateWithPriority");
    check(cudaStreamCreateWithPriority(&load_, cudaStreamNonBlocking, lowest), "cudaStreamCreateWithPriority");
    check(cudaMalloc(&p, sizeof(uint32_t)), "cudaMalloc (compute sink)");
    busySink_ = static_cast<uint32_t*>(p);
    busyIterationsPerNs_ = busyRateOf(static_cast<uint32_t>(device_), [&](double* rate) {
      return calibrateBusy(compute_, busyGrid_, abortDevice_, busySink_, rate);
    });
    check(cudaEventCreateWithFlags(&computeMark_, cudaEventDisableTiming), "cudaEventCreateWithFlags");

    const CpuTierGeometry& cpu = geometry_.cpu;
    uint64_t allocated = 0;
    for (uint64_t k = 0; k < cpu.numChunks; k++) {
      if (abort.load()) throw std::runtime_error("device closed while opening");
      const uint64_t bytes = cpu.chunkBytes(k);
      // Pinned, never pageable: DMA needs it to reach full bandwidth. Mapped:
      // the copy kernel reads and writes it directly.
      check(cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped),
            ("cudaHostAlloc of " + std::to_string(bytes) + " bytes (CPU tier chunk " + std::to_string(k) + " of " +
             std::to_string(cpu.numChunks) + ")")
                .c_str());
      chunks_.push_back(static_cast<uint8_t*>(p));
      void* mapped = nullptr;
      check(cudaHostGetDevicePointer(&mapped, p, 0), "cudaHostGetDevicePointer (CPU tier chunk)");
      chunksDevice_.push_back(static_cast<uint8_t*>(mapped));
      std::memset(p, 0, bytes);
      allocated += bytes;
      Completion progress;
      progress.kind = CompletionKind::AllocProgress;
      progress.allocatedBytes = allocated;
      progress.totalBytes = geometry_.cpuBytes;
      sink_.post(std::move(progress));
    }
    presizeStepBuffers();
    // cudaMemset ran on the legacy stream, which the non-blocking streams do
    // not wait for.
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    // The time origin of every span's startMs: recorded once the device is
    // idle, and waited for, so the pollers only ever compare later events to it.
    check(cudaEventCreateWithFlags(&origin_, cudaEventDefault), "cudaEventCreateWithFlags (time origin)");
    check(cudaEventRecord(origin_, compute_), "cudaEventRecord (time origin)");
    check(cudaEventSynchronize(origin_), "cudaEventSynchronize (time origin)");
    // The same origin on the host's steady clock, for submitMs. The event
    // completed just before the sync returned: the host origin is late by the
    // sync's wake-up latency (microseconds), so submit times read that much
    // early against the device's start times.
    hostOrigin_ = std::chrono::steady_clock::now();
    computePoller_.start(origin_);
    storePoller_.start(origin_);
    loadPoller_.start(origin_);
  }

  void submitTransfer(TransferWork&& work) override {
    const double submitMs = hostSinceOrigin(std::chrono::steady_clock::now());
    useDevice();
    const bool store = work.direction == Direction::GpuToCpu;
    cudaStream_t stream = store ? store_ : load_;
    // Everything the host prepares (descriptors, address lists) comes before
    // the job's start event, so its timed span is the copy alone.
    const CopyMethod method = chooseCopyMethod(copyMethod_, work.plan, forwardsSubmitted_ > 0);
    JobEvents events;
    if (method == CopyMethod::Kernel) {
      events.tiles = prepareCopyKernel(work.plan, store);
    } else {
      prepareCopies(work.plan, store);
    }
    try {
      events.start = takeEvent();
      events.end = takeEvent();
      waitForJobs(stream, work.after);
      if (store && work.orderAfterCompute) {
        // Re-recording the mark later does not affect waits already enqueued.
        check(cudaEventRecord(computeMark_, compute_), "cudaEventRecord (compute mark)");
        check(cudaStreamWaitEvent(stream, computeMark_, 0), "cudaStreamWaitEvent (compute mark)");
      }
      check(cudaEventRecord(events.start, stream), "cudaEventRecord (job start)");
    } catch (...) {
      // Nothing of the job's own work is queued: it was never submitted.
      if (events.start != nullptr) eventPool_.push_back(events.start);
      if (events.end != nullptr) eventPool_.push_back(events.end);
      if (events.tiles.capacity > 0) tilePool_.push_back(std::move(events.tiles));
      throw;
    }
    // From here on the job is submitted: whatever fails now is reported by
    // its one completion, after what was queued has run, never thrown. On an
    // idle stream the start event may already have run: the host time from
    // here to the end event's record lies inside the job's device span.
    const auto enqueueFrom = std::chrono::steady_clock::now();
    PollEntry entry;
    entry.submitMs = submitMs;
    entry.kind = CompletionKind::Job;
    entry.id = work.jobId;
    entry.timingStart = events.start;
    entry.error = work.injectedError;
    entry.copyPath = method == CopyMethod::Kernel ? "kernel" : "dma";
    try {
      if (work.delayMs > 0) {
        check(launchSpin(stream, static_cast<uint64_t>(work.delayMs * 1e6), abortDevice_), "delay kernel launch");
      }
      // An injected failure stands for a copy the device could not run.
      if (entry.error.empty()) {
        if (method == CopyMethod::Kernel) {
          if (events.tiles.capacity > 0) check(launchCopy(stream, events.tiles.device, tileCount_), "copy kernel launch");
        } else {
          entry.copyPath = enqueuePreparedCopies(stream);
        }
      }
    } catch (const std::exception& e) {
      entry.error = e.what();
    }
    const cudaError_t ended = cudaEventRecord(events.end, stream);
    if (ended == cudaSuccess) {
      entry.waitFor = {events.end};
    } else {
      cudaGetLastError();
      if (entry.error.empty()) entry.error = cudaMessage("cudaEventRecord (job end)", ended);
      entry.syncStream = stream;
    }
    entry.enqueueMs = millisecondsSince(enqueueFrom);
    jobs_[work.jobId] = std::move(events);
    (store ? storePoller_ : loadPoller_).push(std::move(entry));
  }

  void releaseJob(int64_t jobId) override {
    auto it = jobs_.find(jobId);
    if (it == jobs_.end()) return;
    eventPool_.push_back(it->second.start);
    eventPool_.push_back(it->second.end);
    // The job has finished: its copy kernel no longer reads the tiles.
    if (it->second.tiles.capacity > 0) tilePool_.push_back(std::move(it->second.tiles));
    jobs_.erase(it);
  }

  // No copy engine: the packed inputs are staged into device memory by a
  // kernel reading mapped pinned memory, and the digests are written back
  // into mapped pinned memory by a kernel, so the step never queues behind
  // transfers on the copy engines. One forward at a time (the device
  // wrapper refuses a second), so the staging buffers are free to reuse.
  void submitForward(ForwardWork&& work) override {
    const double submitMs = hostSinceOrigin(std::chrono::steady_clock::now());
    useDevice();
    const ForwardBatchData& b = work.batch;
    const uint32_t n = b.numRequests;
    forwardsSubmitted_++;
    const ForwardLayout layout = layoutForward(b);
    hostStaging_.grow(layout.stagedBytes, retiredStaging_);
    deviceStaging_.grow(layout.deviceBytes, retiredStaging_);
    hostDigests_.grow(n * sizeof(uint32_t) + 16, retiredStaging_);
    packForward(layout, b, hostStaging_.data);
    const DeviceForwardBatch db = bindForward(layout, deviceStaging_.device);

    PollEntry entry;
    entry.kind = CompletionKind::Forward;
    entry.ownsEvents = true;
    try {
      entry.timingStart = createEvent();
      entry.waitFor = {createEvent()};
      waitForJobs(compute_, work.after);
      check(cudaEventRecord(entry.timingStart, compute_), "cudaEventRecord (forward start)");
    } catch (...) {
      entry.destroyOwnedEvents();
      throw;
    }
    // From the start event on, a failure is the forward's completion (it
    // rejects once what was queued has run), never a throw: the staging
    // buffers stay busy until then, so the next forward cannot reuse them
    // under kernels still queued. The launches from here to the end event
    // are host time inside the forward's span when the stream was idle.
    const auto enqueueFrom = std::chrono::steady_clock::now();
    entry.submitMs = submitMs;
    try {
      check(launchStage(compute_, deviceStaging_.device, hostStaging_.device, layout.stagedBytes),
            "stage kernel launch (forward inputs)");
      // The emulated compute comes before the KV writes.
      if (work.computeNs > 0) check(launchBusy(compute_, busyGrid_, busyIterations(work.computeNs), abortDevice_,
                                               busySink_),
                                    "compute kernel launch");
      check(launchForward(compute_, geometry_.kv, work.modelSeed, reinterpret_cast<uint16_t*>(gpu_), db),
            "forward kernel launch");
      check(launchPublishDigests(compute_, db.digests, reinterpret_cast<uint32_t*>(hostDigests_.device), n),
            "digest kernel launch");
    } catch (const std::exception& e) {
      entry.error = e.what();
    }
    const cudaError_t ended = cudaEventRecord(entry.waitFor.back(), compute_);
    if (ended != cudaSuccess) {
      cudaGetLastError();
      if (entry.error.empty()) entry.error = cudaMessage("cudaEventRecord (forward end)", ended);
      cudaEventDestroy(entry.waitFor.back());
      entry.waitFor.clear();
      entry.syncStream = compute_;
    }
    entry.enqueueMs = millisecondsSince(enqueueFrom);
    const uint32_t* digests = reinterpret_cast<const uint32_t*>(hostDigests_.data);
    entry.finish = [digests, n](Completion& done) { done.digests.assign(digests, digests + n); };
    computePoller_.push(std::move(entry));
  }

  // One part per stream, each behind that stream's poller, as the host
  // backend queues one task per stream: the Sync completion is posted only
  // after every completion of work submitted before it.
  void submitSync(int64_t token) override {
    useDevice();
    const std::array<cudaStream_t, 3> streams{compute_, store_, load_};
    std::array<PollEntry, 3> parts;
    auto shared = std::make_shared<SharedCompletion>(3);
    try {
      for (size_t i = 0; i < parts.size(); i++) {
        parts[i].kind = CompletionKind::Sync;
        parts[i].id = token;
        parts[i].ownsEvents = true;
        parts[i].shared = shared;
        parts[i].waitFor.push_back(createEvent());
        check(cudaEventRecord(parts[i].waitFor.back(), streams[i]), "cudaEventRecord (synchronize)");
      }
    } catch (...) {
      for (PollEntry& part : parts) part.destroyOwnedEvents();
      throw;
    }
    computePoller_.push(std::move(parts[0]));
    storePoller_.push(std::move(parts[1]));
    loadPoller_.push(std::move(parts[2]));
  }

  void submitTimedCopy(int64_t token, Direction direction, uint64_t bytes) override {
    useDevice();
    const bool store = direction == Direction::GpuToCpu;
    cudaStream_t stream = store ? store_ : load_;
    PollEntry entry;
    entry.kind = CompletionKind::TimedCopy;
    entry.id = token;
    entry.ownsEvents = true;
    // Loads use the ends of both buffers, so a store and a load can run at once
    // on disjoint bytes.
    void* dst = store ? static_cast<void*>(chunks_[0]) : gpu_ + geometry_.gpuBytes - bytes;
    const void* src =
        store ? static_cast<const void*>(gpu_) : chunks_[0] + geometry_.cpu.chunkBytes(0) - bytes;
    try {
      entry.timingStart = createEvent();
      entry.waitFor = {createEvent()};
      check(cudaEventRecord(entry.timingStart, stream), "cudaEventRecord (copy start)");
      check(cudaMemcpyAsync(dst, src, bytes, store ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync (contiguous copy)");
      check(cudaEventRecord(entry.waitFor.back(), stream), "cudaEventRecord (copy end)");
    } catch (...) {
      entry.destroyOwnedEvents();
      throw;
    }
    (store ? storePoller_ : loadPoller_).push(std::move(entry));
  }

  void readGpu(uint64_t offset, void* dst, uint64_t bytes) override {
    useDevice();
    check(cudaMemcpy(dst, gpu_ + offset, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (read GPU block)");
  }

  void writeGpu(uint64_t offset, const void* src, uint64_t bytes) override {
    useDevice();
    check(cudaMemcpy(gpu_ + offset, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (write GPU block)");
    // From pageable memory cudaMemcpy may return once the bytes are staged,
    // before they reach the GPU buffer; the copy and compute streams do not
    // wait for the legacy stream, so a transfer or forward submitted next
    // could read the old bytes. Wait for the copy itself.
    check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize (write GPU block)");
  }

  uint8_t* cpuChunk(uint32_t chunk) override { return chunks_[chunk]; }

  void shutdown() override {
    if (shutDown_) return;
    shutDown_ = true;
    cudaSetDevice(device_);
    if (abortHost_ != nullptr) *abortHost_ = 1;
    for (cudaStream_t stream : {compute_, store_, load_}) {
      if (stream != nullptr) cudaStreamSynchronize(stream);
    }
    computePoller_.stop();
    storePoller_.stop();
    loadPoller_.stop();
    for (auto& [id, events] : jobs_) {
      cudaEventDestroy(events.start);
      cudaEventDestroy(events.end);
    }
    jobs_.clear();
    for (cudaEvent_t e : eventPool_) cudaEventDestroy(e);
    eventPool_.clear();
    if (computeMark_ != nullptr) cudaEventDestroy(computeMark_);
    if (origin_ != nullptr) cudaEventDestroy(origin_);
    origin_ = nullptr;
    for (cudaStream_t stream : {compute_, store_, load_}) {
      if (stream != nullptr) cudaStreamDestroy(stream);
    }
    compute_ = store_ = load_ = nullptr;
    hostStaging_.release();
    deviceStaging_.release();
    hostDigests_.release();
    retiredStaging_.clear();
    tilePool_.clear();
    if (busySink_ != nullptr) cudaFree(busySink_);
    busySink_ = nullptr;
    for (uint8_t* chunk : chunks_) cudaFreeHost(chunk);
    chunks_.clear();
    chunksDevice_.clear();
    if (poison_ != nullptr) cudaFree(poison_);
    if (gpu_ != nullptr) cudaFree(gpu_);
    if (abortHost_ != nullptr) cudaFreeHost(const_cast<int*>(abortHost_));
    poison_ = gpu_ = nullptr;
    abortHost_ = nullptr;
  }

 private:
  struct JobEvents {
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
    StagingBuffer tiles{StagingKind::MappedHost};  // the copy kernel's work list, if it ran one
  };

  // The step path's buffers, sized from the geometry at open so that steps
  // rarely grow them (and growth never frees): the forward's staging for a
  // batch of up to kPresizeRequests requests and kPresizeTokens tokens whose
  // block tables cover every GPU block, and one tile buffer per copy stream
  // for a job moving up to kPresizeJobBytes.
  void presizeStepBuffers() {
    constexpr uint64_t kPresizeRequests = 1024;
    constexpr uint64_t kPresizeTokens = 8192;
    constexpr uint64_t kPresizeJobBytes = 256ull << 20;
    const uint64_t tables = geometry_.kv.numGpuBlocks;
    // Per request: table offset, start, token offset, sampled index, pair offset, digest.
    const uint64_t staged = 16 * 1024 + 4 * tables + kPresizeRequests * (4 * 5 + 8) + 4 * kPresizeTokens;
    hostStaging_.ensure(staged);
    deviceStaging_.ensure(staged + 8 * kPresizeTokens + 16);
    hostDigests_.ensure(kPresizeRequests * sizeof(uint32_t) + 16);
    const uint64_t jobBytes = std::min<uint64_t>(kPresizeJobBytes, geometry_.gpuBytes);
    const uint64_t regions = std::min<uint64_t>(jobBytes / std::max<uint64_t>(geometry_.kv.segmentBytes(), 1),
                                                geometry_.kv.numGpuBlocks * geometry_.kv.segments);
    const uint64_t tiles = jobBytes / kCopyTileBytes + regions + 1;
    for (int stream = 0; stream < 2; stream++) {
      StagingBuffer buffer{StagingKind::MappedHost};
      buffer.ensure(tiles * sizeof(CopyDescriptor));
      tilePool_.push_back(std::move(buffer));
    }
  }

  uint64_t busyIterations(uint64_t ns) const {
    const double iterations = std::ceil(static_cast<double>(ns) * busyIterationsPerNs_);
    return iterations >= 9.0e18 ? 9'000'000'000'000'000'000ull : static_cast<uint64_t>(iterations);
  }

  // The smallest pooled tile buffer that holds `bytes`, else a new one. A
  // buffer is never grown in place: freeing pinned memory waits for the whole
  // device, which would stall the JS thread behind the copies in flight.
  StagingBuffer takeTileBuffer(size_t bytes) {
    size_t best = tilePool_.size();
    for (size_t i = 0; i < tilePool_.size(); i++) {
      const bool fits = tilePool_[i].capacity >= bytes;
      if (fits && (best == tilePool_.size() || tilePool_[i].capacity < tilePool_[best].capacity)) best = i;
    }
    if (best < tilePool_.size()) {
      StagingBuffer buffer = std::move(tilePool_[best]);
      tilePool_.erase(tilePool_.begin() + static_cast<std::ptrdiff_t>(best));
      return buffer;
    }
    size_t capacity = 4096;
    while (capacity < bytes) capacity *= 2;
    StagingBuffer buffer{StagingKind::MappedHost};
    buffer.ensure(capacity);
    return buffer;
  }

  // The plan's copies and poison fills as the copy kernel's tiles, largest
  // first (a short tile left for last would stretch the job's tail), in a
  // mapped buffer that must outlive the kernel; sets tileCount_.
  StagingBuffer prepareCopyKernel(const TransferPlan& plan, bool store) {
    tiles_.clear();
    appendCopyDescriptors(plan, store, CopyEndpoints{gpu_, &chunksDevice_, poison_}, tiles_);
    orderTilesLargestFirst(tiles_);
    tileCount_ = tiles_.size();
    if (tiles_.empty()) return StagingBuffer{StagingKind::MappedHost};
    const size_t bytes = tiles_.size() * sizeof(CopyDescriptor);
    StagingBuffer buffer = takeTileBuffer(bytes);
    std::memcpy(buffer.data, tiles_.data(), bytes);
    return buffer;
  }

  // The plan's copies (one per coalesced run) and poison fills (from the
  // device's poison segment) as one address list, so that they go out as one
  // batch rather than a copy per block segment.
  void prepareCopies(const TransferPlan& plan, bool store) {
    dsts_.clear();
    srcs_.clear();
    sizes_.clear();
    for (const CopyRegion& r : plan.copies) {
      uint8_t* gpu = gpu_ + r.gpuOffset;
      uint8_t* cpu = chunks_[r.cpuChunk] + r.cpuOffset;
      dsts_.push_back(store ? cpu : gpu);
      srcs_.push_back(store ? gpu : cpu);
      sizes_.push_back(r.bytes);
    }
    for (const CopyRegion& r : plan.poison) {
      dsts_.push_back(store ? static_cast<void*>(chunks_[r.cpuChunk] + r.cpuOffset) : gpu_ + r.gpuOffset);
      srcs_.push_back(poison_);
      sizes_.push_back(r.bytes);
    }
  }

  // Enqueues what prepareCopies listed; returns how the copies went out:
  // "dma" (one region), "dma-batch", or "dma-per-region" with the batch API's
  // refusal. A refusal holds for this job only, unless the API is missing
  // altogether: falling back for the rest of the process would turn every
  // later job of small regions into thousands of separate copies.
  std::string enqueuePreparedCopies(cudaStream_t stream) {
    // Unified addressing tells each copy's direction (poison fills of a load
    // are device to device).
    const cudaMemcpyKind kind = cudaMemcpyDefault;
    std::string path = "dma";
    if (sizes_.size() == 1) {
      check(cudaMemcpyAsync(dsts_[0], srcs_[0], sizes_[0], kind, stream), "cudaMemcpyAsync (transfer)");
    } else if (sizes_.size() > 1) {
      std::string refusal = batchMissing_;
#if CUDART_VERSION >= 12080
      if (refusal.empty()) {
        cudaMemcpyAttributes attributes{};
        // Stream order on both sides: a load may read CPU blocks a store
        // (on the other copy stream) wrote just before it.
        attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        attributes.flags = cudaMemcpyFlagDefault;
        size_t attributeIndex = 0;
#if CUDART_VERSION >= 13000
        const cudaError_t status = cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), sizes_.size(),
                                                        &attributes, &attributeIndex, 1, stream);
#else
        size_t failIndex = 0;
        const cudaError_t status = cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), sizes_.size(),
                                                        &attributes, &attributeIndex, 1, &failIndex, stream);
#endif
        if (status == cudaSuccess) {
          path = "dma-batch";
        } else {
          cudaGetLastError();
          refusal = cudaMessage("cudaMemcpyBatchAsync", status);
          if (status == cudaErrorNotSupported || status == cudaErrorCallRequiresNewerDriver) batchMissing_ = refusal;
        }
      }
#else
      refusal = "cudaMemcpyBatchAsync: built with a CUDA runtime older than 12.8";
#endif
      if (path != "dma-batch") {
        // Copies a refused batch queued before it failed are repeated in
        // stream order, which writes the same bytes again.
        for (size_t i = 0; i < sizes_.size(); i++) {
          check(cudaMemcpyAsync(dsts_[i], srcs_[i], sizes_[i], kind, stream), "cudaMemcpyAsync (transfer)");
        }
        path = "dma-per-region (" + refusal + ")";
      }
    }
    return path;
  }

  void useDevice() { check(cudaSetDevice(device_), "cudaSetDevice"); }

  // A host time on the axis of startMs (ms since the origin event completed).
  double hostSinceOrigin(std::chrono::steady_clock::time_point t) const {
    return millisecondsBetween(hostOrigin_, t);
  }

  cudaEvent_t takeEvent() {
    if (eventPool_.empty()) return createEvent();
    cudaEvent_t event = eventPool_.back();
    eventPool_.pop_back();
    return event;
  }

  void waitForJobs(cudaStream_t stream, const std::vector<int64_t>& jobIds) {
    for (int64_t id : jobIds) {
      auto it = jobs_.find(id);
      if (it != jobs_.end()) check(cudaStreamWaitEvent(stream, it->second.end, 0), "cudaStreamWaitEvent (after)");
    }
  }

  DeviceGeometry geometry_;
  CompletionSink& sink_;
  int device_;
  CopyMethod copyMethod_;
  std::string name_;
  bool shutDown_ = false;

  uint8_t* gpu_ = nullptr;
  uint8_t* poison_ = nullptr;
  std::vector<uint8_t*> chunks_;
  std::vector<uint8_t*> chunksDevice_;  // the same chunks as kernels address them
  uint32_t* busySink_ = nullptr;
  unsigned busyGrid_ = 1;
  double busyIterationsPerNs_ = 0;
  volatile int* abortHost_ = nullptr;
  const volatile int* abortDevice_ = nullptr;

  cudaStream_t compute_ = nullptr;
  cudaStream_t store_ = nullptr;
  cudaStream_t load_ = nullptr;
  cudaEvent_t computeMark_ = nullptr;
  // Destroyed only after the pollers stopped: they read it from their threads.
  cudaEvent_t origin_ = nullptr;
  // Host steady clock when origin_ had completed; set at open, before any submit.
  std::chrono::steady_clock::time_point hostOrigin_{};
  CudaPoller computePoller_;
  CudaPoller storePoller_;
  CudaPoller loadPoller_;

  // JS thread only.
  std::unordered_map<int64_t, JobEvents> jobs_;
  std::vector<cudaEvent_t> eventPool_;
  std::vector<void*> dsts_;
  std::vector<void*> srcs_;
  std::vector<size_t> sizes_;
  // Why the batch API is unusable in this process; empty: try it per job.
  std::string batchMissing_;
  std::vector<CopyDescriptor> tiles_;
  size_t tileCount_ = 0;
  std::vector<StagingBuffer> tilePool_;
  // Forwards submitted on this device: its copies run beside the model (auto's rule).
  uint64_t forwardsSubmitted_ = 0;
  StagingBuffer hostStaging_{StagingKind::MappedHost};
  StagingBuffer deviceStaging_{StagingKind::Device};
  StagingBuffer hostDigests_{StagingKind::MappedHost};
  // Buffers outgrown on the step path, freed at shutdown.
  std::vector<StagingBuffer> retiredStaging_;
};

}  // namespace

std::unique_ptr<Backend> createCudaBackend(const DeviceConfig& config, const DeviceGeometry& geometry,
                                           CompletionSink& sink) {
  return std::make_unique<CudaBackend>(config, geometry, sink);
}

int cudaDeviceCountOrZero() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

CudaDeviceProperties cudaDeviceProperties(int deviceIndex) {
  const int count = cudaDeviceCountOrZero();
  if (deviceIndex < 0 || deviceIndex >= count) {
    throw std::invalid_argument("cudaDeviceProperties: deviceIndex = " + std::to_string(deviceIndex) +
                                " is out of range: " + std::to_string(count) + " CUDA device(s) visible");
  }
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, deviceIndex), "cudaGetDeviceProperties");
  CudaDeviceProperties out;
  out.name = p.name;
  out.totalMemoryBytes = p.totalGlobalMem;
  out.computeMajor = p.major;
  out.computeMinor = p.minor;
  check(cudaDriverGetVersion(&out.driverVersion), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&out.runtimeVersion), "cudaRuntimeGetVersion");
  return out;
}

}  // namespace kvtier
