// Test helper: collects what a McpServer sends, and lets a test await a
// message without sleeping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "cJSON.h"

namespace testing_support {

using Json = std::unique_ptr<cJSON, void (*)(cJSON*)>;

inline Json ParseJson(const std::string& text) { return Json(cJSON_Parse(text.c_str()), cJSON_Delete); }

class Capture {
 public:
  std::function<void(const std::string&)> sender() {
    return [this](const std::string& json) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        messages_.push_back(json);
      }
      cv_.notify_all();
    };
  }

  // Next message, or "" if none arrives within the timeout (a failure signal,
  // not a timing assertion: the timeout only bounds a hung test).
  std::string Next(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [this] { return !messages_.empty(); })) return "";
    std::string front = messages_.front();
    messages_.pop_front();
    return front;
  }

  Json NextJson() { return ParseJson(Next()); }

  size_t Pending() {
    std::lock_guard<std::mutex> lock(mutex_);
    return messages_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::string> messages_;
};

// Reads a path like "result.tools" or "error.code" from a tree.
inline const cJSON* At(const cJSON* root, const std::string& path) {
  const cJSON* node = root;
  size_t start = 0;
  while (node && start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    node = cJSON_GetObjectItemCaseSensitive(node, key.c_str());
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return node;
}

inline int IntAt(const cJSON* root, const std::string& path) {
  const cJSON* n = At(root, path);
  return cJSON_IsNumber(n) ? n->valueint : -999999;
}

inline std::string StrAt(const cJSON* root, const std::string& path) {
  const cJSON* n = At(root, path);
  return cJSON_IsString(n) ? n->valuestring : "<missing>";
}

}  // namespace testing_support
