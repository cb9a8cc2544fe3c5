// core/trace.h: events as Chrome-trace JSON, and one document from several ranks' bodies
// (the driver's --trace with 2+ ranks once joined them without a comma).
#include <hddp/core/trace.h>

#include <gtest/gtest.h>

namespace {

TEST(Trace, EventsOfOneRank) {
  hddp::Trace t(3);
  const auto t0 = hddp::Trace::Clock::now();
  t.add("forward", "compute", t0, t0, 0);
  t.add("allreduce bucket 0", "comm", t0, t0, 1);
  const std::string body = t.events_json();
  EXPECT_EQ(t.size(), 2u);
  EXPECT_NE(body.find("\"name\":\"forward\",\"cat\":\"compute\",\"ph\":\"X\""), std::string::npos);
  EXPECT_NE(body.find("\"pid\":3,\"tid\":1}"), std::string::npos);
  EXPECT_NE(body.find("},\n{"), std::string::npos);  // two events, one comma between them
  EXPECT_EQ(body.front(), '{');
  EXPECT_EQ(body.back(), '}');
}

// Names are JSON strings (nlohmann-json writes them): quotes, backslashes and control
// characters are escaped, times in us to the ns.
TEST(Trace, NamesAreEscapedAndTimesRounded) {
  hddp::Trace t(0);
  const auto t0 = hddp::Trace::Clock::now();
  t.add("a \"quoted\" \\ name\n", "compute", t0, t0 + std::chrono::nanoseconds(1500), 0);
  const std::string body = t.events_json();
  EXPECT_NE(body.find(R"("name":"a \"quoted\" \\ name\n")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("dur":1.5,)"), std::string::npos) << body;
}

TEST(Trace, DocumentJoinsRanksWithCommasAndSkipsEmptyOnes) {
  EXPECT_EQ(hddp::Trace::document({}), "{\"traceEvents\":[\n\n]}\n");
  EXPECT_EQ(hddp::Trace::document({"", ""}), "{\"traceEvents\":[\n\n]}\n");
  EXPECT_EQ(hddp::Trace::document({"{a}"}), "{\"traceEvents\":[\n{a}\n]}\n");
  EXPECT_EQ(hddp::Trace::document({"{a}", "", "{b},\n{c}"}), "{\"traceEvents\":[\n{a},\n{b},\n{c}\n]}\n");
}

}  // namespace
