// What the tests of the C++ faces (kiln.hpp, kiln_experimental.hpp) share.
#pragma once

#include <gtest/gtest.h>

#include <string>

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

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace kiln_test
