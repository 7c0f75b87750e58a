// Host backend streams: each is an ordered queue of tasks run by its own
// thread. Completion marks (events) let one stream wait for another.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace kvtier {

// A completion mark; `done` is guarded by its board's mutex.
struct HostEvent {
  bool done = false;
};

// One lock and condition for every mark of a device: waits are few, and
// shutdown wakes every waiter (and sleeper) at once.
class HostEventBoard {
 public:
  void signal(HostEvent& event);
  // Blocks until the event is done; false if the board was aborted first.
  bool wait(const HostEvent& event);
  // Sleeps for `ns` unless aborted; false if aborted.
  bool sleepFor(uint64_t ns);
  void abort();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool aborted_ = false;
};

class HostStream {
 public:
  using Task = std::function<void()>;

  HostStream() = default;
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;
  ~HostStream();

  void start();
  void enqueue(Task task);
  // Discards queued tasks and joins the thread; the running task finishes
  // (blocking waits in it return once the board is aborted).
  void stop();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvtier
