#include "event_log.h"

#include <cstdio>
#include <mutex>

#include "cJSON.h"

namespace sim {

void Emit(const char* event, const std::string& device, cJSON* fields) {
  cJSON* line = cJSON_CreateObject();
  cJSON_AddStringToObject(line, "event", event);
  cJSON_AddStringToObject(line, "device", device.c_str());
  if (fields != nullptr) {
    while (cJSON* item = fields->child) {  // move every field over, in order
      cJSON_AddItemToObject(line, item->string, cJSON_DetachItemViaPointer(fields, item));
    }
    cJSON_Delete(fields);
  }
  char* text = cJSON_PrintUnformatted(line);
  cJSON_Delete(line);
  static std::mutex mutex;
  {
    std::lock_guard<std::mutex> lock(mutex);
    fputs(text, stdout);
    fputc('\n', stdout);
    fflush(stdout);
  }
  cJSON_free(text);
}

}  // namespace sim
