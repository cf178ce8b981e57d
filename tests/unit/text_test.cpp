// The one quoting rule behind every JSON report and TOML diagnostic kiln writes: whatever a
// kernel name or an error message holds, the output must still parse.
#include <gtest/gtest.h>

#include <string>

#include "text.hpp"

namespace kiln {
namespace {

TEST(JsonQuote, PlainTextIsWrappedInQuotes) { EXPECT_EQ(json_quote("matmul_relu"), "\"matmul_relu\""); }

TEST(JsonQuote, QuotesAndBackslashesAreEscaped) {
  EXPECT_EQ(json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
}

TEST(JsonQuote, LineBreaksAndTabsUseShortEscapes) {
  EXPECT_EQ(json_quote("one\ntwo\r\tthree"), "\"one\\ntwo\\r\\tthree\"");
}

TEST(JsonQuote, OtherControlBytesUseUnicodeEscapes) {
  EXPECT_EQ(json_quote(std::string("x\0y", 3)), "\"x\\u0000y\"");
  EXPECT_EQ(json_quote("\x1f\x7f"), "\"\\u001f\\u007f\"");  // TOML forbids a raw DEL; JSON accepts either
}

TEST(JsonQuote, Utf8PassesThroughUntouched) { EXPECT_EQ(json_quote("sm_90a \xc2\xb5s"), "\"sm_90a \xc2\xb5s\""); }

}  // namespace
}  // namespace kiln
