// ESP only: small persistent settings in NVS (namespace "voxgate").
#pragma once

#include <cstdint>
#include <string>

class NvsSettings {
 public:
  static bool InitFlash();  // nvs_flash_init, erasing a full or outdated partition

  int32_t GetInt(const char* key, int32_t fallback);
  bool SetInt(const char* key, int32_t value);
  std::string GetString(const char* key);
  bool SetString(const char* key, const std::string& value);

  // The client id: a UUID v4 made once and kept (reference: NVS board/uuid).
  std::string ClientUuid();
};
