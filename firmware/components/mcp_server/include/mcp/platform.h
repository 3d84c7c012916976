// The platform seam of the MCP server: a mutex, and a task fed by a queue that
// runs tool calls so a slow tool never blocks the link. std::thread/std::mutex
// on the host (platform/host), FreeRTOS on the device (platform/freertos).
// Nothing else in the component touches threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace mcp {

class Mutex {
 public:
  Mutex();
  ~Mutex();
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void Lock();
  void Unlock();

 private:
  void* handle_;
};

class ScopedLock {
 public:
  explicit ScopedLock(Mutex& mutex) : mutex_(mutex) { mutex_.Lock(); }
  ~ScopedLock() { mutex_.Unlock(); }
  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;

 private:
  Mutex& mutex_;
};

struct WorkerOptions {
  const char* name = "mcp_tools";
  uint32_t stack_bytes = 7168;  // FreeRTOS only (bytes on ESP-IDF); see firmware/README.md "Stacks"
  int priority = 2;             // FreeRTOS only
  size_t queue_depth = 8;       // further jobs are refused, not queued
};

class Worker {
 public:
  using Job = std::function<void()>;

  static std::unique_ptr<Worker> Create(const WorkerOptions& options);
  virtual ~Worker() = default;  // implementations finish the running job and drop queued ones

  // False when the queue is full (the caller answers "busy").
  virtual bool Post(Job job) = 0;
};

}  // namespace mcp
