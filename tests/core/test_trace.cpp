// core/trace.h: events as Chrome-trace JSON, and one document from several ranks' bodies
// (the driver's --trace with 2+ ranks once joined them without a comma).
#include "core/trace.h"

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

TEST(Trace, DocumentJoinsRanksWithCommasAndSkipsEmptyOnes) {
  EXPECT_EQ(hddp::Trace::document({}), "{\"traceEvents\":[\n\n]}\n");
  EXPECT_EQ(hddp::Trace::document({"", ""}), "{\"traceEvents\":[\n\n]}\n");
  EXPECT_EQ(hddp::Trace::document({"{a}"}), "{\"traceEvents\":[\n{a}\n]}\n");
  EXPECT_EQ(hddp::Trace::document({"{a}", "", "{b},\n{c}"}), "{\"traceEvents\":[\n{a},\n{b},\n{c}\n]}\n");
}

}  // namespace
