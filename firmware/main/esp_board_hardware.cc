#include "esp_board_hardware.h"

#include "driver/gpio.h"
#include "driver/ledc.h"
#include "esp_heap_caps.h"
#include "esp_system.h"
#include "esp_timer.h"
#include "esp_wifi.h"

namespace {

constexpr ledc_mode_t kMode = LEDC_LOW_SPEED_MODE;
constexpr ledc_channel_t kChannel = LEDC_CHANNEL_0;
constexpr ledc_timer_t kTimer = LEDC_TIMER_0;
constexpr uint32_t kMaxDuty = (1u << 13) - 1;  // 13-bit resolution at 5 kHz

void RestartNow(void*) { esp_restart(); }

}  // namespace

EspBoardHardware::EspBoardHardware(NvsSettings& settings, int led_gpio, int backlight_gpio, bool backlight_inverted)
    : settings_(settings), led_gpio_(led_gpio), backlight_gpio_(backlight_gpio),
      backlight_inverted_(backlight_inverted) {}

void EspBoardHardware::Init() {
  volume_ = static_cast<int>(settings_.GetInt("volume", 60));
  brightness_ = static_cast<int>(settings_.GetInt("brightness", 80));
  if (led_gpio_ >= 0) {
    gpio_reset_pin(static_cast<gpio_num_t>(led_gpio_));
    gpio_set_direction(static_cast<gpio_num_t>(led_gpio_), GPIO_MODE_OUTPUT);
    gpio_set_level(static_cast<gpio_num_t>(led_gpio_), 0);
  }
  if (backlight_gpio_ >= 0) {
    ledc_timer_config_t timer = {};
    timer.speed_mode = kMode;
    timer.duty_resolution = LEDC_TIMER_13_BIT;
    timer.timer_num = kTimer;
    timer.freq_hz = 5000;
    timer.clk_cfg = LEDC_AUTO_CLK;
    ledc_timer_config(&timer);
    ledc_channel_config_t channel = {};
    channel.gpio_num = backlight_gpio_;
    channel.speed_mode = kMode;
    channel.channel = kChannel;
    channel.timer_sel = kTimer;
    channel.duty = 0;
    channel.flags.output_invert = backlight_inverted_ ? 1 : 0;
    ledc_channel_config(&channel);
    SetBrightness(brightness_);
  }
}

uint32_t EspBoardHardware::FreeHeapBytes() { return esp_get_free_heap_size(); }
uint32_t EspBoardHardware::MinFreeHeapBytes() { return esp_get_minimum_free_heap_size(); }
uint64_t EspBoardHardware::UptimeMs() { return static_cast<uint64_t>(esp_timer_get_time() / 1000); }

bool EspBoardHardware::WifiRssi(int* rssi_dbm) {
  wifi_ap_record_t ap = {};
  if (esp_wifi_sta_get_ap_info(&ap) != ESP_OK) return false;
  *rssi_dbm = ap.rssi;
  return true;
}

bool EspBoardHardware::SetVolume(int percent) {
  volume_ = percent;  // the codec is board specific; the value is what tools and status report
  return settings_.SetInt("volume", percent);
}

bool EspBoardHardware::SetBrightness(int percent) {
  brightness_ = percent;
  settings_.SetInt("brightness", percent);
  if (backlight_gpio_ < 0) return true;
  const uint32_t duty = kMaxDuty * static_cast<uint32_t>(percent) / 100;
  return ledc_set_duty(kMode, kChannel, duty) == ESP_OK && ledc_update_duty(kMode, kChannel) == ESP_OK;
}

bool EspBoardHardware::SetLed(bool on) {
  led_on_ = on;
  if (led_gpio_ < 0) return true;
  return gpio_set_level(static_cast<gpio_num_t>(led_gpio_), on ? 1 : 0) == ESP_OK;
}

void EspBoardHardware::ScheduleReboot(uint32_t delay_ms) {
  esp_timer_create_args_t args = {};
  args.callback = &RestartNow;
  args.name = "reboot";
  esp_timer_handle_t timer = nullptr;
  if (esp_timer_create(&args, &timer) == ESP_OK) {
    esp_timer_start_once(timer, static_cast<uint64_t>(delay_ms) * 1000);
  } else {
    esp_restart();
  }
}
