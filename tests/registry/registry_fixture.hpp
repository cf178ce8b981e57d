// A real registry for the registry tests: Debian's docker-registry (CNCF Distribution) started
// on 127.0.0.1 at a free port with its storage in a temporary folder, and a TCP proxy in front
// of it that cuts every connection once a set number of bytes has gone to the client (the
// deterministic way to lose a registry in the middle of a transfer).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../unit/run_command.hpp"

namespace kiln::test {

constexpr const char* kRegistryBinary = "/usr/bin/docker-registry";

inline bool executable(const char* path) { return ::access(path, X_OK) == 0; }

// A kiln command line's run, and what the tests read of it.
inline CommandResult shell(const std::string& line) { return run_command(line); }
inline bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}
// The value after `label` on its line of the command's output ("  kiln digest      sha256:...").
inline std::string field(const std::string& out, const std::string& label) {
  std::size_t at = out.find(label);
  if (at == std::string::npos) return "";
  at = out.find_first_not_of(' ', at + label.size());
  return out.substr(at, out.find_first_of(" \n", at) - at);
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A port nobody listens on now (the kernel's choice for a socket bound to port 0).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline int connect_local(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// docker-registry serving `storage` on 127.0.0.1:port. `extra` is appended to its config (auth).
class Registry {
 public:
  Registry(const std::string& dir, std::string extra = "") : dir_(dir), extra_(std::move(extra)), port_(free_port()) {
    ::mkdir((dir_ + "/storage").c_str(), 0755);
    start();
  }
  ~Registry() { stop(); }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string storage() const { return dir_ + "/storage"; }
  std::string log() const { return read_text(dir_ + "/registry.log"); }
  // Where the registry keeps a blob's bytes (the filesystem driver's layout).
  std::string blob_path(const std::string& digest) const {
    std::string hex = digest.substr(7);
    return storage() + "/docker/registry/v2/blobs/sha256/" + hex.substr(0, 2) + "/" + hex + "/data";
  }
  bool ready() const { return ready_; }

  void start() {
    std::string config = dir_ + "/config.yml";
    std::ofstream(config) << "version: 0.1\n"
                             "log:\n  level: info\n  accesslog:\n    disabled: false\n"
                             "storage:\n  filesystem:\n    rootdirectory: " << storage() << "\n"
                             "http:\n  addr: 127.0.0.1:" << port_ << "\n"
                          << extra_;
    std::string log_path = dir_ + "/registry.log";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
      int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execl(kRegistryBinary, "docker-registry", "serve", config.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Ready when GET /v2/ gets an HTTP answer (200; 401 with auth; 400 from a TLS port asked in
    // plain http); given up after 30 s.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      int fd = connect_local(port_);
      if (fd >= 0) {
        std::string req = "GET /v2/ HTTP/1.0\r\n\r\n";
        (void)!::write(fd, req.data(), req.size());
        char buf[64] = {0};
        ssize_t n = ::read(fd, buf, sizeof buf - 1);
        ::close(fd);
        std::string reply(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
        if (reply.rfind("HTTP/", 0) == 0) {
          ready_ = true;
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // SIGKILL: the registry dies as a crashed server does, mid-whatever.
  void kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
    ready_ = false;
  }
  void stop() { kill(); }

 private:
  std::string dir_, extra_;
  int port_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

// Forwards 127.0.0.1:port() to the upstream port, and once `budget` bytes in all have gone from
// upstream to clients, closes every connection it holds and every one it accepts after. With
// `hide_range`, each request's "Range:" header is renamed (same length) before it goes upstream:
// a registry that does not serve ranges, as the client sees it.
class CuttingProxy {
 public:
  CuttingProxy(int upstream, std::uint64_t budget, bool hide_range = false)
      : upstream_(upstream), budget_(budget), hide_range_(hide_range) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listen_, 16);
    socklen_t len = sizeof a;
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~CuttingProxy() {
    stop_ = true;
    acceptor_.join();
    for (std::thread& t : pumps_) t.join();
    ::close(listen_);
  }
  int port() const { return port_; }
  std::uint64_t forwarded() const { return sent_; }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{listen_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int client = ::accept(listen_, nullptr, nullptr);
      if (client < 0) continue;
      pumps_.emplace_back([this, client] { pump(client); });
    }
  }
  void pump(int client) {
    int server = connect_local(upstream_);
    char buf[16384];
    while (!stop_ && server >= 0 && sent_ < budget_) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = ::read(client, buf, sizeof buf);
        if (n > 0 && hide_range_) {
          std::string text(buf, static_cast<std::size_t>(n));
          for (std::size_t at; (at = text.find("\r\nRange:")) != std::string::npos;) text[at + 2] = 'X';
          std::copy(text.begin(), text.end(), buf);
        }
        if (n <= 0 || ::write(server, buf, static_cast<std::size_t>(n)) != n) break;
      }
      if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = ::read(server, buf, sizeof buf);
        if (n <= 0) break;
        std::uint64_t room = budget_ - std::min<std::uint64_t>(budget_, sent_);
        std::size_t pass = static_cast<std::size_t>(std::min<std::uint64_t>(room, static_cast<std::uint64_t>(n)));
        if (pass > 0 && ::write(client, buf, pass) != static_cast<ssize_t>(pass)) break;
        sent_ += pass;
      }
    }
    if (server >= 0) ::close(server);
    ::shutdown(client, SHUT_RDWR);
    ::close(client);
  }
  int upstream_, port_ = 0, listen_ = -1;
  std::uint64_t budget_;
  bool hide_range_ = false;
  std::atomic<std::uint64_t> sent_{0};
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> pumps_;
};

}  // namespace kiln::test
