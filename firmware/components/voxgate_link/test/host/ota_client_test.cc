// The OTA check as an enrolled device runs it: the answer applied over the
// stored config (credentials an answer leaves out are kept), the stored
// credentials presented as proof, and the xiaozhi activation flow, against a
// scripted OTA endpoint on a fake clock. The real gateway runs the same flow
// in test/e2e-firmware-*.test.ts.
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "voxgate/base64.h"
#include "voxgate/ota_client.h"
#include "voxgate/ota_config.h"

using namespace voxgate;

namespace {

LinkConfig StoredWebSocket(const std::string& token) {
  LinkConfig c;
  c.has_websocket = true;
  c.websocket.url = "ws://gw:8000/xiaozhi/v1/";
  c.websocket.token = token;
  return c;
}

LinkConfig StoredMqtt() {
  LinkConfig c;
  c.has_mqtt = true;
  c.mqtt.endpoint = "gw:1883";
  c.mqtt.client_id = "GID_voxgate@@@aa_bb_cc_dd_ee_ff@@@u-1";
  c.mqtt.username = "eyJpcCI6IjEyNy4wLjAuMSJ9";
  c.mqtt.password = "c2VjcmV0";
  c.mqtt.subscribe_topic = "devices/p2p/aa_bb_cc_dd_ee_ff";
  return c;
}

std::string HeaderOf(const Headers& headers, const std::string& name) {
  for (const auto& h : headers) {
    if (h.first == name) return h.second;
  }
  return "";
}

// The OTA endpoint and its /activate, answering from a script in order.
struct ScriptedEndpoint {
  struct Request {
    std::string url;
    Headers headers;
    std::string body;
  };
  std::deque<HttpAnswer> ota;       // answers to POST <url>
  std::deque<HttpAnswer> activate;  // answers to POST <url>/activate (the last one repeats)
  std::vector<Request> requests;

  OtaClient::Post post() {
    return [this](const std::string& url, const Headers& headers, const std::string& body, HttpAnswer* answer,
                  std::string* error) {
      requests.push_back({url, headers, body});
      std::deque<HttpAnswer>& script = url.size() > 9 && url.compare(url.size() - 9, 9, "/activate") == 0 ? activate : ota;
      if (script.empty()) {
        *error = "connection refused";
        return false;
      }
      *answer = script.front();
      if (script.size() > 1 || &script == &ota) script.pop_front();
      return true;
    };
  }
  size_t count(const std::string& url) const {
    size_t n = 0;
    for (const auto& r : requests) n += r.url == url ? 1 : 0;
    return n;
  }
};

// A clock that only moves when the client waits; `stop_after` waits, it reports a shutdown.
struct FakeTime {
  uint64_t now = 1000;
  std::vector<uint32_t> waits;
  int stop_after = -1;
  OtaClient::Clock clock() {
    return [this] { return now; };
  }
  OtaClient::Wait wait() {
    return [this](uint32_t ms) {
      if (stop_after >= 0 && static_cast<int>(waits.size()) >= stop_after) return false;
      waits.push_back(ms);
      now += ms;
      return true;
    };
  }
};

constexpr const char* kOtaUrl = "http://gw:8000/xiaozhi/ota/";
constexpr const char* kActivateUrl = "http://gw:8000/xiaozhi/ota/activate";

OtaClientOptions Options() {
  OtaClientOptions o;
  o.url = kOtaUrl;
  o.identity = DeviceIdentity{"aa:bb:cc:dd:ee:ff", "u-1"};
  return o;
}

HttpAnswer Ok(const std::string& body) { return HttpAnswer{200, body}; }

const char* kActivationAnswer =
    R"({"firmware":{"version":"1.0.0","url":""},"activation":{"code":"123456","message":"Voxgate enrollment code 123456","challenge":"c0ffee","timeout_ms":60000}})";

struct Shown {
  std::string state;
  std::string code;
};

}  // namespace

TEST(OtaMerge, AnAnswerWithoutCredentialsKeepsTheStoredOnes) {
  LinkConfig config;
  ASSERT_TRUE(ParseOtaResponse(R"({"websocket":{"url":"ws://gw2:8000/xiaozhi/v1/"}})", StoredWebSocket("tk-1"), &config));
  EXPECT_TRUE(config.has_websocket);
  EXPECT_EQ(config.websocket.url, "ws://gw2:8000/xiaozhi/v1/") << "a present field replaces";
  EXPECT_EQ(config.websocket.token, "tk-1") << "an absent token keeps the stored one";

  ASSERT_TRUE(ParseOtaResponse(R"({"websocket":{"url":"ws://gw:8000/xiaozhi/v1/","token":"tk-2"}})",
                               StoredWebSocket("tk-1"), &config));
  EXPECT_EQ(config.websocket.token, "tk-2") << "a present token replaces";
  ASSERT_TRUE(ParseOtaResponse(R"({"websocket":{"url":"ws://gw/","token":""}})", StoredWebSocket("tk-1"), &config));
  EXPECT_EQ(config.websocket.token, "") << "present, even empty, replaces";

  const LinkConfig mqtt = StoredMqtt();
  ASSERT_TRUE(ParseOtaResponse(R"({"mqtt":{"endpoint":"gw:1884","publish_topic":"device-server",
      "subscribe_topic":"devices/p2p/aa_bb_cc_dd_ee_ff"}})", mqtt, &config));
  EXPECT_TRUE(config.has_mqtt);
  EXPECT_EQ(config.mqtt.endpoint, "gw:1884");
  EXPECT_EQ(config.mqtt.client_id, mqtt.mqtt.client_id);
  EXPECT_EQ(config.mqtt.username, mqtt.mqtt.username);
  EXPECT_EQ(config.mqtt.password, mqtt.mqtt.password);

  ASSERT_TRUE(ParseOtaResponse(R"({"mqtt":{"endpoint":"gw:1883","client_id":"GID_x@@@aa_bb_cc_dd_ee_ff@@@u-1",
      "username":"u2","password":"p2"}})", mqtt, &config));
  EXPECT_EQ(config.mqtt.client_id, "GID_x@@@aa_bb_cc_dd_ee_ff@@@u-1");
  EXPECT_EQ(config.mqtt.username, "u2");
  EXPECT_EQ(config.mqtt.password, "p2");
}

TEST(OtaMerge, TheAnswerDecidesTheTransport) {
  LinkConfig config;
  ASSERT_TRUE(ParseOtaResponse(R"({"mqtt":{"endpoint":"gw:1883"}})", StoredWebSocket("tk-1"), &config));
  EXPECT_TRUE(config.has_mqtt);
  EXPECT_FALSE(config.has_websocket) << "a section the answer leaves out is not used";
  EXPECT_TRUE(config.mqtt.password.empty()) << "credentials come only from the same kind of section";
  LinkConfig again;
  ASSERT_TRUE(ParseLinkConfig(SerializeLinkConfig(config), &again));
  EXPECT_FALSE(again.has_websocket);
}

TEST(OtaMerge, StoredCredentialsSurviveAWithheldAnswerAndARestart) {
  MemoryConfigStore flash;
  ASSERT_TRUE(SaveLinkConfig(flash, StoredWebSocket("tk-1")));
  LinkConfig stored, config;
  ASSERT_TRUE(LoadLinkConfig(flash, &stored));
  ASSERT_TRUE(ParseOtaResponse(R"({"websocket":{"url":"ws://gw:8000/xiaozhi/v1/"}})", stored, &config));
  ASSERT_TRUE(SaveLinkConfig(flash, config));
  LinkConfig rebooted;
  ASSERT_TRUE(LoadLinkConfig(flash, &rebooted));
  EXPECT_EQ(rebooted.websocket.token, "tk-1");
}

TEST(OtaMerge, ReadsTheActivationSection) {
  OtaAnswer answer;
  ASSERT_TRUE(ParseOtaAnswer(kActivationAnswer, LinkConfig(), &answer));
  EXPECT_FALSE(answer.has_link);
  ASSERT_TRUE(answer.has_activation);
  EXPECT_EQ(answer.activation.code, "123456");
  EXPECT_EQ(answer.activation.challenge, "c0ffee");
  EXPECT_EQ(answer.activation.timeout_ms, 60000u);
  LinkConfig config;
  EXPECT_FALSE(ParseOtaResponse(kActivationAnswer, &config)) << "no section to connect with";
  EXPECT_FALSE(ParseOtaAnswer(R"({"activation":{"message":"nothing to show or poll"}})", LinkConfig(), &answer));
  ASSERT_TRUE(ParseOtaAnswer(R"({"activation":{"code":"1","timeout_ms":-5}})", LinkConfig(), &answer));
  EXPECT_EQ(answer.activation.timeout_ms, 0u) << "a negative timeout is no timeout";
}

TEST(OtaProof, PresentsTheStoredCredentials) {
  EXPECT_EQ(Base64Encode("Aladdin:open sesame"), "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");  // RFC 7617
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(OtaProof(StoredWebSocket("tk-1")), "Bearer tk-1");
  EXPECT_EQ(OtaProof(StoredWebSocket("Basic abc")), "Basic abc") << "a token with a scheme goes as it is";
  const LinkConfig mqtt = StoredMqtt();
  EXPECT_EQ(OtaProof(mqtt), "Basic " + Base64Encode(mqtt.mqtt.username + ":" + mqtt.mqtt.password));
  EXPECT_EQ(OtaProof(StoredWebSocket("")), "");
  EXPECT_EQ(OtaProof(LinkConfig()), "");
}

TEST(OtaClient, PresentsItsTokenAndKeepsItWhenTheAnswerLeavesItOut) {
  ScriptedEndpoint gw;
  gw.ota.push_back(Ok(R"({"websocket":{"url":"ws://gw:8000/xiaozhi/v1/"}})"));
  FakeTime time;
  OtaClient client(Options(), time.clock(), time.wait(), gw.post());
  LinkConfig config;
  std::string error;
  ASSERT_TRUE(client.Fetch(StoredWebSocket("tk-1"), &config, &error)) << error;
  EXPECT_EQ(config.websocket.token, "tk-1");
  ASSERT_EQ(gw.requests.size(), 1u);
  EXPECT_EQ(HeaderOf(gw.requests[0].headers, "Authorization"), "Bearer tk-1");
  EXPECT_EQ(HeaderOf(gw.requests[0].headers, "Device-Id"), "aa:bb:cc:dd:ee:ff");

  gw.ota.push_back(Ok(R"({"websocket":{"url":"ws://gw:8000/xiaozhi/v1/","token":"tk-0"}})"));
  ASSERT_TRUE(client.Fetch(LinkConfig(), &config, &error)) << error;
  EXPECT_EQ(HeaderOf(gw.requests[1].headers, "Authorization"), "") << "nothing stored, nothing presented";
  EXPECT_TRUE(time.waits.empty());
}

TEST(OtaClient, ShowsTheCodePollsUntilApprovedThenCollectsItsCredentials) {
  ScriptedEndpoint gw;
  gw.ota.push_back(Ok(kActivationAnswer));
  gw.ota.push_back(Ok(R"({"websocket":{"url":"ws://gw:8000/xiaozhi/v1/","token":"tk-new"}})"));
  gw.activate = {HttpAnswer{202, R"({"status":"pending"})"}, HttpAnswer{202, R"({"status":"pending"})"},
                 HttpAnswer{200, R"({"status":"activated"})"}};
  FakeTime time;
  OtaClientOptions options = Options();
  options.pending_poll_ms = 3000;
  OtaClient client(options, time.clock(), time.wait(), gw.post());
  std::vector<Shown> shown;
  client.SetActivationHandler([&](ActivationState s, const OtaActivation& a) { shown.push_back({ActivationStateName(s), a.code}); });
  LinkConfig config;
  std::string error;
  ASSERT_TRUE(client.Fetch(LinkConfig(), &config, &error)) << error;

  EXPECT_EQ(config.websocket.token, "tk-new");
  ASSERT_EQ(shown.size(), 2u);
  EXPECT_EQ(shown[0].state, "code");
  EXPECT_EQ(shown[0].code, "123456");
  EXPECT_EQ(shown[1].state, "activated");
  EXPECT_EQ(gw.count(kActivateUrl), 3u);
  EXPECT_EQ(gw.count(kOtaUrl), 2u) << "approved: one more check collects the credentials";
  EXPECT_EQ(time.waits, (std::vector<uint32_t>{3000, 3000})) << "202 means pending: poll again after 3 s";
  for (const auto& r : gw.requests) {
    EXPECT_EQ(HeaderOf(r.headers, "Client-Id"), "u-1");
    if (r.url == kActivateUrl) {
      EXPECT_EQ(r.body, "{}") << "a v1 device (no eFuse key)";
    }
  }
}

TEST(OtaClient, GivesUpWhenNobodyApprovesWithinTheTimeout) {
  ScriptedEndpoint gw;
  gw.ota.push_back(Ok(kActivationAnswer));  // timeout_ms 60000
  gw.activate = {HttpAnswer{202, ""}};
  FakeTime time;
  OtaClient client(Options(), time.clock(), time.wait(), gw.post());
  std::vector<Shown> shown;
  client.SetActivationHandler([&](ActivationState s, const OtaActivation& a) { shown.push_back({ActivationStateName(s), a.code}); });
  LinkConfig config;
  std::string error;
  const uint64_t start = time.now;
  EXPECT_FALSE(client.Fetch(LinkConfig(), &config, &error));
  EXPECT_EQ(time.now - start, 60000u) << "it waits no longer than timeout_ms";
  EXPECT_EQ(gw.count(kActivateUrl), 20u) << "every 3 s for 60 s";
  ASSERT_FALSE(shown.empty());
  EXPECT_EQ(shown.back().state, "timed_out");
  EXPECT_NE(error.find("not approved"), std::string::npos);
}

TEST(OtaClient, ABoundlessTimeoutIsCapped) {
  ScriptedEndpoint gw;
  gw.ota.push_back(Ok(R"({"activation":{"code":"1","challenge":"c","timeout_ms":1e12}})"));
  gw.activate = {HttpAnswer{202, ""}};
  FakeTime time;
  OtaClientOptions options = Options();
  options.max_activation_timeout_ms = 30000;
  OtaClient client(options, time.clock(), time.wait(), gw.post());
  LinkConfig config;
  std::string error;
  const uint64_t start = time.now;
  EXPECT_FALSE(client.Fetch(LinkConfig(), &config, &error));
  EXPECT_EQ(time.now - start, 30000u);
}

TEST(OtaClient, StopsAtARejectionAndWhenTheDeviceStops) {
  ScriptedEndpoint gw;
  gw.ota.push_back(Ok(kActivationAnswer));
  gw.activate = {HttpAnswer{202, ""}, HttpAnswer{403, R"({"code":"ENROLLMENT_REJECTED"})"}};
  FakeTime time;
  OtaClient client(Options(), time.clock(), time.wait(), gw.post());
  std::vector<Shown> shown;
  client.SetActivationHandler([&](ActivationState s, const OtaActivation& a) { shown.push_back({ActivationStateName(s), a.code}); });
  LinkConfig config;
  std::string error;
  EXPECT_FALSE(client.Fetch(LinkConfig(), &config, &error));
  EXPECT_EQ(shown.back().state, "rejected");
  EXPECT_EQ(gw.count(kActivateUrl), 2u);

  gw.ota.push_back(Ok(kActivationAnswer));
  gw.activate = {HttpAnswer{202, ""}};
  time.stop_after = static_cast<int>(time.waits.size()) + 1;
  EXPECT_FALSE(client.Fetch(LinkConfig(), &config, &error));
  EXPECT_NE(error.find("stopped"), std::string::npos);
}

TEST(OtaClient, AnEndpointThatKeepsAskingForActivationIsBounded) {
  ScriptedEndpoint gw;
  for (int i = 0; i < 100; ++i) gw.ota.push_back(Ok(kActivationAnswer));
  gw.activate = {HttpAnswer{200, ""}};  // "approved", yet the next check asks again
  FakeTime time;
  OtaClient client(Options(), time.clock(), time.wait(), gw.post());
  LinkConfig config;
  std::string error;
  EXPECT_FALSE(client.Fetch(LinkConfig(), &config, &error));
  EXPECT_LT(gw.count(kOtaUrl), 10u);
  EXPECT_FALSE(error.empty());
}

TEST(OtaClient, AnExpiredClaimMakesANewCheck) {
  ScriptedEndpoint gw;
  gw.ota.push_back(Ok(kActivationAnswer));
  gw.ota.push_back(Ok(R"({"activation":{"code":"654321","challenge":"beef","timeout_ms":60000}})"));
  gw.ota.push_back(Ok(R"({"websocket":{"url":"ws://gw/","token":"t"}})"));
  gw.activate = {HttpAnswer{404, ""}, HttpAnswer{200, ""}};
  FakeTime time;
  OtaClient client(Options(), time.clock(), time.wait(), gw.post());
  std::vector<Shown> shown;
  client.SetActivationHandler([&](ActivationState s, const OtaActivation& a) { shown.push_back({ActivationStateName(s), a.code}); });
  LinkConfig config;
  std::string error;
  ASSERT_TRUE(client.Fetch(LinkConfig(), &config, &error)) << error;
  ASSERT_EQ(shown.size(), 3u);
  EXPECT_EQ(shown[1].code, "654321") << "the new code is shown";
  EXPECT_EQ(ActivateUrl("http://gw/ota"), "http://gw/ota/activate");
}
