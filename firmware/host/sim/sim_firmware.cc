#include "sim_firmware.h"

#include <sys/stat.h>

#include <chrono>

#include "cJSON.h"
#include "event_log.h"
#include "firmware_download.h"
#include "sim_device.h"
#include "voxgate/protocol.h"

namespace sim {

// --- HostSlots ---

HostSlots::HostSlots(std::string dir, std::string factory_version)
    : dir_(std::move(dir)), store_(dir_ + "/otadata.json") {
  versions_[0] = std::move(factory_version);
}

std::string HostSlots::SlotPath(int slot) const { return dir_ + "/ota_" + std::to_string(slot) + ".bin"; }

bool HostSlots::Load() {
  if (mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) return false;
  std::string blob;
  if (!store_.Load(&blob)) return Save();  // first boot: the factory image in slot 0
  cJSON* root = cJSON_ParseWithLength(blob.data(), blob.size());
  const cJSON* boot = cJSON_GetObjectItemCaseSensitive(root, "boot");
  const cJSON* versions = cJSON_GetObjectItemCaseSensitive(root, "versions");
  const bool ok = cJSON_IsNumber(boot) && (boot->valueint == 0 || boot->valueint == 1) && cJSON_IsArray(versions) &&
                  cJSON_GetArraySize(versions) == 2;
  if (ok) {
    boot_ = boot->valueint;
    for (int i = 0; i < 2; ++i) {
      const cJSON* v = cJSON_GetArrayItem(versions, i);
      versions_[i] = cJSON_IsString(v) ? v->valuestring : "";
    }
    const cJSON* recorded = cJSON_GetObjectItemCaseSensitive(root, "recorded");
    for (int i = 0; i < 2; ++i) {
      const cJSON* r = cJSON_IsArray(recorded) ? cJSON_GetArrayItem(recorded, i) : nullptr;
      recorded_[i] = r != nullptr ? cJSON_IsTrue(r) : i == 1 && !versions_[1].empty();
    }
    pending_ = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "pending_verify"));
    const cJSON* rejected = cJSON_GetObjectItemCaseSensitive(root, "rejected");
    rejected_ = cJSON_IsString(rejected) ? rejected->valuestring : "";
    rollback_reported_ = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "rollback_reported"));
  }
  cJSON_Delete(root);
  return ok;
}

bool HostSlots::Save() {
  cJSON* root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "boot", boot_);
  cJSON* versions = cJSON_AddArrayToObject(root, "versions");
  for (const std::string& v : versions_) cJSON_AddItemToArray(versions, cJSON_CreateString(v.c_str()));
  cJSON* recorded = cJSON_AddArrayToObject(root, "recorded");
  for (bool r : recorded_) cJSON_AddItemToArray(recorded, cJSON_CreateBool(r));
  cJSON_AddBoolToObject(root, "pending_verify", pending_);
  cJSON_AddStringToObject(root, "rejected", rejected_.c_str());
  cJSON_AddBoolToObject(root, "rollback_reported", rollback_reported_);
  char* text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  const bool saved = text != nullptr && store_.Save(text);  // written to a temporary file, then renamed
  cJSON_free(text);
  return saved;
}

bool HostSlots::Install(int slot, const std::string& version) {
  versions_[slot] = version;
  recorded_[slot] = true;
  boot_ = slot;
  pending_ = true;
  return Save();
}

bool HostSlots::MarkValid() {
  pending_ = false;
  return Save();
}

bool HostSlots::RollBack() {
  if (!recorded_[1 - boot_]) return false;
  rejected_ = versions_[boot_];
  rollback_reported_ = false;
  boot_ = 1 - boot_;
  pending_ = false;
  return Save();
}

bool HostSlots::Restart() {
  if (!pending_) return true;
  rejected_ = versions_[boot_];
  rollback_reported_ = false;
  recorded_[boot_] = false;  // aborted: no longer a valid boot record
  boot_ = recorded_[1 - boot_] ? 1 - boot_ : 0;
  pending_ = false;
  return Save();
}

bool HostSlots::MarkRollbackReported() {
  rollback_reported_ = true;
  return Save();
}

// --- FirmwareBoot ---

FirmwareBoot::FirmwareBoot(FirmwareBootOptions options, HostSlots* slots)
    : options_(std::move(options)),
      slots_(slots),
      confirmation_(slots->pending_verify(), voxgate::MonotonicMs(), options_.confirm_deadline_ms) {}

FirmwareBoot::~FirmwareBoot() { Stop(); }

void FirmwareBoot::OnMcpHandled(const std::string& payload) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    confirmation_.OnMcpHandled(payload);
  }
  cv_.notify_all();
}

void FirmwareBoot::Start(SimDevice* device) {
  device_ = device;
  thread_ = std::thread([this] { Run(); });
}

void FirmwareBoot::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FirmwareBoot::Run() {
  cJSON* f = cJSON_CreateObject();
  cJSON_AddStringToObject(f, "state", "booted");
  cJSON_AddStringToObject(f, "version", slots_->running_version().c_str());
  cJSON_AddBoolToObject(f, "pending_verify", slots_->pending_verify());
  Emit("firmware", options_.device_id, f);
  if (slots_->pending_verify()) {
    Confirm();
    if (reboot_) return;
  }
  if (slots_->rollback_unreported() && WaitInitialized()) {
    Report({"rolled_back", slots_->rejected_version(), -1, -1, "the new image did not reach the gateway"});
    slots_->MarkRollbackReported();
  }
  Update();
}

void FirmwareBoot::Confirm() {
  for (;;) {
    voxgate::BootConfirmation::Verdict verdict;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      verdict = confirmation_.Poll(voxgate::MonotonicMs());
      if (verdict == voxgate::BootConfirmation::Verdict::kNone) {
        if (stop_) return;
        // Woken by an MCP message or Stop; the timeout only re-checks the deadline.
        cv_.wait_for(lock, std::chrono::milliseconds(100));
        continue;
      }
    }
    if (verdict == voxgate::BootConfirmation::Verdict::kMarkValid) {
      slots_->MarkValid();
      Report({"confirmed", slots_->running_version(), -1, -1, ""});
    } else {
      const std::string version = slots_->running_version();
      // As the device: the rollback call, and a restart when it returns.
      const bool rolled_back = slots_->RollBack();
      if (!rolled_back) slots_->Restart();
      cJSON* f = cJSON_CreateObject();
      cJSON_AddStringToObject(f, "state", "rolling_back");
      cJSON_AddStringToObject(f, "version", version.c_str());
      if (!rolled_back) {
        cJSON_AddStringToObject(f, "reason", "rollback not possible: restarting, the bootloader drops it");
      }
      Emit("firmware", options_.device_id, f);
      reboot_ = true;
    }
    return;
  }
}

void FirmwareBoot::Update() {
  const voxgate::LinkConfig& link = options_.link;
  if (!link.has_firmware) return;
  const voxgate::UpdateDecision decision =
      voxgate::DecideUpdate(slots_->running_version(), link.firmware, slots_->rejected_version());
  cJSON* f = cJSON_CreateObject();
  cJSON_AddStringToObject(f, "state", "checked");
  cJSON_AddStringToObject(f, "offered", link.firmware.version.c_str());
  cJSON_AddBoolToObject(f, "update", decision.update);
  cJSON_AddStringToObject(f, "reason", decision.reason.c_str());
  Emit("firmware", options_.device_id, f);
  // Download once the gateway knows the device, so it sees the progress.
  if (!decision.update || !WaitInitialized()) return;

  const std::string& version = link.firmware.version;
  voxgate::ProgressThrottle throttle;
  voxgate::DownloadOptions download;
  download.on_progress = [&](int64_t bytes, int64_t total) {
    if (throttle.Due(bytes, total, voxgate::MonotonicMs())) Report({"downloading", version, bytes, total, ""});
  };
  const int slot = slots_->inactive_slot();
  const voxgate::DownloadResult result = voxgate::DownloadFirmware(link.firmware, slots_->SlotPath(slot), download);
  if (!result.ok) {
    Report({"failed", version, result.bytes, -1, result.error});
    return;
  }
  if (!slots_->Install(slot, version)) {
    Report({"failed", version, result.bytes, -1, "could not switch slots"});
    return;
  }
  Report({"installed", version, result.bytes, result.bytes, ""});
  reboot_ = true;
}

bool FirmwareBoot::WaitInitialized() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return stop_ || confirmation_.initialized(); });
  return !stop_;
}

void FirmwareBoot::Report(const voxgate::FirmwareProgress& progress) {
  Emit("firmware", options_.device_id, voxgate::FirmwareProgressParams(progress));
  if (device_ != nullptr) device_->Notify(voxgate::kFirmwareUpdateMethod, voxgate::FirmwareProgressParams(progress));
}

}  // namespace sim
