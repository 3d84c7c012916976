// The shared test vectors in protocol/vectors/ (the contract with the
// TypeScript side). The directory is a hard dependency: a missing file fails.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "capture.h"
#include "mcp/jsonrpc.h"
#include "voxgate/device_identity.h"
#include "voxgate/envelope.h"

#ifndef VOXGATE_VECTORS_DIR
#error "VOXGATE_VECTORS_DIR must point at protocol/vectors"
#endif

using testing_support::Json;
using testing_support::ParseJson;

namespace {

Json LoadVectors(const char* file) {
  const std::string path = std::string(VOXGATE_VECTORS_DIR) + "/" + file;
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) {
    ADD_FAILURE() << "missing shared test vectors: " << path
                  << " (protocol/vectors/ is written by the TypeScript side and is required)";
    return Json(nullptr, cJSON_Delete);
  }
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, n);
  fclose(f);
  Json json = ParseJson(text);
  if (!json || !cJSON_IsArray(cJSON_GetObjectItem(json.get(), "cases"))) {
    ADD_FAILURE() << path << " is not a vector file with a cases array";
    return Json(nullptr, cJSON_Delete);
  }
  return json;
}

std::string Str(const cJSON* object, const char* key) {
  const cJSON* item = cJSON_GetObjectItemCaseSensitive(object, key);
  return cJSON_IsString(item) ? item->valuestring : "";
}

bool ExpectOk(const cJSON* expect) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(expect, "ok")); }

// Compares an id from the vector (number, string or null) with ours.
bool SameId(const cJSON* expected, const cJSON* actual) {
  if (expected == nullptr || cJSON_IsNull(expected)) return actual == nullptr || cJSON_IsNull(actual);
  if (actual == nullptr) return false;
  if (cJSON_IsString(expected)) return cJSON_IsString(actual) && std::string(expected->valuestring) == actual->valuestring;
  return cJSON_IsNumber(expected) && cJSON_IsNumber(actual) && expected->valuedouble == actual->valuedouble;
}

}  // namespace

TEST(Vectors, DirectoryExists) {
  FILE* f = fopen((std::string(VOXGATE_VECTORS_DIR) + "/envelope.json").c_str(), "rb");
  ASSERT_NE(f, nullptr) << "shared vectors not found in " << VOXGATE_VECTORS_DIR;
  fclose(f);
}

// The device receives envelopes from the gateway. Cases marked `repaired`
// describe the gateway repairing frames of reference devices (unescaped
// error messages); a receiver that is a device does not repair, so those are
// checked to be rejected by a strict parser instead.
TEST(Vectors, Envelope) {
  Json vectors = LoadVectors("envelope.json");
  ASSERT_TRUE(vectors);
  int checked = 0;
  const cJSON* c = nullptr;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(vectors.get(), "cases")) {
    const std::string name = Str(c, "name");
    const std::string input = Str(c, "input");
    const cJSON* expect = cJSON_GetObjectItem(c, "expect");
    voxgate::Envelope e = voxgate::Envelope::Parse(input);
    if (cJSON_IsTrue(cJSON_GetObjectItem(expect, "repaired"))) {
      EXPECT_FALSE(e.ok()) << name << ": strict parse of a frame only the gateway repairs";
      continue;
    }
    ++checked;
    ASSERT_EQ(e.ok(), ExpectOk(expect)) << name << ": " << input;
    if (!e.ok()) {
      const std::string reason = Str(expect, "reason");
      const char* ours = e.error() == voxgate::FrameError::kNotJson     ? "not_json"
                         : e.error() == voxgate::FrameError::kNotObject ? "not_object"
                                                                        : "bad_envelope";
      EXPECT_EQ(reason, ours) << name;
      continue;
    }
    EXPECT_EQ(e.type(), Str(expect, "type")) << name;
    const cJSON* session = cJSON_GetObjectItem(expect, "sessionId");
    if (cJSON_IsNull(session)) {
      EXPECT_FALSE(e.has_session_id()) << name;
    } else {
      EXPECT_TRUE(e.has_session_id()) << name;
      EXPECT_EQ(e.session_id(), session->valuestring) << name;
    }
    EXPECT_EQ(e.payload() != nullptr, cJSON_IsTrue(cJSON_GetObjectItem(expect, "hasPayload"))) << name;
  }
  EXPECT_GT(checked, 5);
}

TEST(Vectors, JsonRpcClassification) {
  Json vectors = LoadVectors("jsonrpc.json");
  ASSERT_TRUE(vectors);
  int checked = 0;
  const cJSON* c = nullptr;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(vectors.get(), "cases")) {
    const std::string name = Str(c, "name");
    const std::string input = Str(c, "input");
    const cJSON* expect = cJSON_GetObjectItem(c, "expect");
    mcp::jsonrpc::Message m = mcp::jsonrpc::Message::Parse(input);
    ++checked;
    ASSERT_EQ(m.ok(), ExpectOk(expect)) << name << ": " << input;
    if (!m.ok()) {
      EXPECT_EQ(m.code(), cJSON_GetObjectItem(expect, "code")->valueint) << name;
      continue;
    }
    const std::string kind = Str(expect, "kind");
    const char* ours = m.kind() == mcp::jsonrpc::Kind::kRequest        ? "request"
                       : m.kind() == mcp::jsonrpc::Kind::kNotification ? "notification"
                       : m.kind() == mcp::jsonrpc::Kind::kResponse     ? "response"
                                                                        : "error";
    EXPECT_EQ(kind, ours) << name;
    EXPECT_TRUE(SameId(cJSON_GetObjectItem(expect, "id"), m.id())) << name;
    const std::string method = Str(expect, "method");
    if (!method.empty()) {
      ASSERT_NE(m.method(), nullptr) << name;
      EXPECT_EQ(method, m.method()) << name;
    }
    // `code`/`normalizedCode` of error responses concern the gateway, which
    // normalises device errors; a device never awaits a response.
  }
  EXPECT_GT(checked, 10);
}

TEST(Vectors, DeviceIdNormalisation) {
  Json vectors = LoadVectors("device-id.json");
  ASSERT_TRUE(vectors);
  const cJSON* c = nullptr;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(vectors.get(), "cases")) {
    std::string mac;
    const cJSON* expect = cJSON_GetObjectItem(c, "expect");
    const bool ok = voxgate::NormalizeMac(Str(c, "input"), &mac);
    EXPECT_EQ(ok, ExpectOk(expect)) << Str(c, "name");
    if (ok) {
      EXPECT_EQ(mac, Str(expect, "deviceId")) << Str(c, "name");
    }
  }
}

// The client ids the device builds must be ones the gateway parses back.
TEST(Vectors, MqttClientIdRoundTrip) {
  Json vectors = LoadVectors("mqtt-identity.json");
  ASSERT_TRUE(vectors);
  int checked = 0;
  const cJSON* c = nullptr;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(vectors.get(), "cases")) {
    const cJSON* expect = cJSON_GetObjectItem(c, "expect");
    const cJSON* input = cJSON_GetObjectItem(c, "input");
    const std::string uuid = Str(expect, "uuid");
    // Only well-formed three-part ids with a real uuid are ones our device makes.
    if (!ExpectOk(expect) || uuid.size() != 36 || Str(c, "kind") != "valid") continue;
    voxgate::DeviceIdentity identity{Str(expect, "deviceId"), uuid};
    EXPECT_EQ(voxgate::MqttClientId(Str(expect, "group"), identity), Str(input, "clientId")) << Str(c, "name");
    ++checked;
  }
  EXPECT_GE(checked, 1);
}
