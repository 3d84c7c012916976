// The simulator's hardware: the same BoardHardware the device implements,
// kept in memory.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>

#include "board_hardware.h"

namespace sim {

class FakeBoard : public BoardHardware {
 public:
  explicit FakeBoard(std::function<void()> on_reboot = nullptr) : on_reboot_(std::move(on_reboot)) {}

  uint32_t FreeHeapBytes() override { return 182000; }
  uint32_t MinFreeHeapBytes() override { return 161000; }
  uint64_t UptimeMs() override {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - boot_).count());
  }
  bool WifiRssi(int* rssi) override {
    *rssi = -55;
    return true;
  }
  int Volume() override { return volume_; }
  bool SetVolume(int percent) override {
    volume_ = percent;
    return true;
  }
  int Brightness() override { return brightness_; }
  bool SetBrightness(int percent) override {
    brightness_ = percent;
    return true;
  }
  bool LedOn() override { return led_; }
  bool SetLed(bool on) override {
    led_ = on;
    return true;
  }
  void ScheduleReboot(uint32_t) override {
    if (on_reboot_) on_reboot_();
  }

 private:
  const std::chrono::steady_clock::time_point boot_ = std::chrono::steady_clock::now();
  std::atomic<int> volume_{60};
  std::atomic<int> brightness_{80};
  std::atomic<bool> led_{false};
  std::function<void()> on_reboot_;
};

}  // namespace sim
