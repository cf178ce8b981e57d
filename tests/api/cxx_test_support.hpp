// What the tests of the C++ faces (kiln.hpp, kiln_experimental.hpp) share.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "api_test_env.hpp"
#include "kiln/kiln.hpp"

namespace kiln_test {

// The kiln::Error `body` throws; a failure of the test (and KILN_OK) where it throws none.
template <typename Body>
kiln::Error error_from(Body body) {
  try {
    body();
  } catch (const kiln::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no kiln::Error was thrown";
  return kiln::Error(KILN_OK, "none thrown");
}

// A runtime that trusts the test key and can load neither a CUDA driver nor a HIP runtime: every
// kernel routes to the reference, on any machine.
inline constexpr const char* kNoDriver = "libcuda-absent-for-this-test.so.1";
inline constexpr const char* kNoHip = "libamdhip64-absent-for-this-test.so.6";
inline kiln::RuntimeOptions driverless_options() {
  return kiln::RuntimeOptions().trust_path(keys() + "/test.pub").cuda_driver_path(kNoDriver).hip_runtime_path(kNoHip);
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace kiln_test
