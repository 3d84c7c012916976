// firmware/version.txt is the firmware's version: the IDF build sets
// PROJECT_VER from it (esp_app_desc_t.version, sent in every OTA request) and
// the simulator starts from it. It must be one every device can parse: the
// xiaozhi firmware converts each dot-separated part with std::stoi, built
// without exceptions, so a "v" or a pre-release tag would abort it.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "voxgate/firmware_update.h"

using voxgate::IsNumericVersion;

TEST(FirmwareVersion, TheVersionFileHoldsANumericSemanticVersion) {
  std::ifstream file(VOXGATE_VERSION_FILE);
  ASSERT_TRUE(file.good()) << VOXGATE_VERSION_FILE;
  std::string line;
  std::getline(file, line);
  EXPECT_TRUE(IsNumericVersion(line)) << "firmware/version.txt: \"" << line << "\"";
  voxgate::SemVer version;
  EXPECT_TRUE(voxgate::ParseSemVer(line, &version));
  EXPECT_EQ(line, VOXGATE_FIRMWARE_VERSION) << "the build read the same file";
  std::string rest;
  while (std::getline(file, rest)) EXPECT_EQ(rest, "") << "one line only";
}

TEST(FirmwareVersion, NumericMeansWhatStoiCanReadPerPart) {
  for (const char* ok : {"0.1.0", "1.0.0", "10.20.30", "999999999.0.1"}) EXPECT_TRUE(IsNumericVersion(ok)) << ok;
  for (const char* bad : {"v1.0.0", "1.0.0-beta.rc", "1.0.0+build", "1.2", "1.2.3.4", "01.2.3", "1..3", "", "1.0.x",
                          "9999999999.0.0", " 1.0.0", "d9f062f"}) {
    EXPECT_FALSE(IsNumericVersion(bad)) << bad;
  }
}
