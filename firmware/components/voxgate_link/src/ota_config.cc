#include "voxgate/ota_config.h"

#include <cstdio>
#include <cstdlib>

#include "cJSON.h"
#include "voxgate/base64.h"
#include "voxgate/envelope.h"

namespace voxgate {
namespace {

std::string PrintAndDelete(cJSON* root) {
  char* text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  std::string out = text ? text : "";
  cJSON_free(text);
  return out;
}

void ReadString(const cJSON* object, const char* key, std::string* out) {
  const cJSON* item = cJSON_GetObjectItemCaseSensitive(object, key);
  if (cJSON_IsString(item)) *out = item->valuestring;
}

void ReadMqtt(const cJSON* mqtt, MqttConfig* config) {
  ReadString(mqtt, "endpoint", &config->endpoint);
  ReadString(mqtt, "client_id", &config->client_id);
  ReadString(mqtt, "username", &config->username);
  ReadString(mqtt, "password", &config->password);
  ReadString(mqtt, "publish_topic", &config->publish_topic);
  ReadString(mqtt, "subscribe_topic", &config->subscribe_topic);
  const cJSON* keepalive = cJSON_GetObjectItemCaseSensitive(mqtt, "keepalive");
  if (cJSON_IsNumber(keepalive) && keepalive->valueint > 0) config->keepalive_s = keepalive->valueint;
  if (config->publish_topic.empty()) config->publish_topic = kDefaultPublishTopic;
}

// The answer's sections decide the transport; each section starts from the
// stored one of the same kind, so absent fields keep their stored values.
bool ReadSections(const cJSON* root, const LinkConfig& stored, LinkConfig* config) {
  const cJSON* ws = cJSON_GetObjectItemCaseSensitive(root, "websocket");
  const cJSON* mqtt = cJSON_GetObjectItemCaseSensitive(root, "mqtt");
  LinkConfig out;
  if (cJSON_IsObject(ws)) {
    if (stored.has_websocket) out.websocket = stored.websocket;
    ReadString(ws, "url", &out.websocket.url);
    ReadString(ws, "token", &out.websocket.token);
    out.has_websocket = !out.websocket.url.empty();
  }
  if (cJSON_IsObject(mqtt)) {
    if (stored.has_mqtt) out.mqtt = stored.mqtt;
    ReadMqtt(mqtt, &out.mqtt);
    out.has_mqtt = !out.mqtt.endpoint.empty();
  }
  if (!out.has_websocket && !out.has_mqtt) return false;
  out.has_firmware = ReadFirmwareOffer(root, &out.firmware);
  *config = out;
  return true;
}

bool ReadActivation(const cJSON* root, OtaActivation* activation) {
  const cJSON* section = cJSON_GetObjectItemCaseSensitive(root, "activation");
  if (!cJSON_IsObject(section)) return false;
  OtaActivation out;
  ReadString(section, "code", &out.code);
  ReadString(section, "message", &out.message);
  ReadString(section, "challenge", &out.challenge);
  const cJSON* timeout = cJSON_GetObjectItemCaseSensitive(section, "timeout_ms");
  if (cJSON_IsNumber(timeout) && timeout->valuedouble > 0) {
    out.timeout_ms = timeout->valuedouble >= 4294967295.0 ? UINT32_MAX : static_cast<uint32_t>(timeout->valuedouble);
  }
  if (out.code.empty() && out.challenge.empty()) return false;  // nothing to show, nothing to poll
  *activation = out;
  return true;
}

}  // namespace

std::string OtaRequestBody(const DeviceIdentity& identity, const SystemInfo& info) {
  cJSON* root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "mac_address", identity.mac.c_str());
  cJSON_AddStringToObject(root, "uuid", identity.uuid.c_str());
  cJSON_AddStringToObject(root, "chip_model_name", info.chip_model.c_str());
  cJSON* app = cJSON_AddObjectToObject(root, "application");
  cJSON_AddStringToObject(app, "name", info.app_name.c_str());
  cJSON_AddStringToObject(app, "version", info.app_version.c_str());
  if (!info.idf_version.empty()) cJSON_AddStringToObject(app, "idf_version", info.idf_version.c_str());
  cJSON* board = cJSON_AddObjectToObject(root, "board");
  cJSON_AddStringToObject(board, "type", info.board_type.c_str());
  cJSON_AddStringToObject(board, "name", info.board_name.c_str());
  cJSON_AddStringToObject(board, "mac", identity.mac.c_str());
  return PrintAndDelete(root);
}

Headers OtaRequestHeaders(const DeviceIdentity& identity, const SystemInfo& info) {
  return {{"Device-Id", identity.mac},
          {"Client-Id", identity.uuid},
          {"User-Agent", info.board_name + "/" + info.app_version},
          {"Accept-Language", "en-US"},
          {"Content-Type", "application/json"}};
}

bool ParseOtaAnswer(const std::string& text, const LinkConfig& stored, OtaAnswer* answer) {
  if (JsonDeeperThan(text.data(), text.size(), kMaxFrameDepth)) return false;  // cJSON recurses: bound the stack
  cJSON* root = cJSON_ParseWithLength(text.data(), text.size());
  OtaAnswer out;
  if (cJSON_IsObject(root)) {
    out.has_link = ReadSections(root, stored, &out.link);
    out.has_activation = ReadActivation(root, &out.activation);
  }
  cJSON_Delete(root);
  if (!out.has_link && !out.has_activation) return false;
  *answer = out;
  return true;
}

bool ParseOtaResponse(const std::string& text, const LinkConfig& stored, LinkConfig* config) {
  OtaAnswer answer;
  if (!ParseOtaAnswer(text, stored, &answer) || !answer.has_link) return false;
  *config = answer.link;
  return true;
}

bool ParseOtaResponse(const std::string& text, LinkConfig* config) { return ParseOtaResponse(text, LinkConfig(), config); }

std::string OtaProof(const LinkConfig& stored) {
  if (stored.has_mqtt && !stored.mqtt.password.empty()) {
    return "Basic " + Base64Encode(stored.mqtt.username + ":" + stored.mqtt.password);
  }
  if (stored.has_websocket && !stored.websocket.token.empty()) {
    const std::string& token = stored.websocket.token;
    // As at the WebSocket upgrade: a token with a scheme is sent as it is.
    return token.find(' ') == std::string::npos ? "Bearer " + token : token;
  }
  return "";
}

std::string SerializeLinkConfig(const LinkConfig& config) {
  cJSON* root = cJSON_CreateObject();
  if (config.has_websocket) {
    cJSON* ws = cJSON_AddObjectToObject(root, "websocket");
    cJSON_AddStringToObject(ws, "url", config.websocket.url.c_str());
    cJSON_AddStringToObject(ws, "token", config.websocket.token.c_str());
  }
  if (config.has_mqtt) {
    cJSON* mqtt = cJSON_AddObjectToObject(root, "mqtt");
    cJSON_AddStringToObject(mqtt, "endpoint", config.mqtt.endpoint.c_str());
    cJSON_AddStringToObject(mqtt, "client_id", config.mqtt.client_id.c_str());
    cJSON_AddStringToObject(mqtt, "username", config.mqtt.username.c_str());
    cJSON_AddStringToObject(mqtt, "password", config.mqtt.password.c_str());
    cJSON_AddStringToObject(mqtt, "publish_topic", config.mqtt.publish_topic.c_str());
    cJSON_AddStringToObject(mqtt, "subscribe_topic", config.mqtt.subscribe_topic.c_str());
    cJSON_AddNumberToObject(mqtt, "keepalive", config.mqtt.keepalive_s);
  }
  return PrintAndDelete(root);
}

bool ParseLinkConfig(const std::string& text, LinkConfig* config) { return ParseOtaResponse(text, config); }

bool SplitEndpoint(const std::string& endpoint, uint16_t default_port, std::string* host, uint16_t* port) {
  const size_t colon = endpoint.rfind(':');
  if (endpoint.empty() || colon == 0) return false;
  if (colon == std::string::npos) {
    *host = endpoint;
    *port = default_port;
    return true;
  }
  const std::string digits = endpoint.substr(colon + 1);
  char* end = nullptr;
  const long value = strtol(digits.c_str(), &end, 10);
  if (digits.empty() || *end != '\0' || value <= 0 || value > 65535) return false;
  *host = endpoint.substr(0, colon);
  *port = static_cast<uint16_t>(value);
  return true;
}

bool MemoryConfigStore::Load(std::string* blob) {
  if (!saved_) return false;
  *blob = blob_;
  return true;
}

bool MemoryConfigStore::Save(const std::string& blob) {
  blob_ = blob;
  saved_ = true;
  return true;
}

bool FileConfigStore::Load(std::string* blob) {
  FILE* file = fopen(path_.c_str(), "rb");
  if (file == nullptr) return false;
  std::string data;
  char buffer[512];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, file)) > 0) data.append(buffer, n);
  fclose(file);
  *blob = data;
  return true;
}

bool FileConfigStore::Save(const std::string& blob) {
  const std::string temp = path_ + ".tmp";
  FILE* file = fopen(temp.c_str(), "wb");
  if (file == nullptr) return false;
  const bool written = fwrite(blob.data(), 1, blob.size(), file) == blob.size();
  if (fclose(file) != 0 || !written) return false;
  return rename(temp.c_str(), path_.c_str()) == 0;  // never leave a half-written config
}

bool SaveLinkConfig(ConfigStore& store, const LinkConfig& config) { return store.Save(SerializeLinkConfig(config)); }

bool LoadLinkConfig(ConfigStore& store, LinkConfig* config) {
  std::string blob;
  return store.Load(&blob) && ParseLinkConfig(blob, config);
}

}  // namespace voxgate
