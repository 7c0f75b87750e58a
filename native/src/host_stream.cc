#include "host_stream.h"

#include <chrono>

namespace kvtier {

void HostEventBoard::signal(HostEvent& event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    event.done = true;
  }
  changed_.notify_all();
}

bool HostEventBoard::wait(const HostEvent& event) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return event.done || aborted_; });
  return event.done;
}

bool HostEventBoard::sleepFor(uint64_t ns) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  std::unique_lock<std::mutex> lock(mutex_);
  return !changed_.wait_until(lock, deadline, [&] { return aborted_; });
}

void HostEventBoard::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }
  changed_.notify_all();
}

HostStream::~HostStream() { stop(); }

void HostStream::start() { thread_ = std::thread([this] { run(); }); }

void HostStream::enqueue(Task task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  queued_.notify_one();
}

void HostStream::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    tasks_.clear();
  }
  queued_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void HostStream::run() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queued_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace kvtier
