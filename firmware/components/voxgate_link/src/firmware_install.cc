#include "voxgate/firmware_install.h"

#include <utility>

namespace voxgate {

FirmwareInstall::FirmwareInstall(FirmwareOffer offer, bool has_header)
    : offer_(std::move(offer)), step_(has_header ? Step::kReadHeader : Step::kDownload) {}

FirmwareInstall::Step FirmwareInstall::Fail(Step step, std::string why) {
  error_ = std::move(why);
  return step_ = step;
}

FirmwareInstall::Step FirmwareInstall::HeaderRead(bool app_image, const std::string& image_version) {
  if (step_ != Step::kReadHeader) return Fail(Step::kAbort, "install steps out of order");
  if (!app_image) return Fail(Step::kAbort, "the file is not an ESP32 app image (its header has no app description)");
  SemVer offered, image;
  if (!ParseSemVer(offer_.version, &offered) || !ParseSemVer(image_version, &image) ||
      CompareSemVer(offered, image) != 0) {
    // Installing it anyway would offer the update again after every boot.
    return Fail(Step::kAbort, "the image is version \"" + image_version + "\", but " + offer_.version + " was offered");
  }
  return step_ = Step::kDownload;
}

FirmwareInstall::Step FirmwareInstall::Downloaded(TransferEnd end, const std::string& detail, int64_t announced,
                                                  int64_t received) {
  if (step_ != Step::kDownload) return Fail(Step::kAbort, "install steps out of order");
  switch (end) {
    case TransferEnd::kWrongChip:
      return Fail(Step::kAbort, "the image is built for another chip type, or a newer chip revision, than this device");
    case TransferEnd::kNotAnAppImage:
      return Fail(Step::kAbort, "the file is not an ESP32 app image (wrong first byte)");
    case TransferEnd::kFailed:
      return Fail(Step::kAbort, detail.empty() ? std::string("download failed") : detail);
    case TransferEnd::kComplete:
      break;
  }
  const std::string why = VerifyTransfer(offer_, announced, received);
  if (!why.empty()) return Fail(Step::kAbort, why);
  announced_ = announced;
  received_ = received;
  return step_ = Step::kVerify;
}

FirmwareInstall::Step FirmwareInstall::Verified(bool read_ok, const std::string& sha256_hex) {
  if (step_ != Step::kVerify) return Fail(Step::kAbort, "install steps out of order");
  if (!read_ok) return Fail(Step::kAbort, "could not read the new slot back to check its SHA-256");
  const std::string why = VerifyDownload(offer_, announced_, received_, sha256_hex);
  if (!why.empty()) return Fail(Step::kAbort, why);
  return step_ = Step::kFinish;
}

FirmwareInstall::Step FirmwareInstall::Finished(FinishEnd end, const std::string& detail) {
  if (step_ != Step::kFinish) return Fail(Step::kFailed, "install steps out of order");
  switch (end) {
    case FinishEnd::kDone:
      return step_ = Step::kDone;
    case FinishEnd::kInvalid:
      return Fail(Step::kFailed, "ESP-IDF refused the image: it is corrupt or not signed for this device");
    case FinishEnd::kFailed:
      break;
  }
  const std::string why = detail.empty() ? std::string("unknown error") : detail;
  return Fail(Step::kFailed, "could not finish the install: " + why);
}

}  // namespace voxgate
