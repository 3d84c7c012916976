// The portable update decisions: semantic versions, the OTA answer's
// firmware offer, whether to install it, download verification, progress
// throttling, and keeping or rolling back a new image after the reboot.
#include <gtest/gtest.h>

#include <string>

#include "cJSON.h"
#include "voxgate/firmware_update.h"
#include "voxgate/ota_config.h"

using namespace voxgate;

namespace {

int Cmp(const char* a, const char* b) {
  SemVer x, y;
  EXPECT_TRUE(ParseSemVer(a, &x)) << a;
  EXPECT_TRUE(ParseSemVer(b, &y)) << b;
  return CompareSemVer(x, y);
}

FirmwareOffer Offer(const std::string& version, bool force = false) {
  FirmwareOffer offer;
  offer.version = version;
  offer.url = "http://gw/firmware/fw.bin";
  offer.force = force;
  return offer;
}

std::string Print(cJSON* item) {
  char* text = cJSON_PrintUnformatted(item);
  std::string out = text;
  cJSON_free(text);
  cJSON_Delete(item);
  return out;
}

const char kSha[] = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

}  // namespace

TEST(SemVer, ParsesCommonFirmwareSpellings) {
  SemVer v;
  ASSERT_TRUE(ParseSemVer("1.2.3", &v));
  EXPECT_EQ(v.major, 1u);
  EXPECT_EQ(v.minor, 2u);
  EXPECT_EQ(v.patch, 3u);
  ASSERT_TRUE(ParseSemVer("v2.0.1-rc.1+build.7", &v));
  EXPECT_EQ(v.major, 2u);
  EXPECT_EQ(v.prerelease, "rc.1");
  ASSERT_TRUE(ParseSemVer("1.7", &v));
  EXPECT_EQ(v.patch, 0u);
  for (const char* bad : {"", "v", "1..2", "1.2.3.4", "a.b.c", "1.2.x", "01.2.3", "1.2.3-", "1.2.3+", "1.2.3-a..b",
                          "99999999999.0.0", "1.2.3-ü"}) {
    EXPECT_FALSE(ParseSemVer(bad, &v)) << bad;
  }
}

TEST(SemVer, ComparesByPrecedenceNotText) {
  EXPECT_LT(Cmp("1.9.0", "1.10.0"), 0);  // a text comparison would say the opposite
  EXPECT_GT(Cmp("2.0.0", "1.99.99"), 0);
  EXPECT_EQ(Cmp("1.2", "1.2.0"), 0);
  EXPECT_EQ(Cmp("v1.2.3", "1.2.3+other.build"), 0);
  EXPECT_LT(Cmp("1.0.0-rc.1", "1.0.0"), 0);
  // semver.org 11.4: 1.0.0-alpha < -alpha.1 < -alpha.beta < -beta < -beta.2 < -beta.11 < -rc.1 < 1.0.0
  const char* chain[] = {"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
                         "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"};
  for (size_t i = 0; i + 1 < sizeof chain / sizeof chain[0]; ++i) {
    EXPECT_LT(Cmp(chain[i], chain[i + 1]), 0) << chain[i] << " < " << chain[i + 1];
    EXPECT_GT(Cmp(chain[i + 1], chain[i]), 0);
  }
}

TEST(FirmwareOffer, ReadFromTheOtaAnswer) {
  LinkConfig link;
  ASSERT_TRUE(ParseOtaResponse(std::string(R"({"websocket":{"url":"ws://gw/","token":""},)") +
                                   R"("firmware":{"version":"1.3.0","url":"http://gw/firmware/a.bin","size":1234,)" +
                                   R"("sha256":")" + "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08" +
                                   R"("}})",
                               &link));
  ASSERT_TRUE(link.has_firmware);
  EXPECT_EQ(link.firmware.version, "1.3.0");
  EXPECT_EQ(link.firmware.url, "http://gw/firmware/a.bin");
  EXPECT_EQ(link.firmware.size, 1234);
  EXPECT_EQ(link.firmware.sha256, kSha);  // normalised to lowercase
  EXPECT_FALSE(link.firmware.force);

  // The reference server's answer: force as a number, no size or digest, an empty URL meaning "none".
  ASSERT_TRUE(ParseOtaResponse(R"({"websocket":{"url":"ws://gw/"},"firmware":{"version":"2.0.0","url":"u","force":1}})", &link));
  EXPECT_TRUE(link.firmware.force);
  EXPECT_EQ(link.firmware.size, -1);
  EXPECT_EQ(link.firmware.sha256, "");
  ASSERT_TRUE(ParseOtaResponse(R"({"websocket":{"url":"ws://gw/"},"firmware":{"version":"0.0.0","url":""}})", &link));
  EXPECT_FALSE(link.has_firmware);
  ASSERT_TRUE(ParseOtaResponse(R"({"websocket":{"url":"ws://gw/"},"firmware":{"version":1,"url":"u","sha256":"zz"}})", &link));
  EXPECT_FALSE(link.has_firmware);
}

TEST(DecideUpdate, InstallsOnlyANewerVersion) {
  EXPECT_TRUE(DecideUpdate("1.2.3", Offer("1.2.4")).update);
  EXPECT_TRUE(DecideUpdate("1.9.0", Offer("1.10.0")).update);
  EXPECT_TRUE(DecideUpdate("1.0.0-rc.2", Offer("1.0.0")).update);
  EXPECT_FALSE(DecideUpdate("1.2.3", Offer("1.2.3")).update);
  EXPECT_FALSE(DecideUpdate("1.2.3", Offer("v1.2.3+rebuilt")).update);
  EXPECT_FALSE(DecideUpdate("1.10.0", Offer("1.9.0")).update);
  EXPECT_FALSE(DecideUpdate("1.0.0", Offer("garbage")).update);
  FirmwareOffer none = Offer("9.9.9");
  none.url.clear();
  EXPECT_FALSE(DecideUpdate("1.0.0", none).update);
  // A development build ("a1b2c3-dirty") is never replaced unless the server insists.
  EXPECT_FALSE(DecideUpdate("a1b2c3-dirty", Offer("1.0.0")).update);
  EXPECT_TRUE(DecideUpdate("a1b2c3-dirty", Offer("1.0.0", true)).update);
}

TEST(DecideUpdate, ForceAllowsADowngradeButNeverAReinstallLoop) {
  EXPECT_TRUE(DecideUpdate("2.0.0", Offer("1.5.0", true)).update);
  EXPECT_FALSE(DecideUpdate("1.5.0", Offer("1.5.0", true)).update);
}

TEST(DecideUpdate, DoesNotRetryAVersionThatWasRolledBack) {
  const UpdateDecision d = DecideUpdate("1.0.0", Offer("1.1.0"), "1.1.0");
  EXPECT_FALSE(d.update);
  EXPECT_NE(d.reason.find("rolled back"), std::string::npos);
  EXPECT_TRUE(DecideUpdate("1.0.0", Offer("1.1.1"), "1.1.0").update);
  EXPECT_TRUE(DecideUpdate("1.0.0", Offer("1.1.0", true), "1.1.0").update);
}

TEST(VerifyDownload, ChecksLengthSizeAndDigest) {
  FirmwareOffer offer = Offer("1.1.0");
  EXPECT_EQ(VerifyDownload(offer, -1, 100, kSha), "");  // nothing announced: nothing to hold it to
  EXPECT_NE(VerifyDownload(offer, -1, 0, kSha), "");
  EXPECT_NE(VerifyDownload(offer, 200, 100, kSha).find("received 100 of 200"), std::string::npos);
  offer.size = 101;
  EXPECT_NE(VerifyDownload(offer, 100, 100, kSha).find("size"), std::string::npos);
  offer.size = 100;
  offer.sha256 = kSha;
  EXPECT_EQ(VerifyDownload(offer, 100, 100, kSha), "");
  std::string other = kSha;
  other[0] = '0';
  EXPECT_EQ(VerifyDownload(offer, 100, 100, other), "sha256 mismatch");
  EXPECT_FALSE(Sha256Matches("", kSha));
  const uint8_t bytes[] = {0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(HexLower(bytes, sizeof bytes), "000fa0ff");
}

TEST(FirmwareProgress, ParamsForTheNotification) {
  EXPECT_EQ(Print(FirmwareProgressParams({"downloading", "1.1.0", 512, 2048, ""})),
            R"({"state":"downloading","version":"1.1.0","bytes":512,"total":2048,"percent":25})");
  EXPECT_EQ(Print(FirmwareProgressParams({"failed", "1.1.0", -1, -1, "sha256 mismatch"})),
            R"({"state":"failed","version":"1.1.0","error":"sha256 mismatch"})");
}

TEST(ProgressThrottle, OnePerStepAndTheEnd) {
  ProgressThrottle throttle(10);
  int due = 0;
  for (int64_t bytes = 1; bytes <= 1000; ++bytes) due += throttle.Due(bytes, 1000, 0) ? 1 : 0;
  EXPECT_EQ(due, 11);  // 0%, 10%, ... 90%, 100%
  ProgressThrottle unknown(10, 1000);
  EXPECT_TRUE(unknown.Due(10, -1, 0));
  EXPECT_FALSE(unknown.Due(20, -1, 999));
  EXPECT_TRUE(unknown.Due(30, -1, 1000));
}

TEST(BootConfirmation, KeepsTheImageOnceInitializeWasAnswered) {
  BootConfirmation boot(true, 1000, 60000);
  EXPECT_EQ(boot.Poll(2000), BootConfirmation::Verdict::kNone);
  boot.OnMcpHandled(R"({"jsonrpc":"2.0","method":"tools/list","id":1})");
  boot.OnMcpHandled(R"({"jsonrpc":"2.0","method":"initialize"})");  // a notification is no answer
  EXPECT_EQ(boot.Poll(3000), BootConfirmation::Verdict::kNone);
  boot.OnMcpHandled(R"({"jsonrpc":"2.0","method":"initialize","id":1,"params":{}})");
  EXPECT_EQ(boot.Poll(4000), BootConfirmation::Verdict::kMarkValid);
  EXPECT_EQ(boot.Poll(99999999), BootConfirmation::Verdict::kNone);  // once
  EXPECT_FALSE(boot.pending());
}

TEST(BootConfirmation, RollsBackWhenTheGatewayIsNeverReached) {
  BootConfirmation boot(true, 1000, 60000);
  EXPECT_EQ(boot.Poll(60999), BootConfirmation::Verdict::kNone);
  EXPECT_EQ(boot.Poll(61000), BootConfirmation::Verdict::kRollBack);
  boot.OnMcpHandled(R"({"method":"initialize","id":"a"})");  // too late
  EXPECT_EQ(boot.Poll(62000), BootConfirmation::Verdict::kNone);
}

TEST(BootConfirmation, NothingToDoForAConfirmedImage) {
  BootConfirmation boot(false, 0, 1);
  boot.OnMcpHandled(R"({"method":"initialize","id":1})");
  EXPECT_EQ(boot.Poll(1000), BootConfirmation::Verdict::kNone);
}
