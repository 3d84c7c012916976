#include "voxgate/device_identity.h"

#include <cstdio>

namespace voxgate {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ParseMac(const std::string& mac, uint8_t bytes[6]) {
  std::string canonical;
  if (!NormalizeMac(mac, &canonical)) return false;
  for (int i = 0; i < 6; ++i) bytes[i] = static_cast<uint8_t>(HexValue(canonical[i * 3]) * 16 + HexValue(canonical[i * 3 + 1]));
  return true;
}

std::string FormatMac(const uint8_t bytes[6]) {
  char text[18];
  snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", bytes[0], bytes[1], bytes[2], bytes[3], bytes[4],
           bytes[5]);
  return text;
}

}  // namespace

bool NormalizeMac(const std::string& text, std::string* mac) {
  char separator = 0;
  size_t stride = 2;
  if (text.size() == 17) {
    separator = text[2];
    if (separator != ':' && separator != '-' && separator != '_') return false;
    stride = 3;
  } else if (text.size() != 12) {
    return false;
  }
  uint8_t bytes[6];
  for (size_t i = 0; i < 6; ++i) {
    const size_t at = i * stride;
    const int hi = HexValue(text[at]), lo = HexValue(text[at + 1]);
    if (hi < 0 || lo < 0) return false;
    if (separator && i < 5 && text[at + 2] != separator) return false;
    bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  *mac = FormatMac(bytes);
  return true;
}

std::string MacWithUnderscores(const std::string& mac) {
  std::string out = mac;
  for (char& c : out) {
    if (c == ':') c = '_';
  }
  return out;
}

std::string OffsetMac(const std::string& mac, uint32_t offset) {
  uint8_t bytes[6];
  if (!ParseMac(mac, bytes)) return mac;
  uint64_t value = 0;
  for (uint8_t b : bytes) value = (value << 8) | b;
  value = (value + offset) & 0xffffffffffffULL;
  for (int i = 5; i >= 0; --i, value >>= 8) bytes[i] = static_cast<uint8_t>(value & 0xff);
  return FormatMac(bytes);
}

std::string UuidFromBytes(const uint8_t in[16]) {
  uint8_t b[16];
  for (int i = 0; i < 16; ++i) b[i] = in[i];
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  char text[37];
  snprintf(text, sizeof text, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

Headers UpgradeHeaders(const DeviceIdentity& identity, const std::string& token) {
  Headers headers;
  if (!token.empty()) {
    // As the reference firmware: a token that already names a scheme is sent as is.
    headers.emplace_back("Authorization", token.find(' ') == std::string::npos ? "Bearer " + token : token);
  }
  headers.emplace_back("Protocol-Version", "1");
  headers.emplace_back("Device-Id", identity.mac);
  headers.emplace_back("Client-Id", identity.uuid);
  return headers;
}

std::string MqttClientId(const std::string& group, const DeviceIdentity& identity) {
  return "GID_" + group + "@@@" + MacWithUnderscores(identity.mac) + "@@@" + identity.uuid;
}

std::string P2pTopic(const std::string& mac) { return "devices/p2p/" + MacWithUnderscores(mac); }

}  // namespace voxgate
