#include "voxgate/hello.h"

#include <cstring>

#include "cJSON.h"

namespace voxgate {

std::string DeviceHello(Transport transport) {
  const bool mqtt = transport == Transport::kMqtt;
  cJSON* hello = cJSON_CreateObject();
  cJSON_AddStringToObject(hello, "type", "hello");
  cJSON_AddNumberToObject(hello, "version", mqtt ? 3 : 1);
  cJSON_AddBoolToObject(cJSON_AddObjectToObject(hello, "features"), "mcp", true);
  cJSON_AddStringToObject(hello, "transport", mqtt ? "udp" : "websocket");
  cJSON* audio = cJSON_AddObjectToObject(hello, "audio_params");
  cJSON_AddStringToObject(audio, "format", "opus");
  cJSON_AddNumberToObject(audio, "sample_rate", 16000);
  cJSON_AddNumberToObject(audio, "channels", 1);
  cJSON_AddNumberToObject(audio, "frame_duration", 60);
  char* text = cJSON_PrintUnformatted(hello);
  cJSON_Delete(hello);
  std::string out = text ? text : "";
  cJSON_free(text);
  return out;
}

bool ParseServerHello(const cJSON* frame, std::string* session_id) {
  const cJSON* type = cJSON_GetObjectItemCaseSensitive(frame, "type");
  if (!cJSON_IsString(type) || strcmp(type->valuestring, "hello") != 0) return false;
  const cJSON* session = cJSON_GetObjectItemCaseSensitive(frame, "session_id");
  *session_id = cJSON_IsString(session) ? session->valuestring : "";
  return true;
}

}  // namespace voxgate
