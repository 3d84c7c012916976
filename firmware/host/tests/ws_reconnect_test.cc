// The host WebSocket link follows the device's esp_websocket_client state
// machine, against a real WebSocket server on 127.0.0.1: after the gateway
// closes cleanly (1001, as on a restart) and after the device's own close when
// the server hello is overdue, it reconnects; configured as the device used to
// be (no close-reconnect) it stays down, as the device did. Fragmented
// messages and the message bound go over the wire too.
#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>

#include "board_tools.h"
#include "capture.h"
#include "fake_board.h"
#include "lws_websocket_protocol.h"
#include "mcp/mcp_server.h"
#include "test_gateway.h"
#include "voxgate/ws_reconnect.h"

using testing_support::IntAt;
using testing_support::Json;
using testing_support::ParseJson;
using testing_support::StrAt;
using voxgate::WsEnd;
using voxgate::WsReconnectPolicy;

TEST(WsReconnectRule, MatchesEspWebsocketClient) {
  const WsReconnectPolicy device = voxgate::kDeviceWsReconnect;
  const WsReconnectPolicy old_device{true, false};  // enable_close_reconnect unset
  const WsReconnectPolicy no_auto{false, true};
  for (WsEnd end : {WsEnd::kConnectFailed, WsEnd::kConnectionLost, WsEnd::kServerClose, WsEnd::kClientClose}) {
    EXPECT_TRUE(voxgate::ReconnectsAfter(end, device));
    EXPECT_FALSE(voxgate::ReconnectsAfter(end, no_auto));
  }
  EXPECT_TRUE(voxgate::ReconnectsAfter(WsEnd::kConnectionLost, old_device));
  EXPECT_FALSE(voxgate::ReconnectsAfter(WsEnd::kServerClose, old_device));
  EXPECT_FALSE(voxgate::ReconnectsAfter(WsEnd::kClientClose, old_device));
}

namespace {

// Collects link events and lets a test await one.
class Events {
 public:
  voxgate::ProtocolEvents Hooks(mcp::McpServer* server) {
    voxgate::ProtocolEvents events;
    events.on_mcp = [server](const std::string& payload) { server->ParseMessage(payload); };
    events.on_closed = [this](const std::string& reason) { Add("closed: " + reason); };
    events.on_error = [this](const std::string& message) { Add("error: " + message); };
    return events;
  }
  // True when a line containing `text` arrived (a bound on a hung test, not a timing assertion).
  bool Await(const std::string& text) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] {
      for (const auto& line : lines_) {
        if (line.find(text) != std::string::npos) return true;
      }
      return false;
    });
  }

 private:
  void Add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex_);
    lines_.push_back(line);
    cv_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

class WsStateMachineTest : public ::testing::Test {
 protected:
  void Start(WsReconnectPolicy policy, uint32_t hello_timeout_ms = voxgate::kServerHelloTimeoutMs,
             size_t max_message_bytes = voxgate::kMaxIncomingMessageBytes) {
    ASSERT_GT(gateway_.port(), 0);
    RegisterBoardTools(server_, board_);
    voxgate::WebSocketOptions options;
    options.url = gateway_.url();
    options.identity = {"aa:bb:cc:dd:ee:02", "8f2e0c1a-8c39-4a0e-9b1e-1f3c2d4e5a6c"};
    options.backoff_initial_ms = 50;
    options.backoff_max_ms = 200;
    options.reconnect = policy;
    options.hello_timeout_ms = hello_timeout_ms;
    options.max_message_bytes = max_message_bytes;
    link_.reset(new voxgate::LwsWebSocketProtocol(loop_, options));
    link_->SetEvents(events_.Hooks(&server_));
    server_.SetSender([this](const std::string& json) { link_->SendMcp(json); });
    ASSERT_TRUE(link_->Start());
  }

  void TearDown() override {
    if (link_) link_->Stop();
  }

  // Awaits the device hello of a new connection; answers it unless told not to.
  void Handshake(const std::string& session, bool answer = true) {
    Json hello = ParseJson(gateway_.NextFrame());
    ASSERT_NE(hello, nullptr) << "no device hello";
    ASSERT_EQ(StrAt(hello.get(), "type"), "hello");
    if (answer) gateway_.Send(R"({"type":"hello","transport":"websocket","session_id":")" + session + R"("})");
  }

  void ExpectPing(const std::string& session, int id) {
    gateway_.Send(R"({"session_id":")" + session + R"(","type":"mcp","payload":{"jsonrpc":"2.0","id":)" +
                  std::to_string(id) + R"(,"method":"ping"}})");
    Json pong = ParseJson(gateway_.NextFrame());
    ASSERT_NE(pong, nullptr);
    EXPECT_EQ(IntAt(pong.get(), "payload.id"), id);
    EXPECT_EQ(StrAt(pong.get(), "session_id"), session);
  }

  TestGateway gateway_;
  std::shared_ptr<voxgate::LwsLoop> loop_ = std::make_shared<voxgate::LwsLoop>();
  sim::FakeBoard board_;
  mcp::McpServer server_{mcp::ServerOptions{"ws-state-test", "1", 8000, {}}};
  Events events_;
  std::unique_ptr<voxgate::LwsWebSocketProtocol> link_;
};

}  // namespace

TEST_F(WsStateMachineTest, ReconnectsAfterTheGatewayClosesWithGoingAway) {
  Start(voxgate::kDeviceWsReconnect);
  Handshake("first");
  ExpectPing("first", 1);
  gateway_.CloseConnection(1001);  // a gateway restart
  EXPECT_TRUE(events_.Await("closed: closed by peer (1001)"));
  Handshake("second");  // the device came back by itself
  ExpectPing("second", 2);
  EXPECT_FALSE(link_->stranded());
}

TEST_F(WsStateMachineTest, ReconnectsAfterItsOwnCloseWhenTheServerHelloIsOverdue) {
  Start(voxgate::kDeviceWsReconnect, 200);
  Handshake("ignored", /*answer=*/false);
  EXPECT_TRUE(events_.Await("error: no server hello within 200 ms"));
  EXPECT_TRUE(events_.Await("closed: no server hello"));
  Handshake("second");  // a fresh connection and session
  ExpectPing("second", 1);
  EXPECT_GE(gateway_.connections(), 2);
}

// The device as it was (enable_close_reconnect unset): after a clean close its
// esp_websocket_client task ended and it stayed offline until a reboot.
TEST_F(WsStateMachineTest, WithoutCloseReconnectACleanCloseStrandsTheLink) {
  Start(WsReconnectPolicy{true, false});
  Handshake("only");
  gateway_.CloseConnection(1001);
  ASSERT_TRUE(events_.Await("link stopped for good after: closed by peer"));
  EXPECT_TRUE(link_->stranded());
  EXPECT_EQ(gateway_.connections(), 1) << "the decision is taken at close: no reconnect was scheduled";
}

TEST_F(WsStateMachineTest, WithoutCloseReconnectTheHelloTimeoutCloseStrandsTheLink) {
  Start(WsReconnectPolicy{true, false}, 200);
  Handshake("ignored", /*answer=*/false);
  ASSERT_TRUE(events_.Await("link stopped for good after: no server hello"));
  EXPECT_TRUE(link_->stranded());
  EXPECT_EQ(gateway_.connections(), 1);
}

TEST_F(WsStateMachineTest, AFragmentedMessageArrivesWhole) {
  Start(voxgate::kDeviceWsReconnect);
  Handshake("s");
  const std::string message =
      R"({"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":"frag","method":"tools/call",)"
      R"("params":{"name":"self.audio_speaker.set_volume","arguments":{"volume":37}}}})";
  gateway_.SendFragmented({message.substr(0, 30), message.substr(30, 45), message.substr(75)});
  Json reply = ParseJson(gateway_.NextFrame());
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(StrAt(reply.get(), "payload.id"), "frag");
  EXPECT_EQ(board_.Volume(), 37);
}

TEST_F(WsStateMachineTest, AMessageOverTheBoundIsDroppedAndTheLinkKeepsWorking) {
  Start(voxgate::kDeviceWsReconnect, voxgate::kServerHelloTimeoutMs, 512);
  Handshake("s");
  const std::string big = R"({"session_id":"s","type":"tts","text":")" + std::string(600, 'x') + R"("})";
  gateway_.SendFragmented({big.substr(0, 300), big.substr(300)});
  EXPECT_TRUE(events_.Await("error: dropped a message larger than 512 bytes"));
  ExpectPing("s", 9);
}
