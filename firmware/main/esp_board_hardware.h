// ESP only: BoardHardware on ESP-IDF drivers. LED on a GPIO, backlight on
// LEDC PWM, volume kept in NVS, RSSI from the Wi-Fi driver.
#pragma once

#include "board_hardware.h"
#include "nvs_settings.h"

class EspBoardHardware : public BoardHardware {
 public:
  EspBoardHardware(NvsSettings& settings, int led_gpio, int backlight_gpio, bool backlight_inverted);
  void Init();

  uint32_t FreeHeapBytes() override;
  uint32_t MinFreeHeapBytes() override;
  uint64_t UptimeMs() override;
  bool WifiRssi(int* rssi_dbm) override;
  int Volume() override { return volume_; }
  bool SetVolume(int percent) override;
  int Brightness() override { return brightness_; }
  bool SetBrightness(int percent) override;
  bool LedOn() override { return led_on_; }
  bool SetLed(bool on) override;
  void ScheduleReboot(uint32_t delay_ms) override;

 private:
  NvsSettings& settings_;
  const int led_gpio_;
  const int backlight_gpio_;
  const bool backlight_inverted_;
  int volume_ = 60;
  int brightness_ = 80;
  bool led_on_ = false;
};
