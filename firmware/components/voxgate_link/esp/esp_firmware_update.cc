// ESP only: see esp_firmware_update.h.
#include "esp_firmware_update.h"

#include <cstring>
#include <memory>

#include "cJSON.h"
#include "esp_app_desc.h"
#include "esp_crt_bundle.h"
#include "esp_err.h"
#include "esp_http_client.h"
#include "esp_https_ota.h"
#include "esp_log.h"
#include "esp_ota_ops.h"
#include "esp_partition.h"
#include "esp_system.h"
#include "esp_timer.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "mbedtls/sha256.h"
#include "nvs.h"
#include "voxgate/firmware_install.h"

namespace voxgate {
namespace {

const char* const kTag = "voxgate_fw";
// The TLS handshake and the HTTP client need more than the default task stack.
constexpr uint32_t kUpdateTaskStack = 8192;
// NVS: the rolled-back version already reported to the gateway (report it once).
const char* const kNvsNamespace = "voxgate_fw";
const char* const kNvsReported = "rb_reported";

uint64_t NowMs() { return static_cast<uint64_t>(esp_timer_get_time() / 1000); }

bool RunningImagePending() {
  esp_ota_img_states_t state;
  return esp_ota_get_state_partition(esp_ota_get_running_partition(), &state) == ESP_OK &&
         state == ESP_OTA_IMG_PENDING_VERIFY;
}

std::string RejectedVersion() {
  const esp_partition_t* invalid = esp_ota_get_last_invalid_partition();
  esp_app_desc_t desc;
  if (invalid == nullptr || esp_ota_get_partition_description(invalid, &desc) != ESP_OK) return "";
  return desc.version;
}

bool ReportedRollback(const std::string& version) {
  nvs_handle_t nvs;
  if (nvs_open(kNvsNamespace, NVS_READONLY, &nvs) != ESP_OK) return false;
  char stored[33] = {};
  size_t length = sizeof stored;
  const bool same = nvs_get_str(nvs, kNvsReported, stored, &length) == ESP_OK && version == stored;
  nvs_close(nvs);
  return same;
}

void RememberReportedRollback(const std::string& version) {
  nvs_handle_t nvs;
  if (nvs_open(kNvsNamespace, NVS_READWRITE, &nvs) != ESP_OK) return;
  if (nvs_set_str(nvs, kNvsReported, version.c_str()) == ESP_OK) nvs_commit(nvs);
  nvs_close(nvs);
}

// SHA-256 of the first `length` bytes of a partition: the bytes esp_https_ota
// wrote, so the same digest as the file the gateway serves.
bool PartitionSha256(const esp_partition_t* partition, size_t length, std::string* hex) {
  constexpr size_t kChunk = 1024;
  std::unique_ptr<uint8_t[]> buffer(new uint8_t[kChunk]);
  mbedtls_sha256_context ctx;
  mbedtls_sha256_init(&ctx);
  bool ok = mbedtls_sha256_starts(&ctx, 0) == 0;
  for (size_t offset = 0; ok && offset < length;) {
    const size_t n = length - offset < kChunk ? length - offset : kChunk;
    ok = esp_partition_read(partition, offset, buffer.get(), n) == ESP_OK &&
         mbedtls_sha256_update(&ctx, buffer.get(), n) == 0;
    offset += n;
  }
  uint8_t digest[32];
  ok = ok && mbedtls_sha256_finish(&ctx, digest) == 0;
  mbedtls_sha256_free(&ctx);
  if (ok) *hex = HexLower(digest, sizeof digest);
  return ok;
}

void RollBackIfStillPending(void*) {
  if (!RunningImagePending()) return;
  ESP_LOGE(kTag, "the new image did not reach the gateway in time: rolling back");
  const esp_err_t err = esp_ota_mark_app_invalid_rollback_and_reboot();  // restarts when it can mark the image
  // It returns when IDF sees no other image to roll back to: after a USB flash
  // (no factory app) only the new image has a boot record (ESP_ERR_OTA_ROLLBACK_FAILED).
  // Restart anyway: the bootloader marks the still-pending image aborted and,
  // with no valid boot record left, boots ota_0, the flashed image.
  ESP_LOGE(kTag, "rollback call returned %s: restarting so the bootloader drops the pending image",
           esp_err_to_name(err));
  esp_restart();
}

}  // namespace

// Follows FirmwareInstall's steps: the slot becomes bootable only in
// esp_https_ota_finish, after the header, the transfer and the SHA-256 passed;
// every earlier failure ends in esp_https_ota_abort, which leaves otadata as it was.
bool EspInstallFirmware(const FirmwareOffer& offer, const std::function<void(const FirmwareProgress&)>& report,
                        std::string* error) {
  esp_http_client_config_t http = {};
  http.url = offer.url.c_str();
  http.timeout_ms = 15000;
  http.crt_bundle_attach = esp_crt_bundle_attach;
  http.keep_alive_enable = true;
  esp_https_ota_config_t config = {};
  config.http_config = &http;

  // esp_https_ota writes the slot esp_ota_get_next_update_partition() names.
  const esp_partition_t* slot = esp_ota_get_next_update_partition(nullptr);
  esp_https_ota_handle_t handle = nullptr;
  esp_err_t err = esp_https_ota_begin(&config, &handle);
  if (err != ESP_OK || slot == nullptr) {
    if (err == ESP_OK) esp_https_ota_abort(handle);
    *error = std::string("could not start the download: ") + (err != ESP_OK ? esp_err_to_name(err) : "no OTA slot");
    return false;
  }
  FirmwareInstall install(offer, true);
  // ESP_FAIL here: shorter than a header, or no app description magic (esp_https_ota checks it).
  esp_app_desc_t desc = {};
  const bool app_image = esp_https_ota_get_img_desc(handle, &desc) == ESP_OK;
  if (install.HeaderRead(app_image, app_image ? desc.version : "") == FirmwareInstall::Step::kDownload) {
    const int64_t total = esp_https_ota_get_image_size(handle);  // Content-Length, -1 when absent
    ProgressThrottle throttle;
    while ((err = esp_https_ota_perform(handle)) == ESP_ERR_HTTPS_OTA_IN_PROGRESS) {
      const int64_t read = esp_https_ota_get_image_len_read(handle);
      if (throttle.Due(read, total, NowMs())) report({"downloading", offer.version, read, total, ""});
    }
    // The first perform checks the chip id and revision (ESP_ERR_INVALID_VERSION);
    // esp_ota_write the first byte's magic (ESP_ERR_OTA_VALIDATE_FAILED).
    const TransferEnd end = err == ESP_ERR_INVALID_VERSION         ? TransferEnd::kWrongChip
                            : err == ESP_ERR_OTA_VALIDATE_FAILED   ? TransferEnd::kNotAnAppImage
                            : err != ESP_OK                        ? TransferEnd::kFailed
                            : !esp_https_ota_is_complete_data_received(handle) ? TransferEnd::kFailed
                                                                    : TransferEnd::kComplete;
    const int64_t received = esp_https_ota_get_image_len_read(handle);
    const std::string detail = err != ESP_OK ? std::string("download failed: ") + esp_err_to_name(err)
                                             : "download failed: the connection ended early";
    if (install.Downloaded(end, detail, total, received) == FirmwareInstall::Step::kVerify) {
      report({"verifying", offer.version, received, total, ""});
      // Every byte is in the slot: esp_ota_write holds back a partial 16-byte
      // block (until esp_ota_end) only with flash encryption, and app images
      // are 16-byte multiples. A file that is not would fail here: refused, never booted.
      std::string sha256;
      const bool read_ok = PartitionSha256(slot, static_cast<size_t>(received), &sha256);
      install.Verified(read_ok, sha256);
    }
  }
  if (install.step() != FirmwareInstall::Step::kFinish) {
    esp_https_ota_abort(handle);  // the slot never becomes bootable; otadata untouched
    *error = install.error();
    return false;
  }
  // esp_ota_end (validates the image, and its signature with secure boot), then esp_ota_set_boot_partition.
  err = esp_https_ota_finish(handle);
  const FinishEnd end = err == ESP_OK                        ? FinishEnd::kDone
                        : err == ESP_ERR_OTA_VALIDATE_FAILED ? FinishEnd::kInvalid
                                                             : FinishEnd::kFailed;
  if (install.Finished(end, esp_err_to_name(err)) != FirmwareInstall::Step::kDone) {
    *error = install.error();
    return false;
  }
  return true;
}

EspFirmwareUpdate::EspFirmwareUpdate(const LinkConfig& link, std::string running_version, Notify notify,
                                     uint64_t confirm_deadline_ms)
    : link_(link),
      running_version_(std::move(running_version)),
      rejected_version_(RejectedVersion()),
      notify_(std::move(notify)),
      confirmation_(RunningImagePending(), NowMs(), confirm_deadline_ms) {
  if (confirmation_.pending()) ESP_LOGW(kTag, "image %s is new: kept once the gateway initializes it", running_version_.c_str());
}

void EspFirmwareUpdate::ArmRollbackDeadline(uint64_t deadline_ms) {
  if (!RunningImagePending()) return;
  esp_timer_create_args_t args = {};
  args.callback = RollBackIfStillPending;
  args.name = "voxgate_fw_deadline";
  esp_timer_handle_t timer = nullptr;
  if (esp_timer_create(&args, &timer) == ESP_OK) esp_timer_start_once(timer, deadline_ms * 1000);
}

void EspFirmwareUpdate::OnMcpHandled(const std::string& payload) {
  std::lock_guard<std::mutex> lock(mutex_);
  confirmation_.OnMcpHandled(payload);
}

void EspFirmwareUpdate::Poll() {
  BootConfirmation::Verdict verdict;
  bool initialized;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    verdict = confirmation_.Poll(NowMs());
    initialized = confirmation_.initialized();
  }
  if (verdict == BootConfirmation::Verdict::kMarkValid) {
    esp_ota_mark_app_valid_cancel_rollback();
    ESP_LOGI(kTag, "image %s confirmed", running_version_.c_str());
    Report({"confirmed", running_version_, -1, -1, ""});
  } else if (verdict == BootConfirmation::Verdict::kRollBack) {
    RollBackIfStillPending(nullptr);  // does not return when it rolls back
  }
  if (!initialized || checked_) return;
  checked_ = true;
  if (!rejected_version_.empty() && !ReportedRollback(rejected_version_)) {
    Report({"rolled_back", rejected_version_, -1, -1, "the new image did not reach the gateway"});
    RememberReportedRollback(rejected_version_);
  }
  if (!link_.has_firmware) return;
  const UpdateDecision decision = DecideUpdate(running_version_, link_.firmware, rejected_version_);
  ESP_LOGI(kTag, "offered %s: %s", link_.firmware.version.c_str(), decision.reason.c_str());
  if (decision.update && xTaskCreate(UpdateTask, "voxgate_fw", kUpdateTaskStack, this, 3, nullptr) != pdPASS) {
    ESP_LOGE(kTag, "could not start the update task");
  }
}

void EspFirmwareUpdate::UpdateTask(void* self) {
  auto* update = static_cast<EspFirmwareUpdate*>(self);
  const FirmwareOffer& offer = update->link_.firmware;
  std::string error;
  if (EspInstallFirmware(offer, [update](const FirmwareProgress& p) { update->Report(p); }, &error)) {
    update->Report({"installed", offer.version, -1, -1, ""});
    ESP_LOGI(kTag, "image %s installed: rebooting", offer.version.c_str());
    vTaskDelay(pdMS_TO_TICKS(1000));  // let the notification leave
    esp_restart();
  }
  ESP_LOGE(kTag, "update to %s failed: %s", offer.version.c_str(), error.c_str());
  update->Report({"failed", offer.version, -1, -1, error});
  ESP_LOGD(kTag, "update task stack high water mark: %u bytes", static_cast<unsigned>(uxTaskGetStackHighWaterMark(nullptr)));
  vTaskDelete(nullptr);
}

void EspFirmwareUpdate::Report(const FirmwareProgress& progress) {
  if (notify_) notify_(kFirmwareUpdateMethod, FirmwareProgressParams(progress));
}

}  // namespace voxgate
