// ESP only: the OTA client's HTTP POST on esp_http_client.
#include <string>
#include <utility>

#include "esp_crt_bundle.h"
#include "esp_http_client.h"

#include "voxgate/ota_client.h"

namespace voxgate {

bool OtaHttpPost(const std::string& url, const Headers& headers, const std::string& body, HttpAnswer* answer,
                 std::string* error) {
  esp_http_client_config_t cfg = {};
  cfg.url = url.c_str();
  cfg.method = HTTP_METHOD_POST;
  cfg.timeout_ms = 10000;
  cfg.crt_bundle_attach = esp_crt_bundle_attach;
  esp_http_client_handle_t client = esp_http_client_init(&cfg);
  if (client == nullptr) {
    *error = "could not create the HTTP client";
    return false;
  }
  for (const auto& header : headers) {
    esp_http_client_set_header(client, header.first.c_str(), header.second.c_str());
  }
  std::string text;
  bool ok = false;
  if (esp_http_client_open(client, static_cast<int>(body.size())) != ESP_OK) {
    *error = "could not connect";
  } else if (esp_http_client_write(client, body.data(), static_cast<int>(body.size())) < 0) {
    *error = "could not send the request";
  } else if (esp_http_client_fetch_headers(client) < 0) {
    *error = "no answer";
  } else {
    char buffer[512];
    int n;
    ok = true;
    while ((n = esp_http_client_read(client, buffer, sizeof buffer)) > 0) {
      if (text.size() + static_cast<size_t>(n) > kMaxOtaAnswerBytes) {
        *error = "answer too large";
        ok = false;
        break;
      }
      text.append(buffer, static_cast<size_t>(n));
    }
    if (ok) {
      answer->status = esp_http_client_get_status_code(client);
      answer->body = std::move(text);
    }
  }
  esp_http_client_close(client);
  esp_http_client_cleanup(client);
  return ok;
}

}  // namespace voxgate
