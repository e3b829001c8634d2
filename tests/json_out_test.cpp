// The JSON the viewer writes as it goes (viewer/json_out.hpp) reads back as the values written:
// commas and colons in nested containers, integers of every width, doubles at full precision
// (null where not finite, as nlohmann::json writes them), strings escaped (control characters,
// quotes, bytes that are not UTF-8); and a writer used out of order says so rather than writing
// JSON that does not parse.
#include "viewer/json_out.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace chronicle::viewer {
namespace {

TEST(JsonOut, ReadsBackAsWhatWasWritten) {
  JsonOut out;
  out.begin_object().field("begin", uint64_t{18'446'744'073'709'551'615u}).field("signed", int64_t{-9'000'000'000});
  out.field("small", uint32_t{7}).field("minus", -1).field("yes", true).field("no", false);
  out.key("empty").begin_array().end_array().key("nested").begin_array();
  out.begin_array().value(1).value(2.5).end_array().begin_object().end_object().null().end_array();
  out.field("third", 1.0 / 3.0).field("tiny", 5e-324).field("huge", 1e300).field("nan", std::nan(""));
  out.field("infinite", std::numeric_limits<double>::infinity());
  out.field("text", std::string("a \"quoted\" \\ line\nwith\ta \x01 control")).field("bytes", "caf\xc3\xa9 \xff");
  out.key("names").begin_object().field("12", "twelve").field("", "").end_object().end_object();
  const nlohmann::json read = nlohmann::json::parse(out.take());

  EXPECT_EQ(read["begin"].get<uint64_t>(), 18'446'744'073'709'551'615u);
  EXPECT_EQ(read["signed"].get<int64_t>(), -9'000'000'000);
  EXPECT_EQ(read["small"], 7);
  EXPECT_EQ(read["minus"], -1);
  EXPECT_EQ(read["yes"], true);
  EXPECT_EQ(read["no"], false);
  EXPECT_EQ(read["empty"], nlohmann::json::array());
  EXPECT_EQ(read["nested"], nlohmann::json::parse(R"([[1, 2.5], {}, null])"));
  EXPECT_EQ(read["third"].get<double>(), 1.0 / 3.0);
  EXPECT_EQ(read["tiny"].get<double>(), 5e-324);
  EXPECT_EQ(read["huge"].get<double>(), 1e300);
  EXPECT_TRUE(read["nan"].is_null());
  EXPECT_TRUE(read["infinite"].is_null());
  EXPECT_EQ(read["text"], "a \"quoted\" \\ line\nwith\ta \x01 control");
  EXPECT_EQ(read["bytes"], "caf\xc3\xa9 \xef\xbf\xbd");  // the stray byte is U+FFFD
  EXPECT_EQ(read["names"], nlohmann::json::parse(R"({"12": "twelve", "": ""})"));
}

TEST(JsonOut, SaysWhenUsedOutOfOrder) {
  EXPECT_THROW(JsonOut().begin_array().end_object(), std::logic_error);
  EXPECT_THROW(JsonOut().end_array(), std::logic_error);
  EXPECT_THROW(JsonOut().begin_object().key("a").key("b"), std::logic_error);
  EXPECT_THROW(JsonOut().begin_object().key("a").end_object(), std::logic_error);
  EXPECT_THROW(JsonOut().begin_array().take(), std::logic_error);
  EXPECT_THROW(JsonOut().begin_object().key("a").take(), std::logic_error);
}

}  // namespace
}  // namespace chronicle::viewer
