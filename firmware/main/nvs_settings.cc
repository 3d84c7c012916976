#include "nvs_settings.h"

#include "esp_random.h"
#include "nvs.h"
#include "nvs_flash.h"

#include "voxgate/device_identity.h"

namespace {
const char* const kNamespace = "voxgate";
}

bool NvsSettings::InitFlash() {
  esp_err_t err = nvs_flash_init();
  if (err == ESP_ERR_NVS_NO_FREE_PAGES || err == ESP_ERR_NVS_NEW_VERSION_FOUND) {
    nvs_flash_erase();
    err = nvs_flash_init();
  }
  return err == ESP_OK;
}

int32_t NvsSettings::GetInt(const char* key, int32_t fallback) {
  nvs_handle_t handle;
  int32_t value = fallback;
  if (nvs_open(kNamespace, NVS_READONLY, &handle) == ESP_OK) {
    if (nvs_get_i32(handle, key, &value) != ESP_OK) value = fallback;
    nvs_close(handle);
  }
  return value;
}

bool NvsSettings::SetInt(const char* key, int32_t value) {
  nvs_handle_t handle;
  if (nvs_open(kNamespace, NVS_READWRITE, &handle) != ESP_OK) return false;
  const bool ok = nvs_set_i32(handle, key, value) == ESP_OK && nvs_commit(handle) == ESP_OK;
  nvs_close(handle);
  return ok;
}

std::string NvsSettings::GetString(const char* key) {
  nvs_handle_t handle;
  std::string value;
  if (nvs_open(kNamespace, NVS_READONLY, &handle) != ESP_OK) return value;
  size_t length = 0;
  if (nvs_get_str(handle, key, nullptr, &length) == ESP_OK && length > 1) {
    value.resize(length);
    if (nvs_get_str(handle, key, &value[0], &length) == ESP_OK) {
      value.resize(length - 1);
    } else {
      value.clear();
    }
  }
  nvs_close(handle);
  return value;
}

bool NvsSettings::SetString(const char* key, const std::string& value) {
  nvs_handle_t handle;
  if (nvs_open(kNamespace, NVS_READWRITE, &handle) != ESP_OK) return false;
  const bool ok = nvs_set_str(handle, key, value.c_str()) == ESP_OK && nvs_commit(handle) == ESP_OK;
  nvs_close(handle);
  return ok;
}

std::string NvsSettings::ClientUuid() {
  std::string uuid = GetString("uuid");
  if (uuid.size() == 36) return uuid;
  uint8_t bytes[16];
  esp_fill_random(bytes, sizeof bytes);
  uuid = voxgate::UuidFromBytes(bytes);
  SetString("uuid", uuid);
  return uuid;
}
