// Host only: one libwebsockets context and service thread shared by every
// WebSocket link in the process (the simulator runs many devices).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct lws;
struct lws_context;

namespace voxgate {

// What the loop calls back on its service thread.
class LwsClient {
 public:
  virtual ~LwsClient() = default;
  virtual int OnLwsEvent(lws* wsi, int reason, void* in, size_t len) = 0;
  virtual void OnTick(uint64_t now_ms) = 0;  // every 100 ms: deadlines, reconnects
  virtual void OnWake() = 0;                // after Wake(): flush queued sends
};

class LwsLoop {
 public:
  LwsLoop();
  ~LwsLoop();  // stops the thread; clients must have detached
  LwsLoop(const LwsLoop&) = delete;
  LwsLoop& operator=(const LwsLoop&) = delete;

  bool ok() const { return context_ != nullptr; }
  lws_context* context() const { return context_; }

  // Runs `task` on the service thread. Thread-safe.
  void Post(std::function<void()> task);
  // Runs `task` on the service thread and waits for it (not from that thread).
  void Run(std::function<void()> task);
  // Makes the service thread call OnWake on every client. Thread-safe.
  void Wake();

  // Service thread only (use Post/Run from elsewhere).
  void Attach(LwsClient* client);
  void Detach(LwsClient* client);

  struct Timer;  // the 100 ms tick's scheduler entry

  // Entry points for the lws callbacks (service thread).
  void OnCancel();
  void OnTick();

 private:
  void ScheduleTick();

  lws_context* context_ = nullptr;
  std::unique_ptr<Timer> tick_;
  std::mutex mutex_;
  std::vector<std::function<void()>> posted_;
  std::vector<LwsClient*> clients_;  // service thread only
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace voxgate
