// ESP only: the link config kept in NVS.
#include <memory>
#include <string>

#include "nvs.h"

#include "esp_protocols.h"

namespace voxgate {
namespace {

const char* const kNamespace = "voxgate";
const char* const kKey = "link";

class NvsConfigStore : public ConfigStore {
 public:
  bool Load(std::string* blob) override {
    nvs_handle_t handle;
    if (nvs_open(kNamespace, NVS_READONLY, &handle) != ESP_OK) return false;
    size_t length = 0;
    bool ok = nvs_get_str(handle, kKey, nullptr, &length) == ESP_OK && length > 0;
    if (ok) {
      std::string value(length, '\0');
      ok = nvs_get_str(handle, kKey, &value[0], &length) == ESP_OK;
      if (ok) {
        value.resize(length - 1);  // drop the terminating NUL
        *blob = value;
      }
    }
    nvs_close(handle);
    return ok;
  }

  bool Save(const std::string& blob) override {
    nvs_handle_t handle;
    if (nvs_open(kNamespace, NVS_READWRITE, &handle) != ESP_OK) return false;
    const bool ok = nvs_set_str(handle, kKey, blob.c_str()) == ESP_OK && nvs_commit(handle) == ESP_OK;
    nvs_close(handle);
    return ok;
  }
};

}  // namespace

std::unique_ptr<ConfigStore> CreateNvsConfigStore() { return std::unique_ptr<ConfigStore>(new NvsConfigStore()); }

}  // namespace voxgate
