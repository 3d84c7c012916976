// The host firmware download client against a real HTTP server on
// 127.0.0.1 (a plain socket that answers one canned response per
// connection), for the failures the gateway never produces: a short body, a
// 404, an oversized image, a wrong digest. Nothing unverified reaches the slot.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "firmware_download.h"

using namespace voxgate;

namespace {

// Serves `response` (raw bytes) to the first connection, then closes.
class OneShotServer {
 public:
  explicit OneShotServer(std::string response) : response_(std::move(response)) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listener_, 1), 0);
    socklen_t length = sizeof addr;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &length);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      const int client = accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      char buffer[4096];
      std::string request;
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = recv(client, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        request.append(buffer, static_cast<size_t>(n));
      }
      for (size_t sent = 0; sent < response_.size();) {
        const ssize_t n = send(client, response_.data() + sent, response_.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      close(client);
    });
  }
  ~OneShotServer() {
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/firmware/fw.bin"; }

 private:
  std::string response_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

std::string Image(size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 7919) & 0xff);
  return bytes;
}

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  return HexLower(digest, length);
}

std::string Ok(const std::string& body, size_t announced) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " + std::to_string(announced) +
         "\r\nConnection: close\r\n\r\n" + body;
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class FirmwareDownload : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/voxgate-dl-XXXXXX";
    dir_ = mkdtemp(pattern);
    path_ = dir_ + "/ota_1.bin";
  }
  void TearDown() override {
    remove(path_.c_str());
    remove((path_ + ".part").c_str());
    rmdir(dir_.c_str());
  }
  FirmwareOffer Offer(const std::string& url, int64_t size, const std::string& sha) {
    FirmwareOffer offer;
    offer.version = "1.1.0";
    offer.url = url;
    offer.size = size;
    offer.sha256 = sha;
    return offer;
  }
  std::string dir_, path_;
};

}  // namespace

TEST_F(FirmwareDownload, WritesAVerifiedImageAndReportsProgress) {
  const std::string image = Image(100000);
  OneShotServer server(Ok(image, image.size()));
  DownloadOptions options;
  int64_t last = 0, total = 0;
  int calls = 0;
  options.on_progress = [&](int64_t bytes, int64_t of) {
    EXPECT_GE(bytes, last);
    last = bytes;
    total = of;
    ++calls;
  };
  const DownloadResult r = DownloadFirmware(Offer(server.url(), image.size(), Sha256Hex(image)), path_, options);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.bytes, 100000);
  EXPECT_EQ(r.sha256, Sha256Hex(image));
  EXPECT_EQ(ReadFile(path_), image);
  EXPECT_FALSE(Exists(path_ + ".part"));
  EXPECT_GT(calls, 0);
  EXPECT_EQ(last, 100000);
  EXPECT_EQ(total, 100000);
}

TEST_F(FirmwareDownload, RefusesAShortBody) {
  const std::string image = Image(50000);
  OneShotServer server(Ok(image.substr(0, 20000), image.size()));  // the server dies mid-way
  const DownloadResult r = DownloadFirmware(Offer(server.url(), -1, ""), path_, {});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("of 50000 bytes"), std::string::npos) << r.error;
  EXPECT_FALSE(Exists(path_));
  EXPECT_FALSE(Exists(path_ + ".part"));
}

TEST_F(FirmwareDownload, RefusesAWrongDigestOrSize) {
  const std::string image = Image(4096);
  {
    OneShotServer server(Ok(image, image.size()));
    const DownloadResult r = DownloadFirmware(Offer(server.url(), image.size(), Sha256Hex("another build")), path_, {});
    EXPECT_EQ(r.error, "sha256 mismatch");
  }
  {
    OneShotServer server(Ok(image, image.size()));
    const DownloadResult r = DownloadFirmware(Offer(server.url(), image.size() + 1, ""), path_, {});
    EXPECT_NE(r.error.find("differs from the offered"), std::string::npos) << r.error;
  }
  EXPECT_FALSE(Exists(path_));
  EXPECT_FALSE(Exists(path_ + ".part"));
}

TEST_F(FirmwareDownload, RefusesAnErrorStatusAndAnOversizedImage) {
  {
    OneShotServer server("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found");
    const DownloadResult r = DownloadFirmware(Offer(server.url(), -1, ""), path_, {});
    EXPECT_EQ(r.error, "HTTP 404");
  }
  {
    const std::string image = Image(10000);
    OneShotServer server(Ok(image, image.size()));
    DownloadOptions options;
    options.max_bytes = 4096;  // an announced length past the slot is refused before any byte is kept
    const DownloadResult r = DownloadFirmware(Offer(server.url(), -1, ""), path_, options);
    EXPECT_NE(r.error.find("larger than 4096"), std::string::npos) << r.error;
  }
  EXPECT_FALSE(Exists(path_));
  EXPECT_FALSE(Exists(path_ + ".part"));
}
