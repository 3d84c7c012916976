// Device platform (ESP-only): a FreeRTOS mutex, and a FreeRTOS task draining
// a FreeRTOS queue of heap-allocated jobs.
#include "esp_log.h"
#include "freertos/FreeRTOS.h"
#include "freertos/queue.h"
#include "freertos/semphr.h"
#include "freertos/task.h"

#include "mcp/platform.h"

namespace mcp {

Mutex::Mutex() : handle_(xSemaphoreCreateMutex()) {}
Mutex::~Mutex() { vSemaphoreDelete(static_cast<SemaphoreHandle_t>(handle_)); }
void Mutex::Lock() { xSemaphoreTake(static_cast<SemaphoreHandle_t>(handle_), portMAX_DELAY); }
void Mutex::Unlock() { xSemaphoreGive(static_cast<SemaphoreHandle_t>(handle_)); }

namespace {

class FreeRtosWorker : public Worker {
 public:
  explicit FreeRtosWorker(const WorkerOptions& options)
      : queue_(xQueueCreate(options.queue_depth, sizeof(Job*))), done_(xSemaphoreCreateBinary()) {
    xTaskCreate(&FreeRtosWorker::Entry, options.name, options.stack_bytes, this, options.priority, &task_);
  }

  ~FreeRtosWorker() override {
    Job* stop = nullptr;  // a null job tells the task to end
    xQueueSendToFront(queue_, &stop, portMAX_DELAY);
    xSemaphoreTake(done_, portMAX_DELAY);
    Job* job = nullptr;
    while (xQueueReceive(queue_, &job, 0) == pdTRUE) delete job;
    vQueueDelete(queue_);
    vSemaphoreDelete(done_);
  }

  bool Post(Job job) override {
    Job* boxed = new Job(std::move(job));
    if (xQueueSend(queue_, &boxed, 0) != pdTRUE) {
      delete boxed;
      return false;
    }
    return true;
  }

 private:
  static void Entry(void* self) { static_cast<FreeRtosWorker*>(self)->Loop(); }

  void Loop() {
    for (;;) {
      Job* job = nullptr;
      xQueueReceive(queue_, &job, portMAX_DELAY);
      if (job == nullptr) break;
      (*job)();
      delete job;
      // Headroom after each job, to size the stack from measurement (debug level, tag "vx_stack").
      ESP_LOGD("vx_stack", "%s: %u bytes of stack never used", pcTaskGetName(nullptr),
               static_cast<unsigned>(uxTaskGetStackHighWaterMark(nullptr)));
    }
    xSemaphoreGive(done_);
    vTaskDelete(nullptr);
  }

  QueueHandle_t queue_;
  SemaphoreHandle_t done_;
  TaskHandle_t task_ = nullptr;
};

}  // namespace

std::unique_ptr<Worker> Worker::Create(const WorkerOptions& options) {
  return std::unique_ptr<Worker>(new FreeRtosWorker(options));
}

}  // namespace mcp
