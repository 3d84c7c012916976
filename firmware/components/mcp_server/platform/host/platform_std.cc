// Host platform: std::mutex, and one std::thread draining a bounded deque.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "mcp/platform.h"

namespace mcp {

Mutex::Mutex() : handle_(new std::mutex) {}
Mutex::~Mutex() { delete static_cast<std::mutex*>(handle_); }
void Mutex::Lock() { static_cast<std::mutex*>(handle_)->lock(); }
void Mutex::Unlock() { static_cast<std::mutex*>(handle_)->unlock(); }

namespace {

class StdWorker : public Worker {
 public:
  explicit StdWorker(size_t depth) : depth_(depth), thread_([this] { Loop(); }) {}

  ~StdWorker() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      jobs_.clear();
    }
    wake_.notify_one();
    thread_.join();
  }

  bool Post(Job job) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_ || jobs_.size() >= depth_) return false;
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
    return true;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  const size_t depth_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the other members exist
};

}  // namespace

std::unique_ptr<Worker> Worker::Create(const WorkerOptions& options) {
  return std::unique_ptr<Worker>(new StdWorker(options.queue_depth));
}

}  // namespace mcp
