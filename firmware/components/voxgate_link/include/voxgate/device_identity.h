// Who a device is on the wire: MAC (lowercase, colons), client UUID, and the
// names derived from them (upgrade headers, MQTT client id and topics).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace voxgate {

struct DeviceIdentity {
  std::string mac;   // "aa:bb:cc:dd:ee:ff"
  std::string uuid;  // client id, a UUID v4 kept across reboots
};

using Headers = std::vector<std::pair<std::string, std::string>>;

// Accepts "aa:bb:cc:dd:ee:ff", "AA-BB-..", "aa_bb_..", "aabbccddeeff" (one
// separator style throughout) and writes the canonical lowercase colon form.
bool NormalizeMac(const std::string& text, std::string* mac);

// "aa:bb:cc:dd:ee:ff" -> "aa_bb_cc_dd_ee_ff"
std::string MacWithUnderscores(const std::string& mac);

// The MAC `offset` addresses after `mac` (the simulator numbers its devices).
std::string OffsetMac(const std::string& mac, uint32_t offset);

// A UUID v4 string from 16 random bytes.
std::string UuidFromBytes(const uint8_t bytes[16]);

// WebSocket upgrade headers: Authorization (Bearer <token>, omitted when the
// token is empty), Protocol-Version: 1, Device-Id, Client-Id.
Headers UpgradeHeaders(const DeviceIdentity& identity, const std::string& token);

// MQTT: "GID_<group>@@@<mac_>@@@<uuid>" and the device's own push topic.
std::string MqttClientId(const std::string& group, const DeviceIdentity& identity);
std::string P2pTopic(const std::string& mac);
constexpr const char* kDefaultPublishTopic = "device-server";

}  // namespace voxgate
