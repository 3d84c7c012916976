#include "button.h"

#include "driver/gpio.h"
#include "esp_log.h"
#include "esp_timer.h"
#include "freertos/FreeRTOS.h"
#include "freertos/queue.h"
#include "freertos/task.h"

namespace {

constexpr int64_t kDebounceUs = 50 * 1000;

void IRAM_ATTR OnEdge(void* queue) {
  const int64_t now = esp_timer_get_time();
  BaseType_t woken = pdFALSE;
  xQueueSendFromISR(static_cast<QueueHandle_t>(queue), &now, &woken);
  if (woken) portYIELD_FROM_ISR();
}

}  // namespace

Button::Button(int gpio, std::function<void()> on_press) : gpio_(gpio), on_press_(std::move(on_press)) {}

bool Button::Start() {
  if (gpio_ < 0) return false;
  queue_ = xQueueCreate(8, sizeof(int64_t));
  gpio_config_t io = {};
  io.pin_bit_mask = 1ULL << gpio_;
  io.mode = GPIO_MODE_INPUT;
  io.pull_up_en = GPIO_PULLUP_ENABLE;
  io.intr_type = GPIO_INTR_NEGEDGE;
  gpio_config(&io);
  gpio_install_isr_service(0);  // ESP_ERR_INVALID_STATE if already installed: fine
  gpio_isr_handler_add(static_cast<gpio_num_t>(gpio_), &OnEdge, queue_);
  // The callback only posts to a worker (main.cc), so a small stack is enough.
  return xTaskCreate(&Button::Task, "button", 2048, this, 3, nullptr) == pdPASS;
}

void Button::Task(void* self_ptr) {
  auto* self = static_cast<Button*>(self_ptr);
  int64_t last = -kDebounceUs;
  for (;;) {
    int64_t at = 0;
    xQueueReceive(static_cast<QueueHandle_t>(self->queue_), &at, portMAX_DELAY);
    if (at - last < kDebounceUs) continue;  // contact bounce
    last = at;
    vTaskDelay(pdMS_TO_TICKS(20));
    if (gpio_get_level(static_cast<gpio_num_t>(self->gpio_)) == 0) self->on_press_();
    ESP_LOGD("vx_stack", "button: %u bytes of stack never used",
             static_cast<unsigned>(uxTaskGetStackHighWaterMark(nullptr)));
  }
}
