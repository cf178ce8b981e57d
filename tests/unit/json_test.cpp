// kiln's one JSON writer and its quoting rule, behind every JSON report, OCI manifest and TOML
// diagnostic kiln writes: whatever a kernel name, a file name or an error message holds, the
// output must still parse, and reading it back must give the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "core/json.hpp"

namespace kiln::json {
namespace {

TEST(JsonQuote, PlainTextIsWrappedInQuotes) { EXPECT_EQ(quote("matmul_relu"), "\"matmul_relu\""); }

TEST(JsonQuote, QuotesAndBackslashesAreEscaped) { EXPECT_EQ(quote("a\"b\\c"), "\"a\\\"b\\\\c\""); }

TEST(JsonQuote, LineBreaksAndTabsUseShortEscapes) {
  EXPECT_EQ(quote("one\ntwo\r\tthree"), "\"one\\ntwo\\r\\tthree\"");
}

TEST(JsonQuote, OtherControlBytesUseUnicodeEscapes) {
  EXPECT_EQ(quote(std::string("x\0y", 3)), "\"x\\u0000y\"");
  EXPECT_EQ(quote("\x1f\x7f"), "\"\\u001f\\u007f\"");  // TOML forbids a raw DEL; JSON accepts either
}

TEST(JsonQuote, Utf8PassesThroughUntouched) {
  EXPECT_EQ(quote("sm_90a \xc2\xb5s \xe2\x82\xac \xf0\x9f\x94\xa5"), "\"sm_90a \xc2\xb5s \xe2\x82\xac \xf0\x9f\x94\xa5\"");
}

TEST(JsonQuote, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  // A lone continuation byte, a truncated sequence, an overlong '/', a UTF-16 surrogate.
  EXPECT_EQ(quote("a\x80z"), "\"a\\ufffdz\"");
  EXPECT_EQ(quote("\xe2\x82"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(quote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(quote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
}

TEST(JsonWriter, NestedDocumentReadsBackThroughTheReader) {
  Writer w;
  w.begin_object()
      .field("file", std::string("we\"ird\n.kiln"))
      .field("ok", false)
      .field("size", std::uint64_t{18446744073709551615ull})
      .field("sequence", std::int64_t{-3})
      .key("run")
      .begin_array()
      .begin_object()
      .field("kernel", "matmul")
      .end_object()
      .begin_object()
      .end_object()
      .end_array()
      .key("empty")
      .begin_array()
      .end_array()
      .end_object();
  EXPECT_EQ(w.str(),
            "{\"file\":\"we\\\"ird\\n.kiln\",\"ok\":false,\"size\":18446744073709551615,\"sequence\":-3,"
            "\"run\":[{\"kernel\":\"matmul\"},{}],\"empty\":[]}");
  // The reader (integers up to 18 digits) reads everything but the uint64 maximum back.
  Writer small;
  small.begin_object().field("file", "we\"ird\n.kiln").field("n", 42).key("a").begin_array().value("x").end_array().end_object();
  Value v = parse(small.str(), "test");
  ASSERT_NE(v.get_string("file"), nullptr);
  EXPECT_EQ(*v.get_string("file"), "we\"ird\n.kiln");
  EXPECT_EQ(*v.get_number("n"), 42);
  ASSERT_EQ(v.get("a")->array.size(), 1u);
}

TEST(JsonWriter, DoublesRoundTripAndNonFiniteBecomesNull) {
  Writer w;
  w.begin_array().value(0.1).value(1e300).value(std::nan("")).value(HUGE_VAL).value(2.0).end_array();
  EXPECT_EQ(w.str(), "[0.1,1e+300,null,null,2]");
}

TEST(JsonWriter, MisuseThrowsInsteadOfWritingMalformedJson) {
  EXPECT_THROW(Writer().begin_object().value(1), std::logic_error);        // value without a key
  EXPECT_THROW(Writer().begin_array().key("k"), std::logic_error);         // key in an array
  EXPECT_THROW(Writer().begin_object().key("a").key("b"), std::logic_error);
  EXPECT_THROW(Writer().begin_object().end_array(), std::logic_error);
  EXPECT_THROW(Writer().begin_object().key("a").end_object(), std::logic_error);
  EXPECT_THROW(Writer().value(1).value(2), std::logic_error);              // two documents
  Writer open;
  open.begin_object();
  EXPECT_THROW(open.str(), std::logic_error);
}

}  // namespace
}  // namespace kiln::json

// Numbers with a fraction or an exponent read as `real` (RFC 8259's grammar, without the locale);
// a reader that wants an integer (`get_number`) does not take them.
namespace kiln {
namespace {

TEST(JsonReader, FractionsAndExponentsReadAsRealsNotIntegers) {
  json::Value v = json::parse(R"({"a": 0.00390625, "b": -1.5e-3, "c": 2E+2, "d": 7})", "doc");
  EXPECT_EQ(v.get("a")->type, json::Value::Type::real);
  EXPECT_EQ(v.get("a")->real, 0.00390625);
  EXPECT_EQ(v.get("b")->real, -1.5e-3);
  EXPECT_EQ(v.get("c")->real, 200.0);
  EXPECT_EQ(v.get_number("a"), nullptr);
  EXPECT_EQ(*v.get_number("d"), 7);
  for (const char* bad : {"1.", ".5", "01.5", "1e", "1e+", "-.5", "1.5.2"}) {
    EXPECT_THROW(json::parse(bad, "doc"), kiln::Failure) << bad;
  }
}

}  // namespace
}  // namespace kiln
