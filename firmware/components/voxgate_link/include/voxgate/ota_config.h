// The OTA config exchange: the device POSTs its system info to the OTA URL
// (with Device-Id/Client-Id headers, and its current credentials as proof)
// and applies the `websocket` or `mqtt` section of the answer over what it
// stored, as the reference firmware does: fields present in the answer
// replace the stored ones, absent ones keep theirs. An enrolled device that
// proved nothing gets its section without credential fields and keeps its
// own. Storage is behind ConfigStore (NVS on the device, a file or memory on
// the host).
#pragma once

#include <cstdint>
#include <string>

#include "voxgate/device_identity.h"
#include "voxgate/firmware_update.h"

namespace voxgate {

struct SystemInfo {
  std::string chip_model = "esp32c3";
  std::string board_type = "voxgate";
  std::string board_name = "voxgate-devkit";
  std::string app_name = "voxgate-firmware";
  std::string app_version = "0.1.0";
  std::string idf_version;
};

struct WebSocketConfig {
  std::string url;
  std::string token;
};

struct MqttConfig {
  std::string endpoint;  // "host[:port]"
  std::string client_id;
  std::string username;
  std::string password;
  std::string publish_topic = kDefaultPublishTopic;
  std::string subscribe_topic;  // informative; the device subscribes to its p2p topic
  int keepalive_s = 240;
};

struct LinkConfig {
  bool has_websocket = false;
  bool has_mqtt = false;
  WebSocketConfig websocket;
  MqttConfig mqtt;
  // The OTA answer's `firmware` section (not stored: it is read fresh at each boot).
  bool has_firmware = false;
  FirmwareOffer firmware;
};

// The answer's `activation` section: the server wants an operator to approve
// this device first. The device shows the code and polls <ota_url>/activate.
struct OtaActivation {
  std::string code;       // shown (and spoken) on the device
  std::string message;
  std::string challenge;  // the device polls only when one is present
  uint32_t timeout_ms = 0;  // 0: the server named none
};

// One OTA answer applied over the stored config.
struct OtaAnswer {
  bool has_link = false;  // a websocket or an mqtt section
  LinkConfig link;
  bool has_activation = false;
  OtaActivation activation;
};

// JSON body of the OTA request: mac_address, uuid, chip_model_name,
// application{name,version,idf_version}, board{type,name}.
std::string OtaRequestBody(const DeviceIdentity& identity, const SystemInfo& info);
// Device-Id, Client-Id, User-Agent, Content-Type, Accept-Language.
Headers OtaRequestHeaders(const DeviceIdentity& identity, const SystemInfo& info);

// Reads an OTA answer over `stored`: the sections present in the answer
// decide the transport (has_websocket/has_mqtt); inside a section, each field
// the answer carries replaces the stored one and each absent field (an
// enrolled device's credentials, for example) keeps the stored value. False if
// the text is not a JSON object or holds neither a section nor an activation.
bool ParseOtaAnswer(const std::string& text, const LinkConfig& stored, OtaAnswer* answer);

// The `websocket` and `mqtt` sections of an OTA answer over `stored` (see
// ParseOtaAnswer). False if the text is not a JSON object or holds neither section.
bool ParseOtaResponse(const std::string& text, const LinkConfig& stored, LinkConfig* config);
// The same over nothing stored.
bool ParseOtaResponse(const std::string& text, LinkConfig* config);

// The `Authorization` value that proves to the OTA endpoint that the device
// holds `stored`'s credentials: `Basic base64(username:password)` for MQTT
// (which wins, as for the transport), else `Bearer <token>`. Empty when it
// holds none.
std::string OtaProof(const LinkConfig& stored);

// Stored form (JSON text) of a LinkConfig.
std::string SerializeLinkConfig(const LinkConfig& config);
bool ParseLinkConfig(const std::string& text, LinkConfig* config);

// "host[:port]" -> host, port (default_port when absent). False if malformed.
bool SplitEndpoint(const std::string& endpoint, uint16_t default_port, std::string* host, uint16_t* port);

class ConfigStore {
 public:
  virtual ~ConfigStore() = default;
  virtual bool Load(std::string* blob) = 0;
  virtual bool Save(const std::string& blob) = 0;
};

// Keeps the blob in memory (tests, simulated devices).
class MemoryConfigStore : public ConfigStore {
 public:
  bool Load(std::string* blob) override;
  bool Save(const std::string& blob) override;

 private:
  std::string blob_;
  bool saved_ = false;
};

// Keeps the blob in a file (host).
class FileConfigStore : public ConfigStore {
 public:
  explicit FileConfigStore(std::string path) : path_(std::move(path)) {}
  bool Load(std::string* blob) override;
  bool Save(const std::string& blob) override;

 private:
  std::string path_;
};

bool SaveLinkConfig(ConfigStore& store, const LinkConfig& config);
bool LoadLinkConfig(ConfigStore& store, LinkConfig* config);

}  // namespace voxgate
