// The host MQTT link through a real Mosquitto broker (Debian's `mosquitto`
// binary, started on a free 127.0.0.1 port): p2p subscription, hello,
// goodbye tolerance, MCP both ways. Without the binary the test is reported
// as skipped, with the reason.
#include <gtest/gtest.h>
#include <mosquitto.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "board_tools.h"
#include "capture.h"
#include "fake_board.h"
#include "mosquitto_mqtt_protocol.h"

using testing_support::Json;
using testing_support::ParseJson;
using testing_support::StrAt;

namespace {

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

const char* MosquittoBinary() {
  for (const char* path : {"/usr/sbin/mosquitto", "/usr/bin/mosquitto"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return nullptr;
}

// The gateway side: a plain MQTT client on the broker.
class GatewayClient {
 public:
  explicit GatewayClient(int port) {
    mosquitto_lib_init();
    mosq_ = mosquitto_new("gateway-test", true, this);
    mosquitto_message_callback_set(mosq_, [](mosquitto*, void* self, const mosquitto_message* m) {
      auto* g = static_cast<GatewayClient*>(self);
      std::lock_guard<std::mutex> lock(g->mutex_);
      g->inbox_.emplace_back(static_cast<const char*>(m->payload), static_cast<size_t>(m->payloadlen));
      g->cv_.notify_all();
    });
    mosquitto_connect_callback_set(mosq_, [](mosquitto* m, void* self, int) {
      mosquitto_subscribe(m, nullptr, "device-server", 0);
      auto* g = static_cast<GatewayClient*>(self);
      std::lock_guard<std::mutex> lock(g->mutex_);
      g->connected_ = true;
      g->cv_.notify_all();
    });
    mosquitto_subscribe_callback_set(mosq_, [](mosquitto*, void* self, int, int, const int*) {
      auto* g = static_cast<GatewayClient*>(self);
      std::lock_guard<std::mutex> lock(g->mutex_);
      g->subscribed_ = true;
      g->cv_.notify_all();
    });
    // The broker may still be starting: retry the connect until it listens.
    for (int attempt = 0; attempt < 100 && mosquitto_connect(mosq_, "127.0.0.1", port, 30) != MOSQ_ERR_SUCCESS;
         ++attempt) {
      usleep(50 * 1000);
    }
    mosquitto_loop_start(mosq_);
  }
  ~GatewayClient() {
    mosquitto_disconnect(mosq_);
    mosquitto_loop_stop(mosq_, true);
    mosquitto_destroy(mosq_);
  }
  bool AwaitSubscribed() {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [this] { return subscribed_; });
  }
  std::string Next() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [this] { return !inbox_.empty(); })) return "";
    std::string front = inbox_.front();
    inbox_.pop_front();
    return front;
  }
  void Publish(const std::string& topic, const std::string& text) {
    mosquitto_publish(mosq_, nullptr, topic.c_str(), static_cast<int>(text.size()), text.data(), 0, false);
  }

 private:
  mosquitto* mosq_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::string> inbox_;
  bool connected_ = false;
  bool subscribed_ = false;
};

}  // namespace

TEST(MqttLink, ThroughAStockMosquittoBroker) {
  const char* binary = MosquittoBinary();
  if (binary == nullptr) GTEST_SKIP() << "mosquitto broker binary not installed (apt-get install -y mosquitto)";
  const int port = FreePort();
  const pid_t broker = fork();
  if (broker == 0) {
    execl(binary, binary, "-p", std::to_string(port).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  } reaper{broker};

  GatewayClient gateway(port);
  ASSERT_TRUE(gateway.AwaitSubscribed());

  sim::FakeBoard board;
  mcp::McpServer server;
  RegisterBoardTools(server, board);
  voxgate::MqttOptions options;
  options.identity = {"aa:bb:cc:dd:ee:02", "u-2"};
  options.config.endpoint = "127.0.0.1:" + std::to_string(port);
  options.config.client_id = voxgate::MqttClientId("voxgate", options.identity);
  options.backoff_initial_ms = 50;
  voxgate::MosquittoMqttProtocol link(options);
  voxgate::ProtocolEvents events;
  events.on_mcp = [&](const std::string& payload) { server.ParseMessage(payload); };
  link.SetEvents(events);
  server.SetSender([&](const std::string& json) { link.SendMcp(json); });
  ASSERT_TRUE(link.Start());

  Json hello = ParseJson(gateway.Next());
  ASSERT_NE(hello, nullptr);
  EXPECT_EQ(StrAt(hello.get(), "type"), "hello");
  EXPECT_EQ(StrAt(hello.get(), "transport"), "udp");
  EXPECT_EQ(testing_support::IntAt(hello.get(), "version"), 3);

  // A gateway without voice answers goodbye; MCP keeps working, session_id empty.
  const std::string p2p = "devices/p2p/aa_bb_cc_dd_ee_02";
  gateway.Publish(p2p, R"({"type":"goodbye","session_id":null})");
  gateway.Publish(p2p, R"({"type":"mcp","payload":{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"self.led.set","arguments":{"on":true}}}})");
  Json reply = ParseJson(gateway.Next());
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(StrAt(reply.get(), "session_id"), "");
  EXPECT_EQ(testing_support::IntAt(reply.get(), "payload.id"), 5);
  EXPECT_TRUE(board.LedOn());

  NotifyButtonPressed(server, "boot");
  EXPECT_EQ(StrAt(ParseJson(gateway.Next()).get(), "payload.method"), "notifications/state_changed");
  link.Stop();
}
