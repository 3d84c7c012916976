// voxgate_link's portable pieces: identity, hello, envelope, backoff, OTA
// config, URLs, and the shared Protocol logic over a fake transport.
#include <gtest/gtest.h>

#include <cstdio>
#include <mutex>
#include <vector>

#include "capture.h"
#include "voxgate/backoff.h"
#include "voxgate/device_identity.h"
#include "voxgate/envelope.h"
#include "voxgate/hello.h"
#include "voxgate/ota_config.h"
#include "voxgate/protocol.h"
#include "voxgate/url.h"

using testing_support::At;
using testing_support::Json;
using testing_support::ParseJson;
using testing_support::StrAt;
using namespace voxgate;

TEST(Identity, UpgradeHeaders) {
  DeviceIdentity id{"aa:bb:cc:dd:ee:ff", "8f2e0c1a-8c39-4a0e-9b1e-1f3c2d4e5a6b"};
  Headers h = UpgradeHeaders(id, "t0k");
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0], (std::pair<std::string, std::string>{"Authorization", "Bearer t0k"}));
  EXPECT_EQ(h[1], (std::pair<std::string, std::string>{"Protocol-Version", "1"}));
  EXPECT_EQ(h[2], (std::pair<std::string, std::string>{"Device-Id", "aa:bb:cc:dd:ee:ff"}));
  EXPECT_EQ(h[3], (std::pair<std::string, std::string>{"Client-Id", "8f2e0c1a-8c39-4a0e-9b1e-1f3c2d4e5a6b"}));
  EXPECT_EQ(UpgradeHeaders(id, "Basic abc")[0].second, "Basic abc");
  EXPECT_EQ(UpgradeHeaders(id, "").size(), 3u) << "no Authorization without a token";
}

TEST(Identity, MqttNamesAndMacs) {
  DeviceIdentity id{"aa:bb:cc:dd:ee:ff", "u-1"};
  EXPECT_EQ(MqttClientId("voxgate", id), "GID_voxgate@@@aa_bb_cc_dd_ee_ff@@@u-1");
  EXPECT_EQ(P2pTopic(id.mac), "devices/p2p/aa_bb_cc_dd_ee_ff");
  EXPECT_EQ(OffsetMac("02:00:00:00:00:ff", 1), "02:00:00:00:01:00");
  EXPECT_EQ(OffsetMac("02:00:00:00:00:01", 0), "02:00:00:00:00:01");
  uint8_t bytes[16];
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<uint8_t>(i * 17);
  const std::string uuid = UuidFromBytes(bytes);
  ASSERT_EQ(uuid.size(), 36u);
  EXPECT_EQ(uuid[14], '4') << "version 4";
  EXPECT_NE(std::string("89ab").find(uuid[19]), std::string::npos) << "RFC 4122 variant";
}

TEST(Hello, DeviceHelloPerTransport) {
  EXPECT_EQ(DeviceHello(Transport::kWebSocket),
            R"({"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket",)"
            R"("audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}})");
  Json mqtt = ParseJson(DeviceHello(Transport::kMqtt));
  EXPECT_EQ(testing_support::IntAt(mqtt.get(), "version"), 3);
  EXPECT_EQ(StrAt(mqtt.get(), "transport"), "udp");
  EXPECT_TRUE(cJSON_IsTrue(At(mqtt.get(), "features.mcp")));
}

TEST(Hello, ServerHello) {
  std::string session;
  Json hello = ParseJson(R"({"type":"hello","transport":"websocket","session_id":"abc"})");
  EXPECT_TRUE(ParseServerHello(hello.get(), &session));
  EXPECT_EQ(session, "abc");
  Json no_session = ParseJson(R"({"type":"hello"})");
  EXPECT_TRUE(ParseServerHello(no_session.get(), &session));
  EXPECT_EQ(session, "");
  Json other = ParseJson(R"({"type":"goodbye"})");
  EXPECT_FALSE(ParseServerHello(other.get(), &session));
}

TEST(Envelope, WrapMcpEscapesTheSessionAndKeepsThePayload) {
  const std::string frame = WrapMcp("s\"1\n", R"({"jsonrpc":"2.0","id":1,"result":{"text":"日本\u0001"}})");
  Json json = ParseJson(frame);
  ASSERT_NE(json, nullptr) << frame;
  EXPECT_EQ(StrAt(json.get(), "session_id"), "s\"1\n");
  EXPECT_EQ(StrAt(json.get(), "type"), "mcp");
  EXPECT_EQ(StrAt(json.get(), "payload.result.text"), "日本\x01");
  EXPECT_EQ(WrapMcp("", ""), "") << "no frame around nothing";
  Envelope back = Envelope::Parse(frame);
  ASSERT_TRUE(back.ok());
  EXPECT_NE(back.payload(), nullptr);
}

TEST(Backoff, GrowsWithJitterUpToTheCap) {
  Backoff b(500, 8000, 42);
  uint32_t expected_base = 500;
  for (int i = 0; i < 10; ++i) {
    const uint32_t d = b.NextDelayMs();
    EXPECT_GE(d, expected_base / 2) << i;
    EXPECT_LE(d, expected_base) << i;
    expected_base = std::min<uint32_t>(expected_base * 2, 8000);
  }
  b.Reset();
  EXPECT_LE(b.NextDelayMs(), 500u);
  // Two devices with different seeds do not retry in lockstep.
  Backoff x(1000, 30000, 1), y(1000, 30000, 2);
  int same = 0;
  for (int i = 0; i < 8; ++i) same += x.NextDelayMs() == y.NextDelayMs();
  EXPECT_LT(same, 8);
}

TEST(OtaConfig, RequestBodyAndHeaders) {
  DeviceIdentity id{"aa:bb:cc:dd:ee:ff", "u-1"};
  SystemInfo info;
  Json body = ParseJson(OtaRequestBody(id, info));
  EXPECT_EQ(StrAt(body.get(), "mac_address"), "aa:bb:cc:dd:ee:ff");
  EXPECT_EQ(StrAt(body.get(), "uuid"), "u-1");
  EXPECT_EQ(StrAt(body.get(), "application.version"), info.app_version);
  EXPECT_EQ(StrAt(body.get(), "board.type"), info.board_type);
  Headers headers = OtaRequestHeaders(id, info);
  EXPECT_EQ(headers[0], (std::pair<std::string, std::string>{"Device-Id", "aa:bb:cc:dd:ee:ff"}));
  EXPECT_EQ(headers[1], (std::pair<std::string, std::string>{"Client-Id", "u-1"}));
}

TEST(OtaConfig, ParsesWebSocketAndMqttSections) {
  LinkConfig config;
  ASSERT_TRUE(ParseOtaResponse(R"({"server_time":{"timestamp":1},"firmware":{"version":"1","url":""},
      "websocket":{"url":"ws://192.168.1.15:8000/xiaozhi/v1/","token":"tk"},
      "mqtt":{"endpoint":"192.168.1.15:1883","client_id":"GID_default@@@11_22_33_44_55_66@@@u",
              "username":"eyJpcCI6IjE5Mi4xNjguMS4xNSJ9","password":"pw","publish_topic":"device-server",
              "subscribe_topic":"devices/p2p/11_22_33_44_55_66","keepalive":60}})",
                               &config));
  EXPECT_TRUE(config.has_websocket);
  EXPECT_EQ(config.websocket.url, "ws://192.168.1.15:8000/xiaozhi/v1/");
  EXPECT_EQ(config.websocket.token, "tk");
  EXPECT_TRUE(config.has_mqtt);
  EXPECT_EQ(config.mqtt.endpoint, "192.168.1.15:1883");
  EXPECT_EQ(config.mqtt.client_id, "GID_default@@@11_22_33_44_55_66@@@u");
  EXPECT_EQ(config.mqtt.password, "pw");
  EXPECT_EQ(config.mqtt.keepalive_s, 60);

  LinkConfig again;
  ASSERT_TRUE(ParseLinkConfig(SerializeLinkConfig(config), &again));
  EXPECT_EQ(again.mqtt.subscribe_topic, config.mqtt.subscribe_topic);
  EXPECT_EQ(again.websocket.token, config.websocket.token);

  LinkConfig untouched;
  EXPECT_FALSE(ParseOtaResponse(R"({"firmware":{}})", &untouched));
  EXPECT_FALSE(ParseOtaResponse("not json", &untouched));
  EXPECT_FALSE(untouched.has_websocket || untouched.has_mqtt);
}

TEST(OtaConfig, StoresSurviveARestart) {
  const std::string path = testing::TempDir() + "voxgate-link-config.json";
  LinkConfig config;
  config.has_websocket = true;
  config.websocket.url = "ws://gw:8000/xiaozhi/v1/";
  {
    FileConfigStore store(path);
    ASSERT_TRUE(SaveLinkConfig(store, config));
  }
  FileConfigStore reopened(path);
  LinkConfig loaded;
  ASSERT_TRUE(LoadLinkConfig(reopened, &loaded));
  EXPECT_EQ(loaded.websocket.url, config.websocket.url);
  std::remove(path.c_str());

  MemoryConfigStore memory;
  EXPECT_FALSE(LoadLinkConfig(memory, &loaded));
  ASSERT_TRUE(SaveLinkConfig(memory, config));
  EXPECT_TRUE(LoadLinkConfig(memory, &loaded));
}

TEST(OtaConfig, Endpoints) {
  std::string host;
  uint16_t port = 0;
  EXPECT_TRUE(SplitEndpoint("mqtt.example:1883", 8883, &host, &port));
  EXPECT_EQ(host, "mqtt.example");
  EXPECT_EQ(port, 1883);
  EXPECT_TRUE(SplitEndpoint("mqtt.example", 8883, &host, &port));
  EXPECT_EQ(port, 8883);
  EXPECT_FALSE(SplitEndpoint("host:99999", 8883, &host, &port));
  EXPECT_FALSE(SplitEndpoint("", 8883, &host, &port));
}

TEST(Url, Parses) {
  Url url;
  ASSERT_TRUE(ParseUrl("ws://127.0.0.1:8000/xiaozhi/v1/", &url));
  EXPECT_EQ(url.host, "127.0.0.1");
  EXPECT_EQ(url.port, 8000);
  EXPECT_EQ(url.path, "/xiaozhi/v1/");
  ASSERT_TRUE(ParseUrl("https://gw.example/xiaozhi/ota/", &url));
  EXPECT_EQ(url.port, 443);
  EXPECT_TRUE(url.tls());
  ASSERT_TRUE(ParseUrl("http://gw", &url));
  EXPECT_EQ(url.path, "/");
  EXPECT_FALSE(ParseUrl("ftp://x/", &url));
  EXPECT_FALSE(ParseUrl("ws://:80/", &url));
  EXPECT_FALSE(ParseUrl("ws://h:0/", &url));
}

TEST(Url, HostHeaderKeepsANonDefaultPort) {
  Url url;
  ASSERT_TRUE(ParseUrl("http://127.0.0.1:8000/xiaozhi/ota/", &url));
  EXPECT_EQ(url.host_header(), "127.0.0.1:8000");
  ASSERT_TRUE(ParseUrl("ws://gw.example/xiaozhi/v1/", &url));
  EXPECT_EQ(url.host_header(), "gw.example");
  ASSERT_TRUE(ParseUrl("wss://gw.example:443/", &url));
  EXPECT_EQ(url.host_header(), "gw.example");
  ASSERT_TRUE(ParseUrl("https://gw.example:8443/", &url));
  EXPECT_EQ(url.host_header(), "gw.example:8443");
}

namespace {

// A transport that records frames, to test the shared Protocol logic.
class FakeProtocol : public Protocol {
 public:
  explicit FakeProtocol(Transport t) : Protocol(t) {}
  bool Start() override { return true; }
  void Stop() override {}
  using Protocol::HandleClosed;
  using Protocol::HandleOpen;
  using Protocol::CloseOverdue;
  using Protocol::HelloOverdue;
  void Receive(const std::string& text) { HandleText(text.data(), text.size()); }
  std::vector<std::string> sent;

 protected:
  bool SendText(const std::string& text) override {
    sent.push_back(text);
    return true;
  }
};

}  // namespace

TEST(Protocol, HelloSessionAndEnvelope) {
  FakeProtocol p(Transport::kWebSocket);
  std::vector<std::string> events;
  ProtocolEvents ev;
  ev.on_connected = [&] { events.push_back("connected"); };
  ev.on_hello = [&](const std::string& s) { events.push_back("hello:" + s); };
  ev.on_mcp = [&](const std::string& payload) { events.push_back("mcp:" + payload); };
  ev.on_frame = [&](const std::string& type, const std::string&) { events.push_back("frame:" + type); };
  ev.on_closed = [&](const std::string& reason) { events.push_back("closed:" + reason); };
  ev.on_error = [&](const std::string& message) { events.push_back("error:" + message); };
  p.SetEvents(ev);

  EXPECT_FALSE(p.SendMcp("{}")) << "nothing goes out before the link is up";
  p.HandleOpen(1000);
  ASSERT_EQ(p.sent.size(), 1u);
  EXPECT_EQ(p.sent[0], DeviceHello(Transport::kWebSocket));
  // MCP before the server hello still works, with an empty session id.
  p.Receive(R"({"type":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"ping"}})");
  EXPECT_TRUE(p.SendMcp(R"({"jsonrpc":"2.0","id":1,"result":{}})"));
  EXPECT_EQ(StrAt(ParseJson(p.sent.back()).get(), "session_id"), "");
  p.Receive(R"({"type":"hello","transport":"websocket","session_id":"sess-9"})");
  EXPECT_EQ(p.session_id(), "sess-9");
  EXPECT_TRUE(p.SendMcp(R"({"jsonrpc":"2.0","method":"notifications/x"})"));
  Json frame = ParseJson(p.sent.back());
  EXPECT_EQ(StrAt(frame.get(), "session_id"), "sess-9");
  EXPECT_EQ(StrAt(frame.get(), "type"), "mcp");
  EXPECT_EQ(StrAt(frame.get(), "payload.method"), "notifications/x");
  EXPECT_FALSE(p.HelloOverdue(999999)) << "the hello arrived";
  p.Receive("not json");
  p.Receive(R"({"type":"tts","state":"start"})");
  p.HandleClosed("peer");
  EXPECT_FALSE(p.connected());
  EXPECT_EQ(events, (std::vector<std::string>{"connected", R"(mcp:{"jsonrpc":"2.0","id":1,"method":"ping"})",
                                              "hello:sess-9", "error:dropped a malformed frame", "frame:tts",
                                              "closed:peer"}));
}

TEST(Protocol, HelloTimeoutAndMqttGoodbye) {
  FakeProtocol ws(Transport::kWebSocket);
  ws.HandleOpen(1000);
  EXPECT_FALSE(ws.HelloOverdue(1000 + kServerHelloTimeoutMs - 1));
  EXPECT_TRUE(ws.HelloOverdue(1000 + kServerHelloTimeoutMs));
  EXPECT_FALSE(ws.HelloOverdue(1000 + 2 * kServerHelloTimeoutMs)) << "reported once";

  FakeProtocol mqtt(Transport::kMqtt);
  mqtt.HandleOpen(0);
  EXPECT_EQ(StrAt(ParseJson(mqtt.sent[0]).get(), "transport"), "udp");
  mqtt.Receive(R"({"type":"goodbye","session_id":null})");
  EXPECT_FALSE(mqtt.HelloOverdue(kServerHelloTimeoutMs * 2)) << "a goodbye answers the hello";
  EXPECT_TRUE(mqtt.connected()) << "MQTT keeps its MCP channel after goodbye";
  EXPECT_TRUE(mqtt.SendMcp(R"({"jsonrpc":"2.0","id":2,"result":{}})"));
}

// A gateway that keeps TCP open but answers neither the hello nor the close
// the device then sends: the close times out, and keeps timing out until the
// link is down, so the transport drops the connection instead of holding a
// "connected" link without a session until TCP dies.
TEST(Protocol, AnUnansweredCloseForAMissingHelloFiresUntilTheLinkCloses) {
  FakeProtocol ws(Transport::kWebSocket);
  std::vector<std::string> errors;
  ProtocolEvents ev;
  ev.on_error = [&](const std::string& message) { errors.push_back(message); };
  ws.SetEvents(ev);
  ws.HandleOpen(1000);
  const uint64_t overdue = 1000 + kServerHelloTimeoutMs;
  EXPECT_FALSE(ws.CloseOverdue(overdue)) << "no close under way before the hello is overdue";
  ASSERT_TRUE(ws.HelloOverdue(overdue));
  EXPECT_FALSE(ws.CloseOverdue(overdue + kCloseTimeoutMs - 1));
  EXPECT_TRUE(ws.CloseOverdue(overdue + kCloseTimeoutMs));
  EXPECT_FALSE(ws.CloseOverdue(overdue + kCloseTimeoutMs + 1));
  EXPECT_TRUE(ws.CloseOverdue(overdue + 2 * kCloseTimeoutMs)) << "again while the connection still stands";
  EXPECT_EQ(errors, (std::vector<std::string>{
                        "no server hello within 10000 ms",
                        "the gateway did not finish the close within 5000 ms: dropping the connection",
                        "the gateway did not finish the close within 5000 ms: dropping the connection"}));
  ws.HandleClosed("dropped");
  EXPECT_FALSE(ws.CloseOverdue(overdue + 10 * kCloseTimeoutMs)) << "the link is down";

  // A new connection starts over: its hello is awaited again, no close is due.
  ws.HandleOpen(100000);
  EXPECT_FALSE(ws.CloseOverdue(100000 + kServerHelloTimeoutMs + kCloseTimeoutMs));
  EXPECT_TRUE(ws.HelloOverdue(100000 + kServerHelloTimeoutMs));

  // A hello in time: nothing fires.
  FakeProtocol answered(Transport::kWebSocket);
  answered.HandleOpen(0);
  answered.Receive(R"({"type":"hello","transport":"websocket","session_id":"s"})");
  EXPECT_FALSE(answered.HelloOverdue(kServerHelloTimeoutMs));
  EXPECT_FALSE(answered.CloseOverdue(kServerHelloTimeoutMs + kCloseTimeoutMs));
}
