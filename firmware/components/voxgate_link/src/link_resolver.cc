#include "voxgate/link_resolver.h"

namespace voxgate {

LinkResolver::LinkResolver(Fetch fetch, ConfigStore& store, Backoff backoff, LinkConfig fallback)
    : fetch_(std::move(fetch)), store_(store), timer_(backoff), fallback_(std::move(fallback)) {}

bool LinkResolver::Ask(LinkConfig* config) {
  std::string error;
  LinkConfig stored;
  LoadLinkConfig(store_, &stored);  // nothing stored yet: an empty base
  if (fetch_(stored, config, &error)) {
    timer_.Succeeded();
    if (!SaveLinkConfig(store_, *config) && log_) log_("could not store the link config");
    return true;
  }
  if (log_) log_("OTA config request failed: " + error);
  return false;
}

LinkConfig LinkResolver::Resolve(const Clock& now, const Wait& wait) {
  for (;;) {
    LinkConfig config;
    if (Ask(&config)) {
      source_ = Source::kOta;
      served_ = config;
      return config;
    }
    const uint32_t delay = timer_.Failed(now());
    if (LoadLinkConfig(store_, &config)) {
      source_ = Source::kStored;
    } else if (fallback_.has_websocket || fallback_.has_mqtt) {
      config = fallback_;
      source_ = Source::kFallback;
    }
    if (source_ != Source::kNone) {  // serve it now; Poll asks again when the retry is due
      if (log_) log_(std::string("serving the ") + (source_ == Source::kStored ? "last good" : "fallback") +
                     " link config; asking again in " + std::to_string(delay) + " ms");
      served_ = config;
      return config;
    }
    if (log_) log_("no link config yet; asking again in " + std::to_string(delay) + " ms");
    wait(delay);
  }
}

bool LinkResolver::Poll(uint64_t now_ms, LinkConfig* fresh) {
  if (!timer_.Due(now_ms)) return false;
  LinkConfig config;
  if (!Ask(&config)) {
    const uint32_t delay = timer_.Failed(now_ms);
    if (log_) log_("asking again in " + std::to_string(delay) + " ms");
    return false;
  }
  const bool changed = SerializeLinkConfig(config) != SerializeLinkConfig(served_);
  source_ = Source::kOta;
  served_ = config;
  if (changed) *fresh = config;
  return changed;
}

}  // namespace voxgate
