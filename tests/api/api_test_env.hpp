// What the C API tests share: where the build put the test archives and keys (overridable by
// the environment where the build folder has moved: the GPU runner), and reading libkiln's
// error messages.
#pragma once

#include <cstdlib>
#include <string>

#include "kiln/kiln.h"

namespace kiln_test {

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : fallback;
}
inline const std::string& archives() {
  static const std::string dir = env_or("KILN_TEST_ARCHIVES", KILN_TEST_ARCHIVES);
  return dir;
}
inline const std::string& keys() {
  static const std::string dir = env_or("KILN_TEST_KEYS", KILN_TEST_KEYS);
  return dir;
}
// The calling thread's last error, and the runtime's (kiln_runtime_last_error).
inline std::string thread_last_error() {
  char buf[2048];
  kiln_last_error(buf, sizeof buf, nullptr);
  return buf;
}
inline std::string runtime_last_error(kiln_runtime* rt) {
  char buf[2048];
  kiln_runtime_last_error(rt, buf, sizeof buf, nullptr);
  return buf;
}
// A runtime that trusts the test key and can load no CUDA driver: every kernel routes to the
// reference, on any machine.
inline kiln_runtime* runtime_without_driver() {
  static const std::string trust = keys() + "/test.pub";
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  o.trust_path = trust.c_str();
  o.cuda_driver_path = "libcuda-absent-for-this-test.so.1";
  kiln_runtime* rt = nullptr;
  return kiln_runtime_create(&rt, &o) == KILN_OK ? rt : nullptr;
}

// One kernel of a test archive on a runtime without a driver (so on the reference route),
// everything closed when it goes. open() returns KILN_OK or the failing call's status, with
// thread_last_error() saying why.
struct DriverlessKernel {
  kiln_runtime* rt = runtime_without_driver();
  kiln_archive* archive = nullptr;
  kiln_kernel* kernel = nullptr;

  kiln_status open(const std::string& archive_name, const char* kernel_name) {
    if (rt == nullptr) return KILN_ERR_INTERNAL;
    kiln_status s = kiln_archive_open(rt, (archives() + "/" + archive_name).c_str(), &archive);
    return s != KILN_OK ? s : kiln_archive_get_kernel(archive, kernel_name, 0, &kernel);
  }
  DriverlessKernel() = default;
  DriverlessKernel(const DriverlessKernel&) = delete;
  DriverlessKernel& operator=(const DriverlessKernel&) = delete;
  ~DriverlessKernel() {
    kiln_archive_destroy(archive);
    kiln_runtime_destroy(rt);
  }
};

}  // namespace kiln_test
