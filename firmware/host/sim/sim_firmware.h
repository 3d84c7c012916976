// The simulator's firmware update, the host run of what the device does with
// esp_https_ota and esp_ota_ops: check the OTA answer's offer, download the
// image into the other slot (verified: size + SHA-256), boot it, keep it only
// once it has answered the gateway's `initialize`, else roll back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "voxgate/firmware_update.h"
#include "voxgate/ota_config.h"

namespace sim {

class SimDevice;

// Stand-in for the two app slots and the otadata partition: <dir>/ota_0.bin,
// <dir>/ota_1.bin (slot 0 holds the factory image, which has no file here)
// and <dir>/otadata.json (which slot boots, each slot's version, whether the
// running image is pending verification, the version last rolled back).
class HostSlots {
 public:
  HostSlots(std::string dir, std::string factory_version);

  // Reads otadata.json, or starts from the factory image. False if unusable.
  bool Load();

  const std::string& running_version() const { return versions_[boot_]; }
  bool pending_verify() const { return pending_; }
  const std::string& rejected_version() const { return rejected_; }
  bool rollback_unreported() const { return !rejected_.empty() && !rollback_reported_; }
  int inactive_slot() const { return 1 - boot_; }
  std::string SlotPath(int slot) const;

  bool Install(int slot, const std::string& version);  // boots `slot` next, pending verification
  bool MarkValid();
  // As esp_ota_mark_app_invalid_rollback: boots the previous slot again and
  // remembers the rejected version; false, changing nothing, when the previous
  // slot has no boot record (the first update after a USB flash: the factory
  // image in slot 0 was flashed, not installed), i.e. "rollback not possible".
  bool RollBack();
  // As the bootloader after a restart: a still-pending image is aborted (and
  // remembered as rejected); with no other boot record it boots slot 0.
  bool Restart();
  bool MarkRollbackReported();

 private:
  bool Save();

  std::string dir_;
  voxgate::FileConfigStore store_;
  int boot_ = 0;
  std::string versions_[2];
  bool recorded_[2] = {false, false};  // the slot has a boot record (it was installed over the air)
  bool pending_ = false;
  std::string rejected_;
  bool rollback_reported_ = true;
};

struct FirmwareBootOptions {
  std::string device_id;
  voxgate::LinkConfig link;  // the OTA answer of this boot (its firmware offer)
  uint64_t confirm_deadline_ms = voxgate::kDefaultConfirmDeadlineMs;
};

// One boot of one device, on its own thread: confirm or roll back a new
// image; report a rollback; or download and install a newer image. Asks for
// a reboot (reboot_requested) when the slots changed.
class FirmwareBoot {
 public:
  FirmwareBoot(FirmwareBootOptions options, HostSlots* slots);
  ~FirmwareBoot();

  // From the device's link thread, after its MCP server handled `payload`.
  void OnMcpHandled(const std::string& payload);
  // `device` may be null (an image that never brings its link up).
  void Start(SimDevice* device);
  void Stop();
  bool reboot_requested() const { return reboot_; }

 private:
  void Run();
  void Confirm();
  void Update();
  bool WaitInitialized();  // false when stopped first
  void Report(const voxgate::FirmwareProgress& progress);

  FirmwareBootOptions options_;
  HostSlots* slots_;
  SimDevice* device_ = nullptr;
  voxgate::BootConfirmation confirmation_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> reboot_{false};
  std::thread thread_;
};

}  // namespace sim
