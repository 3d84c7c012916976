// Retry timing: the RetryTimer behind the device's own MQTT reconnect and the
// boot-time OTA config request (LinkResolver), on a fake clock.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "voxgate/link_resolver.h"
#include "voxgate/retry_timer.h"

using namespace voxgate;

TEST(RetryTimer, ArmsOneBackoffDelayAheadAndFiresOnce) {
  RetryTimer timer(Backoff(1000, 8000, 7));
  EXPECT_FALSE(timer.Due(0)) << "not armed";
  uint64_t now = 5000;
  uint32_t base = 1000;
  for (int i = 0; i < 6; ++i) {
    const uint32_t delay = timer.Failed(now);
    EXPECT_GE(delay, base / 2) << i;  // jitter: drawn from [base/2, base]
    EXPECT_LE(delay, base) << i;
    EXPECT_FALSE(timer.Due(now + delay - 1)) << i;
    EXPECT_TRUE(timer.Due(now + delay)) << i;
    EXPECT_FALSE(timer.Due(now + delay)) << "fires once per arming";
    now += delay;
    base = std::min<uint32_t>(base * 2, 8000);
  }
  EXPECT_EQ(timer.failures(), 6u);
  timer.Succeeded();
  EXPECT_FALSE(timer.armed());
  EXPECT_LE(timer.Failed(now), 1000u) << "a success starts the delays over";
  timer.Cancel();
  EXPECT_FALSE(timer.Due(now + 60000));
}

namespace {

LinkConfig WebSocketAt(const std::string& url) {
  LinkConfig config;
  config.has_websocket = true;
  config.websocket.url = url;
  return config;
}

// An OTA endpoint that fails a number of times, then answers `answer`.
struct FakeOta {
  int failures_left = 0;
  int calls = 0;
  LinkConfig last_stored;  // what the last request was given to apply the answer over
  LinkConfig answer = WebSocketAt("ws://gw:8000/xiaozhi/v1/");
  LinkResolver::Fetch fetch() {
    return [this](const LinkConfig& stored, LinkConfig* config, std::string* error) {
      last_stored = stored;
      ++calls;
      if (failures_left > 0) {
        --failures_left;
        *error = "could not connect";
        return false;
      }
      *config = answer;
      return true;
    };
  }
};

// A clock that only moves when the resolver waits.
struct FakeTime {
  uint64_t now = 1000;
  std::vector<uint32_t> waits;
  LinkResolver::Clock clock() {
    return [this] { return now; };
  }
  LinkResolver::Wait wait() {
    return [this](uint32_t ms) {
      waits.push_back(ms);
      now += ms;
    };
  }
};

}  // namespace

TEST(LinkResolver, WithNothingStoredItRetriesWithBackoffUntilTheOtaAnswers) {
  FakeOta ota;
  ota.failures_left = 4;
  MemoryConfigStore store;
  FakeTime time;
  LinkResolver resolver(ota.fetch(), store, Backoff(1000, 60000, 99));
  const LinkConfig link = resolver.Resolve(time.clock(), time.wait());
  EXPECT_EQ(ota.calls, 5) << "asked again after each failure";
  ASSERT_EQ(time.waits.size(), 4u);
  uint32_t base = 1000;
  for (uint32_t wait : time.waits) {
    EXPECT_GE(wait, base / 2);
    EXPECT_LE(wait, base);
    base *= 2;
  }
  EXPECT_EQ(resolver.source(), LinkResolver::Source::kOta);
  EXPECT_EQ(link.websocket.url, "ws://gw:8000/xiaozhi/v1/");
  LinkConfig stored;
  ASSERT_TRUE(LoadLinkConfig(store, &stored)) << "the answer becomes the last good config";
  EXPECT_EQ(stored.websocket.url, link.websocket.url);
  EXPECT_FALSE(resolver.retrying());
}

TEST(LinkResolver, DevicesBootedTogetherDoNotRetryInLockstep) {
  std::vector<std::vector<uint32_t>> waits;
  for (uint32_t seed : {1u, 2u}) {
    FakeOta ota;
    ota.failures_left = 5;
    MemoryConfigStore store;
    FakeTime time;
    LinkResolver resolver(ota.fetch(), store, Backoff(1000, 60000, seed));
    resolver.Resolve(time.clock(), time.wait());
    waits.push_back(time.waits);
  }
  EXPECT_NE(waits[0], waits[1]);
}

TEST(LinkResolver, ServesTheLastGoodConfigAtOnceAndKeepsAsking) {
  FakeOta ota;
  ota.failures_left = 2;
  MemoryConfigStore store;
  ASSERT_TRUE(SaveLinkConfig(store, WebSocketAt("ws://old:8000/xiaozhi/v1/")));
  FakeTime time;
  std::vector<std::string> log;
  LinkResolver resolver(ota.fetch(), store, Backoff(1000, 60000, 3));
  resolver.SetLog([&](const std::string& line) { log.push_back(line); });
  const LinkConfig link = resolver.Resolve(time.clock(), time.wait());
  EXPECT_TRUE(time.waits.empty()) << "a stored config is served without waiting";
  EXPECT_EQ(link.websocket.url, "ws://old:8000/xiaozhi/v1/");
  EXPECT_EQ(resolver.source(), LinkResolver::Source::kStored);
  EXPECT_TRUE(resolver.retrying());
  EXPECT_EQ(ota.calls, 1);

  LinkConfig fresh;
  EXPECT_FALSE(resolver.Poll(time.now, &fresh)) << "not due yet";
  EXPECT_EQ(ota.calls, 1);
  uint64_t now = time.now + 60000;
  EXPECT_FALSE(resolver.Poll(now, &fresh)) << "due, asked, failed again";
  EXPECT_EQ(ota.calls, 2);
  EXPECT_EQ(ota.last_stored.websocket.url, "ws://old:8000/xiaozhi/v1/") << "the answer applies over the stored config";
  EXPECT_TRUE(resolver.retrying());
  now += 60000;
  ota.answer = WebSocketAt("ws://old:8000/xiaozhi/v1/");  // the gateway is back, same answer
  EXPECT_FALSE(resolver.Poll(now, &fresh)) << "same config: nothing to switch";
  EXPECT_EQ(ota.calls, 3);
  EXPECT_FALSE(resolver.retrying()) << "an answer ends the retries";
  EXPECT_EQ(resolver.source(), LinkResolver::Source::kOta);
  EXPECT_FALSE(log.empty());
}

TEST(LinkResolver, ABackgroundAnswerThatMovedTheDeviceIsReported) {
  FakeOta ota;
  ota.failures_left = 1;
  ota.answer = WebSocketAt("ws://new:8000/xiaozhi/v1/");
  MemoryConfigStore store;
  ASSERT_TRUE(SaveLinkConfig(store, WebSocketAt("ws://old:8000/xiaozhi/v1/")));
  FakeTime time;
  LinkResolver resolver(ota.fetch(), store, Backoff(1000, 60000, 3));
  resolver.Resolve(time.clock(), time.wait());
  LinkConfig fresh;
  ASSERT_TRUE(resolver.Poll(time.now + 60000, &fresh));
  EXPECT_EQ(fresh.websocket.url, "ws://new:8000/xiaozhi/v1/");
  LinkConfig stored;
  ASSERT_TRUE(LoadLinkConfig(store, &stored));
  EXPECT_EQ(stored.websocket.url, "ws://new:8000/xiaozhi/v1/") << "it is the new last good config";
}

TEST(LinkResolver, TheFallbackIsServedWhenNothingIsStored) {
  FakeOta ota;
  ota.failures_left = 1;
  MemoryConfigStore store;
  FakeTime time;
  LinkResolver resolver(ota.fetch(), store, Backoff(1000, 60000, 3), WebSocketAt("ws://fallback/xiaozhi/v1/"));
  const LinkConfig link = resolver.Resolve(time.clock(), time.wait());
  EXPECT_TRUE(time.waits.empty());
  EXPECT_EQ(resolver.source(), LinkResolver::Source::kFallback);
  EXPECT_EQ(link.websocket.url, "ws://fallback/xiaozhi/v1/");
  EXPECT_TRUE(resolver.retrying());
}
