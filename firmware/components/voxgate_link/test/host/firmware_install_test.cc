// The install steps the device follows with esp_https_ota: the new slot is
// made bootable (kFinish) only after the header, the transfer and the SHA-256
// passed; every earlier failure aborts, in words that say what is wrong.
#include <gtest/gtest.h>

#include <string>

#include "voxgate/firmware_install.h"

using namespace voxgate;
using Step = FirmwareInstall::Step;

namespace {

const char kSha[] = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
const char kOtherSha[] = "0000000000000000000000000000000000000000000000000000000000000000";

FirmwareOffer Offer() {
  FirmwareOffer offer;
  offer.version = "1.3.0";
  offer.url = "https://gw/firmware/fw.bin";
  offer.size = 100;
  offer.sha256 = kSha;
  return offer;
}

}  // namespace

TEST(FirmwareInstall, FinishesOnlyAfterEveryCheckPassed) {
  FirmwareInstall install(Offer(), true);
  EXPECT_EQ(install.step(), Step::kReadHeader);
  EXPECT_EQ(install.HeaderRead(true, "1.3.0"), Step::kDownload);
  EXPECT_EQ(install.Downloaded(TransferEnd::kComplete, "", 100, 100), Step::kVerify);
  EXPECT_EQ(install.Verified(true, kSha), Step::kFinish);
  EXPECT_EQ(install.Finished(FinishEnd::kDone, ""), Step::kDone);
  EXPECT_EQ(install.error(), "");
}

// The finding: the digest was checked after esp_https_ota_finish had made the
// image bootable. Now a wrong digest aborts before finishing.
TEST(FirmwareInstall, AWrongDigestAbortsBeforeTheSlotIsFinished) {
  FirmwareInstall install(Offer(), true);
  install.HeaderRead(true, "1.3.0");
  install.Downloaded(TransferEnd::kComplete, "", 100, 100);
  EXPECT_EQ(install.Verified(true, kOtherSha), Step::kAbort);
  EXPECT_EQ(install.error(), "sha256 mismatch");
  EXPECT_EQ(install.Finished(FinishEnd::kDone, ""), Step::kFailed) << "finishing after an abort is refused";

  FirmwareInstall unreadable(Offer(), true);
  unreadable.HeaderRead(true, "1.3.0");
  unreadable.Downloaded(TransferEnd::kComplete, "", 100, 100);
  EXPECT_EQ(unreadable.Verified(false, ""), Step::kAbort);
  EXPECT_EQ(unreadable.error(), "could not read the new slot back to check its SHA-256");
}

TEST(FirmwareInstall, AFileThatIsNotAnAppImageSaysSo) {
  FirmwareInstall install(Offer(), true);
  EXPECT_EQ(install.HeaderRead(false, ""), Step::kAbort);
  EXPECT_EQ(install.error(), "the file is not an ESP32 app image (its header has no app description)");
  EXPECT_EQ(install.error().find("version ,"), std::string::npos);

  FirmwareInstall bad_magic(Offer(), true);
  bad_magic.HeaderRead(true, "1.3.0");
  EXPECT_EQ(bad_magic.Downloaded(TransferEnd::kNotAnAppImage, "ESP_ERR_OTA_VALIDATE_FAILED", -1, 10), Step::kAbort);
  EXPECT_EQ(bad_magic.error(), "the file is not an ESP32 app image (wrong first byte)");
}

TEST(FirmwareInstall, AnImageOfAnotherVersionIsRefusedByName) {
  FirmwareInstall install(Offer(), true);
  EXPECT_EQ(install.HeaderRead(true, "1.2.9"), Step::kAbort);
  EXPECT_EQ(install.error(), "the image is version \"1.2.9\", but 1.3.0 was offered");
}

TEST(FirmwareInstall, AWrongChipImageSaysSoInPlainWords) {
  FirmwareInstall install(Offer(), true);
  install.HeaderRead(true, "1.3.0");
  EXPECT_EQ(install.Downloaded(TransferEnd::kWrongChip, "ESP_ERR_INVALID_VERSION", -1, 0), Step::kAbort);
  EXPECT_EQ(install.error(), "the image is built for another chip type, or a newer chip revision, than this device");
  EXPECT_EQ(install.error().find("ESP_ERR"), std::string::npos);
}

TEST(FirmwareInstall, TransferFailuresAbort) {
  FirmwareInstall cut(Offer(), true);
  cut.HeaderRead(true, "1.3.0");
  EXPECT_EQ(cut.Downloaded(TransferEnd::kFailed, "download failed: ESP_FAIL", 100, 60), Step::kAbort);
  EXPECT_EQ(cut.error(), "download failed: ESP_FAIL");

  FirmwareInstall short_file(Offer(), true);
  short_file.HeaderRead(true, "1.3.0");
  EXPECT_EQ(short_file.Downloaded(TransferEnd::kComplete, "", 60, 60), Step::kAbort);
  EXPECT_EQ(short_file.error(), "size 60 differs from the offered 100");

  FirmwareInstall truncated(Offer(), true);
  truncated.HeaderRead(true, "1.3.0");
  EXPECT_EQ(truncated.Downloaded(TransferEnd::kComplete, "", 100, 60), Step::kAbort);
  EXPECT_EQ(truncated.error(), "received 60 of 100 bytes");
}

TEST(FirmwareInstall, FinishFailuresAreReportedWithoutAnAbort) {
  FirmwareInstall invalid(Offer(), true);
  invalid.HeaderRead(true, "1.3.0");
  invalid.Downloaded(TransferEnd::kComplete, "", 100, 100);
  invalid.Verified(true, kSha);
  EXPECT_EQ(invalid.Finished(FinishEnd::kInvalid, "ESP_ERR_OTA_VALIDATE_FAILED"), Step::kFailed);
  EXPECT_EQ(invalid.error(), "ESP-IDF refused the image: it is corrupt or not signed for this device");

  FirmwareInstall other(Offer(), true);
  other.HeaderRead(true, "1.3.0");
  other.Downloaded(TransferEnd::kComplete, "", 100, 100);
  other.Verified(true, kSha);
  EXPECT_EQ(other.Finished(FinishEnd::kFailed, "ESP_ERR_FLASH_OP_FAIL"), Step::kFailed);
  EXPECT_EQ(other.error(), "could not finish the install: ESP_ERR_FLASH_OP_FAIL");
}

TEST(FirmwareInstall, StepsOutOfOrderNeverReachFinish) {
  FirmwareInstall skipped(Offer(), true);
  EXPECT_EQ(skipped.Verified(true, kSha), Step::kAbort) << "no digest check before the transfer";
  FirmwareInstall early(Offer(), true);
  EXPECT_EQ(early.Downloaded(TransferEnd::kComplete, "", 100, 100), Step::kAbort) << "the header comes first";
}

// The host's images have no ESP header: the host download starts at kDownload
// and follows the same steps (its "finish" is the rename into the slot file).
TEST(FirmwareInstall, WithoutAHeaderTheStepsStartAtTheDownload) {
  FirmwareOffer offer = Offer();
  offer.sha256.clear();
  offer.size = -1;
  FirmwareInstall install(offer, false);
  EXPECT_EQ(install.step(), Step::kDownload);
  EXPECT_EQ(install.Downloaded(TransferEnd::kComplete, "", -1, 5), Step::kVerify);
  EXPECT_EQ(install.Verified(true, kOtherSha), Step::kFinish) << "no digest offered: any digest passes";
}
