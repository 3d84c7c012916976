// The host WebSocket link against a real (in-process) WebSocket server on
// 127.0.0.1: upgrade headers, hello, MCP both ways, and reconnecting.
#include <gtest/gtest.h>

#include <memory>

#include "board_tools.h"
#include "capture.h"
#include "fake_board.h"
#include "lws_websocket_protocol.h"
#include "mcp/mcp_server.h"
#include "test_gateway.h"

using testing_support::At;
using testing_support::IntAt;
using testing_support::Json;
using testing_support::ParseJson;
using testing_support::StrAt;

namespace {

class WebSocketLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(gateway_.port(), 0);
    RegisterBoardTools(server_, board_);
    voxgate::WebSocketOptions options;
    options.url = gateway_.url();
    options.token = "secret-token";
    options.identity = {"aa:bb:cc:dd:ee:01", "8f2e0c1a-8c39-4a0e-9b1e-1f3c2d4e5a6b"};
    options.backoff_initial_ms = 50;
    options.backoff_max_ms = 200;
    link_.reset(new voxgate::LwsWebSocketProtocol(loop_, options));
    voxgate::ProtocolEvents events;
    events.on_mcp = [this](const std::string& payload) { server_.ParseMessage(payload); };
    link_->SetEvents(events);
    server_.SetSender([this](const std::string& json) { link_->SendMcp(json); });
    ASSERT_TRUE(link_->Start());
  }

  void TearDown() override { link_->Stop(); }

  // Awaits the device hello of a new connection and answers it.
  void Handshake(const std::string& session) {
    Json hello = ParseJson(gateway_.NextFrame());
    ASSERT_NE(hello, nullptr);
    EXPECT_EQ(StrAt(hello.get(), "type"), "hello");
    EXPECT_EQ(StrAt(hello.get(), "transport"), "websocket");
    gateway_.Send(R"({"type":"hello","transport":"websocket","session_id":")" + session +
                  R"(","audio_params":{"sample_rate":24000,"frame_duration":60}})");
  }

  Json Call(const std::string& session, const std::string& payload) {
    gateway_.Send(R"({"session_id":")" + session + R"(","type":"mcp","payload":)" + payload + "}");
    return ParseJson(gateway_.NextFrame());
  }

  TestGateway gateway_;
  std::shared_ptr<voxgate::LwsLoop> loop_ = std::make_shared<voxgate::LwsLoop>();
  sim::FakeBoard board_;
  mcp::McpServer server_{mcp::ServerOptions{"ws-test", "1", 8000, {}}};
  std::unique_ptr<voxgate::LwsWebSocketProtocol> link_;
};

}  // namespace

TEST_F(WebSocketLinkTest, HeadersHelloAndMcpRoundTrip) {
  Handshake("sess-1");
  EXPECT_EQ(gateway_.Header("authorization"), "Bearer secret-token");
  EXPECT_EQ(gateway_.Header("protocol-version"), "1");
  EXPECT_EQ(gateway_.Header("device-id"), "aa:bb:cc:dd:ee:01");
  EXPECT_EQ(gateway_.Header("client-id"), "8f2e0c1a-8c39-4a0e-9b1e-1f3c2d4e5a6b");

  Json list = Call("sess-1", R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"withUserTools":true}})");
  ASSERT_NE(list, nullptr);
  EXPECT_EQ(StrAt(list.get(), "session_id"), "sess-1");
  EXPECT_EQ(StrAt(list.get(), "type"), "mcp");
  EXPECT_EQ(cJSON_GetArraySize(At(list.get(), "payload.result.tools")), 5);

  Json call = Call("sess-1", R"({"jsonrpc":"2.0","id":"v","method":"tools/call","params":{"name":"self.audio_speaker.set_volume","arguments":{"volume":42}}})");
  EXPECT_EQ(StrAt(call.get(), "payload.id"), "v");
  EXPECT_EQ(board_.Volume(), 42);

  NotifyButtonPressed(server_, "boot");
  Json note = ParseJson(gateway_.NextFrame());
  EXPECT_EQ(StrAt(note.get(), "payload.method"), "notifications/state_changed");
  EXPECT_EQ(StrAt(note.get(), "payload.params.state"), "pressed");
}

TEST_F(WebSocketLinkTest, ReconnectsWithAFreshSessionWhenTheGatewayDrops) {
  Handshake("first");
  EXPECT_EQ(IntAt(Call("first", R"({"jsonrpc":"2.0","id":1,"method":"ping"})").get(), "payload.id"), 1);
  gateway_.DropConnection();
  Handshake("second");  // the device came back by itself and said hello again
  EXPECT_GE(gateway_.connections(), 2);
  Json pong = Call("second", R"({"jsonrpc":"2.0","id":2,"method":"ping"})");
  EXPECT_EQ(StrAt(pong.get(), "session_id"), "second");
  EXPECT_EQ(IntAt(pong.get(), "payload.id"), 2);
}
