#include "lws_loop.h"

#include <libwebsockets.h>

#include <algorithm>
#include <condition_variable>

#include "trust_roots.h"
#include "voxgate/protocol.h"

namespace voxgate {

// Standard layout with the sul first, so the scheduler's pointer leads back here.
struct LwsLoop::Timer {
  lws_sorted_usec_list_t sul;
  LwsLoop* loop;
};

namespace {

constexpr lws_usec_t kTickUs = 100 * LWS_US_PER_MS;

int ProtocolCallback(lws* wsi, enum lws_callback_reasons reason, void* user, void* in, size_t len) {
  if (reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED) {
    auto* loop = static_cast<LwsLoop*>(lws_context_user(lws_get_context(wsi)));
    if (loop) loop->OnCancel();
    return 0;
  }
  auto* client = wsi ? static_cast<LwsClient*>(lws_get_opaque_user_data(wsi)) : nullptr;
  if (client) return client->OnLwsEvent(wsi, reason, in, len);
  return lws_callback_http_dummy(wsi, reason, user, in, len);
}

const lws_protocols kProtocols[] = {
    {"voxgate-device", ProtocolCallback, 0, 0, 0, nullptr, 0},
    {nullptr, nullptr, 0, 0, 0, nullptr, 0},
};

void TickCallback(lws_sorted_usec_list_t* sul) {
  // `sul` is the first member of a standard-layout LwsLoop::Timer.
  reinterpret_cast<LwsLoop::Timer*>(sul)->loop->OnTick();
}

}  // namespace

LwsLoop::LwsLoop() : tick_(new Timer()) {
  static std::once_flag log_once;
  std::call_once(log_once, [] { lws_set_log_level(LLL_ERR, nullptr); });  // stdout belongs to the caller
  tick_->loop = this;
  lws_context_creation_info info;
  memset(&info, 0, sizeof info);
  info.port = CONTEXT_PORT_NO_LISTEN;
  info.protocols = kProtocols;
  info.user = this;
  info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
  if (!TrustRootsFile().empty()) info.client_ssl_ca_filepath = TrustRootsFile().c_str();
  info.fd_limit_per_thread = 4096;  // lws otherwise sizes its tables by `ulimit -n`
  context_ = lws_create_context(&info);
  if (context_ == nullptr) return;
  ScheduleTick();
  thread_ = std::thread([this] {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) break;
      }
      if (lws_service(context_, 0) < 0) break;
    }
  });
}

LwsLoop::~LwsLoop() {
  if (context_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  lws_cancel_service(context_);
  thread_.join();
  lws_sul_cancel(&tick_->sul);
  lws_context_destroy(context_);
}

void LwsLoop::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    posted_.push_back(std::move(task));
  }
  lws_cancel_service(context_);
}

void LwsLoop::Run(std::function<void()> task) {
  std::mutex done_mutex;
  std::condition_variable done_cv;
  bool done = false;
  Post([&] {
    task();
    std::lock_guard<std::mutex> lock(done_mutex);
    done = true;
    done_cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(done_mutex);
  done_cv.wait(lock, [&] { return done; });
}

void LwsLoop::Wake() { lws_cancel_service(context_); }

void LwsLoop::Attach(LwsClient* client) { clients_.push_back(client); }

void LwsLoop::Detach(LwsClient* client) {
  clients_.erase(std::remove(clients_.begin(), clients_.end(), client), clients_.end());
}

void LwsLoop::OnCancel() {
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks.swap(posted_);
  }
  for (auto& task : tasks) task();
  const std::vector<LwsClient*> clients = clients_;  // a client may detach itself
  for (LwsClient* client : clients) client->OnWake();
}

void LwsLoop::OnTick() {
  const uint64_t now = MonotonicMs();
  const std::vector<LwsClient*> clients = clients_;
  for (LwsClient* client : clients) client->OnTick(now);
  ScheduleTick();
}

void LwsLoop::ScheduleTick() { lws_sul_schedule(context_, 0, &tick_->sul, TickCallback, kTickUs); }

}  // namespace voxgate
