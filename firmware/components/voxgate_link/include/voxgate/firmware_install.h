// Installing an offered image: the order of the steps and the words for what
// went wrong, portable so both are tested on the host. The device follows it
// with esp_https_ota (esp/esp_firmware_update.cc), the host download with
// libwebsockets (host/lws_firmware_download.cc).
//
// The rule: nothing makes the new slot bootable before every check passed.
// esp_https_ota_finish() both validates the image (esp_ota_end) and makes it
// boot next (esp_ota_set_boot_partition), and nothing undoes the second step
// cleanly (setting the old slot back leaves it pending verification with the
// refused image as its rollback target). So the header, the transfer and the
// SHA-256 are all checked while the slot is still unfinished; any failure
// before kFinish means kAbort (esp_https_ota_abort: otadata is untouched).
#pragma once

#include <cstdint>
#include <string>

#include "voxgate/firmware_update.h"

namespace voxgate {

// How the transfer ended (the device maps esp_https_ota_perform's result).
enum class TransferEnd : unsigned char {
  kComplete,       // every byte arrived and was written to the slot
  kWrongChip,      // the image header names another chip or a newer chip revision (ESP_ERR_INVALID_VERSION)
  kNotAnAppImage,  // the first byte is not an app image's magic (ESP_ERR_OTA_VALIDATE_FAILED)
  kFailed,         // anything else: connection, flash write, ... (detail is the error text)
};

// How finishing ended (esp_https_ota_finish's result, or the host's rename).
enum class FinishEnd : unsigned char {
  kDone,      // validated and set to boot next
  kInvalid,   // ESP-IDF's validation refused it (ESP_ERR_OTA_VALIDATE_FAILED)
  kFailed,    // anything else (detail says what)
};

class FirmwareInstall {
 public:
  enum class Step : unsigned char {
    kReadHeader,  // esp_https_ota_get_img_desc, then HeaderRead
    kDownload,    // esp_https_ota_perform until done, then Downloaded
    kVerify,      // hash what the slot holds, then Verified
    kFinish,      // esp_https_ota_finish (the only step that makes the slot bootable), then Finished
    kAbort,       // esp_https_ota_abort; the install failed (error())
    kDone,        // reboot into the new image
    kFailed,      // finishing failed; nothing to abort (finish frees the handle)
  };

  // `has_header`: the transfer starts by reading the app description (the
  // device); the host's images have none and start at kDownload.
  FirmwareInstall(FirmwareOffer offer, bool has_header);

  Step step() const { return step_; }
  // Why the install failed, in plain words (kAbort, kFailed); else empty.
  const std::string& error() const { return error_; }
  const FirmwareOffer& offer() const { return offer_; }

  // `app_image`: the header carries an app description (ESP_APP_DESC_MAGIC_WORD);
  // `image_version`: its version.
  Step HeaderRead(bool app_image, const std::string& image_version);
  // `announced`: Content-Length (-1 when absent); `received`: bytes written.
  Step Downloaded(TransferEnd end, const std::string& detail, int64_t announced, int64_t received);
  // `read_ok`: the slot could be read back; `sha256_hex`: the digest of the
  // `received` bytes it holds.
  Step Verified(bool read_ok, const std::string& sha256_hex);
  Step Finished(FinishEnd end, const std::string& detail);

 private:
  Step Fail(Step step, std::string why);

  FirmwareOffer offer_;
  Step step_;
  std::string error_;
  int64_t announced_ = -1;
  int64_t received_ = 0;
};

}  // namespace voxgate
