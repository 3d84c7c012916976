#include "voxgate/firmware_update.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cJSON.h"

namespace voxgate {
namespace {

bool ParseNumber(const std::string& text, uint32_t* out) {
  if (text.empty() || text.size() > 9) return false;  // fits uint32_t without overflow checks
  if (text.size() > 1 && text[0] == '0') return false;  // semver forbids leading zeros
  uint32_t value = 0;
  for (char c : text) {
    if (!isdigit(static_cast<unsigned char>(c))) return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  *out = value;
  return true;
}

bool ValidIdentifiers(const std::string& text) {
  if (text.empty()) return false;
  size_t start = 0;
  for (;;) {
    const size_t dot = text.find('.', start);
    const std::string part = text.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) return false;
    for (char c : part) {
      if (!isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

bool AllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Semver rule 11.4: numeric identifiers compare numerically and sort before
// alphanumeric ones; a longer list wins when all shared ones are equal.
int ComparePrerelease(const std::string& a, const std::string& b) {
  if (a == b) return 0;
  if (a.empty()) return 1;  // a release outranks its pre-releases
  if (b.empty()) return -1;
  const std::vector<std::string> x = Split(a, '.');
  const std::vector<std::string> y = Split(b, '.');
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    const bool xn = AllDigits(x[i]);
    const bool yn = AllDigits(y[i]);
    if (xn && yn) {
      if (x[i].size() != y[i].size()) return x[i].size() < y[i].size() ? -1 : 1;
      const int c = x[i].compare(y[i]);
      if (c != 0) return c < 0 ? -1 : 1;
    } else if (xn != yn) {
      return xn ? -1 : 1;
    } else {
      const int c = x[i].compare(y[i]);
      if (c != 0) return c < 0 ? -1 : 1;
    }
  }
  if (x.size() == y.size()) return 0;
  return x.size() < y.size() ? -1 : 1;
}

bool IsHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool ParseSemVer(const std::string& input, SemVer* out) {
  std::string text = input;
  if (!text.empty() && (text[0] == 'v' || text[0] == 'V')) text.erase(0, 1);
  const size_t plus = text.find('+');
  if (plus != std::string::npos) {
    if (!ValidIdentifiers(text.substr(plus + 1))) return false;
    text.erase(plus);
  }
  SemVer v;
  const size_t dash = text.find('-');
  if (dash != std::string::npos) {
    v.prerelease = text.substr(dash + 1);
    if (!ValidIdentifiers(v.prerelease)) return false;
    text.erase(dash);
  }
  const std::vector<std::string> core = Split(text, '.');
  if (core.empty() || core.size() > 3) return false;
  uint32_t* fields[3] = {&v.major, &v.minor, &v.patch};
  for (size_t i = 0; i < core.size(); ++i) {
    if (!ParseNumber(core[i], fields[i])) return false;
  }
  *out = v;
  return true;
}

bool IsNumericVersion(const std::string& text) {
  const std::vector<std::string> parts = Split(text, '.');
  uint32_t value = 0;
  if (parts.size() != 3) return false;
  for (const std::string& part : parts) {
    if (!ParseNumber(part, &value)) return false;  // digits, no leading zero, at most 9: fits an int
  }
  return true;
}

int CompareSemVer(const SemVer& a, const SemVer& b) {
  if (a.major != b.major) return a.major < b.major ? -1 : 1;
  if (a.minor != b.minor) return a.minor < b.minor ? -1 : 1;
  if (a.patch != b.patch) return a.patch < b.patch ? -1 : 1;
  return ComparePrerelease(a.prerelease, b.prerelease);
}

bool ReadFirmwareOffer(const cJSON* root, FirmwareOffer* offer) {
  const cJSON* fw = cJSON_GetObjectItemCaseSensitive(root, "firmware");
  if (!cJSON_IsObject(fw)) return false;
  const cJSON* version = cJSON_GetObjectItemCaseSensitive(fw, "version");
  const cJSON* url = cJSON_GetObjectItemCaseSensitive(fw, "url");
  if (!cJSON_IsString(version) || !cJSON_IsString(url) || url->valuestring[0] == '\0') return false;
  FirmwareOffer out;
  out.version = version->valuestring;
  out.url = url->valuestring;
  // The reference server sends force as 0/1; accept a boolean too.
  const cJSON* force = cJSON_GetObjectItemCaseSensitive(fw, "force");
  out.force = cJSON_IsTrue(force) || (cJSON_IsNumber(force) && force->valuedouble != 0);
  const cJSON* size = cJSON_GetObjectItemCaseSensitive(fw, "size");
  if (cJSON_IsNumber(size) && size->valuedouble >= 0 && size->valuedouble < 1e15) {
    out.size = static_cast<int64_t>(size->valuedouble);
  }
  const cJSON* sha = cJSON_GetObjectItemCaseSensitive(fw, "sha256");
  if (cJSON_IsString(sha) && IsHex64(sha->valuestring)) out.sha256 = Lower(sha->valuestring);
  *offer = out;
  return true;
}

UpdateDecision DecideUpdate(const std::string& running_version, const FirmwareOffer& offer,
                            const std::string& rejected_version) {
  if (offer.url.empty()) return {false, "no firmware offered"};
  SemVer offered, running;
  if (!ParseSemVer(offer.version, &offered)) return {false, "offered version \"" + offer.version + "\" is not semantic"};
  const bool running_ok = ParseSemVer(running_version, &running);
  if (running_ok && CompareSemVer(offered, running) == 0) return {false, "already running " + running_version};
  if (offer.force) return {true, "forced by the server"};
  if (!running_ok) return {false, "running version \"" + running_version + "\" is not semantic"};
  if (CompareSemVer(offered, running) < 0) return {false, "offered " + offer.version + " is older"};
  SemVer rejected;
  if (!rejected_version.empty() && ParseSemVer(rejected_version, &rejected) && CompareSemVer(offered, rejected) == 0) {
    return {false, offer.version + " was rolled back before"};
  }
  return {true, offer.version + " is newer than " + running_version};
}

bool Sha256Matches(const std::string& hex, const std::string& expected) {
  return IsHex64(hex) && IsHex64(expected) && Lower(hex) == Lower(expected);
}

std::string HexLower(const uint8_t* bytes, size_t length) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(length * 2);
  for (size_t i = 0; i < length; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 0x0f];
  }
  return out;
}

std::string VerifyTransfer(const FirmwareOffer& offer, int64_t announced_length, int64_t received) {
  if (received <= 0) return "empty image";
  if (announced_length >= 0 && announced_length != received) {
    return "received " + std::to_string(received) + " of " + std::to_string(announced_length) + " bytes";
  }
  if (offer.size >= 0 && offer.size != received) {
    return "size " + std::to_string(received) + " differs from the offered " + std::to_string(offer.size);
  }
  return "";
}

std::string VerifyDownload(const FirmwareOffer& offer, int64_t announced_length, int64_t received,
                           const std::string& sha256_hex) {
  const std::string why = VerifyTransfer(offer, announced_length, received);
  if (!why.empty()) return why;
  if (!offer.sha256.empty() && !Sha256Matches(sha256_hex, offer.sha256)) return "sha256 mismatch";
  return "";
}

cJSON* FirmwareProgressParams(const FirmwareProgress& p) {
  cJSON* params = cJSON_CreateObject();
  cJSON_AddStringToObject(params, "state", p.state.c_str());
  cJSON_AddStringToObject(params, "version", p.version.c_str());
  if (p.bytes >= 0) cJSON_AddNumberToObject(params, "bytes", static_cast<double>(p.bytes));
  if (p.total >= 0) cJSON_AddNumberToObject(params, "total", static_cast<double>(p.total));
  if (p.bytes >= 0 && p.total > 0) {
    cJSON_AddNumberToObject(params, "percent", static_cast<double>(p.bytes * 100 / p.total));
  }
  if (!p.error.empty()) cJSON_AddStringToObject(params, "error", p.error.c_str());
  return params;
}

bool ProgressThrottle::Due(int64_t bytes, int64_t total, uint64_t now_ms) {
  if (total > 0) {
    const int percent = static_cast<int>(bytes * 100 / total);
    const int bucket = percent >= 100 ? 100 : percent / step_ * step_;
    if (any_ && bucket <= last_percent_) return false;
    last_percent_ = bucket;
  } else if (any_ && now_ms - last_ms_ < interval_ms_) {
    return false;
  }
  any_ = true;
  last_ms_ = now_ms;
  return true;
}

BootConfirmation::BootConfirmation(bool pending_verify, uint64_t boot_ms, uint64_t deadline_ms)
    : pending_(pending_verify), deadline_at_ms_(boot_ms + deadline_ms) {}

void BootConfirmation::OnMcpHandled(const std::string& payload) {
  if (!initialized_ && IsInitializeRequest(payload)) initialized_ = true;
}

BootConfirmation::Verdict BootConfirmation::Poll(uint64_t now_ms) {
  if (!pending_) return Verdict::kNone;
  if (initialized_) {
    pending_ = false;
    return Verdict::kMarkValid;
  }
  if (now_ms >= deadline_at_ms_) {
    pending_ = false;
    return Verdict::kRollBack;
  }
  return Verdict::kNone;
}

bool BootConfirmation::IsInitializeRequest(const std::string& payload) {
  cJSON* root = cJSON_ParseWithLength(payload.data(), payload.size());
  const cJSON* method = cJSON_GetObjectItemCaseSensitive(root, "method");
  const cJSON* id = cJSON_GetObjectItemCaseSensitive(root, "id");
  const bool yes = cJSON_IsString(method) && strcmp(method->valuestring, "initialize") == 0 &&
                   (cJSON_IsString(id) || cJSON_IsNumber(id));
  cJSON_Delete(root);
  return yes;
}

}  // namespace voxgate
