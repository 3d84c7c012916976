// A gateway that keeps TCP open but never answers: the device's hello goes
// unanswered, then its close frame too. The device's esp_websocket_client
// stops pinging once it has sent a close frame and waits for the server with
// no bound, so without a second deadline the link would stay "connected"
// without a session until TCP dies. The host transport waits the same way;
// the link's close deadline (Protocol::CloseOverdue) must drop the connection
// and reconnect. The server is a raw socket: it completes the upgrade, then
// reads and never writes (a libwebsockets server would answer the close).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lws_websocket_protocol.h"

namespace {

// Accepts WebSocket upgrades on 127.0.0.1 and then stays mute, recording the
// opcodes of the client's frames per connection.
class MuteGateway {
 public:
  MuteGateway() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof addr;
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listener_, 4) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~MuteGateway() {
    stopping_ = true;
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    if (acceptor_.joinable()) acceptor_.join();
    // Only the acceptor adds sockets and readers, and it has ended. The readers take the lock for each frame and as
    // they end: joined while this held it, a reader with a frame still to record (the link's close) never ended.
    for (int fd : sockets_) shutdown(fd, SHUT_RDWR);
    for (auto& t : readers_) t.join();
    for (int fd : sockets_) close(fd);
  }

  int port() const { return port_; }
  std::string url() const { return "ws://127.0.0.1:" + std::to_string(port_) + "/xiaozhi/v1/"; }

  // Waits until `ready(connections)` holds (a bound on a hung test, not a timing assertion).
  template <typename Ready>
  bool Await(Ready ready) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return ready(connections_); });
  }

  struct Connection {
    std::vector<int> opcodes;  // of the client's frames, in order
    bool ended = false;        // the client closed the TCP connection
  };

 private:
  void Accept() {
    for (;;) {
      const int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) {
        close(fd);
        return;
      }
      const size_t index = connections_.size();
      connections_.emplace_back();
      sockets_.push_back(fd);
      readers_.emplace_back([this, fd, index] { Serve(fd, index); });
    }
  }

  void Serve(int fd, size_t index) {
    std::string in;
    char buffer[4096];
    bool upgraded = false;
    for (;;) {
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      in.append(buffer, static_cast<size_t>(n));
      if (!upgraded) {
        const size_t end = in.find("\r\n\r\n");
        if (end == std::string::npos) continue;
        const std::string answer = UpgradeAnswer(in.substr(0, end));
        if (answer.empty() || send(fd, answer.data(), answer.size(), MSG_NOSIGNAL) < 0) break;
        in.erase(0, end + 4);
        upgraded = true;
      }
      ReadFrames(&in, index);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    connections_[index].ended = true;
    cv_.notify_all();
  }

  // Client frames are masked: opcode, length (7, 16 or 64 bit), 4-byte mask, payload.
  void ReadFrames(std::string* in, size_t index) {
    for (;;) {
      if (in->size() < 2) return;
      const auto* b = reinterpret_cast<const unsigned char*>(in->data());
      size_t header = 2;
      uint64_t length = b[1] & 0x7f;
      if (length == 126) {
        if (in->size() < 4) return;
        length = (static_cast<uint64_t>(b[2]) << 8) | b[3];
        header = 4;
      } else if (length == 127) {
        if (in->size() < 10) return;
        length = 0;
        for (int i = 2; i < 10; ++i) length = (length << 8) | b[i];
        header = 10;
      }
      if (b[1] & 0x80) header += 4;
      if (in->size() < header + length) return;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        connections_[index].opcodes.push_back(b[0] & 0x0f);
        cv_.notify_all();
      }
      in->erase(0, header + static_cast<size_t>(length));
    }
  }

  static std::string UpgradeAnswer(const std::string& request) {
    const std::string name = "sec-websocket-key:";
    std::string lower = request;
    for (char& c : lower) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
    const size_t at = lower.find(name);
    if (at == std::string::npos) return "";
    size_t start = at + name.size();
    while (start < request.size() && request[start] == ' ') ++start;
    const size_t end = request.find("\r\n", start);
    const std::string key = request.substr(start, end == std::string::npos ? std::string::npos : end - start) +
                            "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_length = 0;
    if (EVP_Digest(key.data(), key.size(), digest, &digest_length, EVP_sha1(), nullptr) != 1) return "";
    unsigned char accept[64];
    EVP_EncodeBlock(accept, digest, static_cast<int>(digest_length));
    return std::string("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n") +
           "Sec-WebSocket-Accept: " + reinterpret_cast<const char*>(accept) + "\r\n\r\n";
  }

  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Connection> connections_;
  std::vector<int> sockets_;
  std::vector<std::thread> readers_;
};

constexpr int kText = 0x1;
constexpr int kClose = 0x8;

// Link events, awaitable.
class Events {
 public:
  voxgate::ProtocolEvents Hooks() {
    voxgate::ProtocolEvents events;
    events.on_connected = [this] { Add("connected"); };
    events.on_closed = [this](const std::string& reason) { Add("closed: " + reason); };
    events.on_error = [this](const std::string& message) { Add("error: " + message); };
    return events;
  }
  bool Await(const std::string& text) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] {
      for (const auto& line : lines_) {
        if (line == text) return true;
      }
      return false;
    });
  }

 private:
  void Add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex_);
    lines_.push_back(line);
    cv_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

}  // namespace

TEST(WsUnansweredHello, TheLinkDropsAConnectionThatAnswersNeitherHelloNorCloseAndReconnects) {
  MuteGateway gateway;
  ASSERT_GT(gateway.port(), 0);
  auto loop = std::make_shared<voxgate::LwsLoop>();
  voxgate::WebSocketOptions options;
  options.url = gateway.url();
  options.identity = {"aa:bb:cc:dd:ee:24", "5b0e4c1a-8c39-4a0e-9b1e-1f3c2d4e5a24"};
  options.backoff_initial_ms = 50;
  options.backoff_max_ms = 100;
  options.hello_timeout_ms = 200;
  voxgate::LwsWebSocketProtocol link(loop, options);
  link.SetCloseTimeoutMs(300);
  Events events;
  link.SetEvents(events.Hooks());
  ASSERT_TRUE(link.Start());

  ASSERT_TRUE(events.Await("connected"));
  EXPECT_TRUE(events.Await("error: no server hello within 200 ms"));
  // The device's polite close went out (after its hello) and was not answered...
  EXPECT_TRUE(gateway.Await([](const std::vector<MuteGateway::Connection>& c) {
    return !c.empty() && c[0].opcodes.size() >= 2 && c[0].opcodes.back() == kClose;
  }));
  // ... so the second deadline drops the connection and the link comes back on a new one.
  EXPECT_TRUE(events.Await("error: the gateway did not finish the close within 300 ms: dropping the connection"));
  EXPECT_TRUE(events.Await("closed: no server hello, close unanswered: dropped"));
  EXPECT_TRUE(gateway.Await([](const std::vector<MuteGateway::Connection>& c) {
    return c.size() >= 2 && c[0].ended && !c[1].opcodes.empty() && c[1].opcodes[0] == kText;
  })) << "a new connection with a new device hello";
  EXPECT_FALSE(link.stranded());
  link.Stop();
}
