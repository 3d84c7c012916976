// ESP only: firmware update over the air with esp_https_ota and esp_ota_ops.
// The decisions are portable (voxgate/firmware_update.h, host-tested); this
// file only moves bytes into the other app slot and flips otadata.
//
// Use from app_main:
//   EspFirmwareUpdate::ArmRollbackDeadline();            // first thing: a new image that hangs is rolled back
//   static EspFirmwareUpdate firmware(link, app->version, notify);  // after the OTA request
//   on_mcp: server.ParseMessage(p); firmware.OnMcpHandled(p);
//   main loop: firmware.Poll();
#pragma once

#include <functional>
#include <mutex>
#include <string>

#include "voxgate/firmware_update.h"
#include "voxgate/ota_config.h"

struct cJSON;

namespace voxgate {

class EspFirmwareUpdate {
 public:
  // Sends a device notification (McpServer::Notify); consumes params.
  using Notify = std::function<void(const char* method, cJSON* params)>;

  EspFirmwareUpdate(const LinkConfig& link, std::string running_version, Notify notify,
                    uint64_t confirm_deadline_ms = kDefaultConfirmDeadlineMs);

  // An esp_timer that rolls a still-unconfirmed image back when the deadline
  // passes, even if app_main never gets past Wi-Fi. Call once, early.
  static void ArmRollbackDeadline(uint64_t deadline_ms = kDefaultConfirmDeadlineMs);

  // After the MCP server handled a message from the gateway (any task).
  void OnMcpHandled(const std::string& payload);
  // From the main loop: keeps or rolls back a new image; once the gateway has
  // initialized the device, reports a past rollback and starts a due update.
  void Poll();

 private:
  static void UpdateTask(void* self);
  void Report(const FirmwareProgress& progress);

  LinkConfig link_;
  std::string running_version_;
  std::string rejected_version_;  // the image last rolled back, if any
  Notify notify_;
  std::mutex mutex_;
  BootConfirmation confirmation_;
  bool checked_ = false;
};

// Downloads `offer` into the next OTA slot with esp_https_ota, checks the
// image (ESP-IDF's own validation, then size and SHA-256 against the offer)
// and makes it the boot partition. Blocking; the caller reboots on success.
bool EspInstallFirmware(const FirmwareOffer& offer, const std::function<void(const FirmwareProgress&)>& report,
                        std::string* error);

}  // namespace voxgate
