// What the board tools need from the hardware. The device implements it with
// ESP-IDF drivers (esp_board_hardware.cc); the host simulator with fakes.
#pragma once

#include <cstdint>

class BoardHardware {
 public:
  virtual ~BoardHardware() = default;

  virtual uint32_t FreeHeapBytes() = 0;
  virtual uint32_t MinFreeHeapBytes() = 0;
  virtual uint64_t UptimeMs() = 0;
  // False when Wi-Fi is not associated.
  virtual bool WifiRssi(int* rssi_dbm) = 0;

  virtual int Volume() = 0;                  // 0-100
  virtual bool SetVolume(int percent) = 0;   // persisted (NVS on the device)
  virtual int Brightness() = 0;              // 0-100
  virtual bool SetBrightness(int percent) = 0;
  virtual bool LedOn() = 0;
  virtual bool SetLed(bool on) = 0;

  // Restarts soon, after the tool's reply has gone out.
  virtual void ScheduleReboot(uint32_t delay_ms) = 0;
};
