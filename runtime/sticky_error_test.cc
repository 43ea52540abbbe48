// A communicator's failure on its own (sticky_error.h): the first failure
// is kept and every later call reports it; the job's first failure comes
// from the store, first writer wins, and a rank whose store does not answer
// says that rank 0 is probably gone.
#include "runtime/sticky_error.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transport/memory_store.h"

namespace kolo {
namespace {

TEST(StickyError, KeepsTheFirstFailureAndEveryCallReportsIt) {
  StickyError e;
  EXPECT_FALSE(e.failed());
  EXPECT_TRUE(e.check().is_ok());
  EXPECT_TRUE(e.get().is_ok());
  Status kept = e.keep(peer_lost("rank 2 left"));
  EXPECT_EQ(kept.code(), Code::kPeerLost);
  kept = e.keep(timeout_error("later"));
  EXPECT_EQ(kept.code(), Code::kPeerLost);  // the first stays
  EXPECT_TRUE(e.failed());
  EXPECT_EQ(e.get().message(), "rank 2 left");
  EXPECT_EQ(e.check().code(), Code::kPeerLost);
  EXPECT_EQ(e.check().message(), "communicator failed earlier: rank 2 left");
}

TEST(FirstFailure, TheFirstRankToReportIsEveryRanksRootCause) {
  MemoryStore store;
  FlightRecorder recorder(8);
  Status first = reconcile_with_first_failure(&store, 3, timeout_error("rank 3 waited for rank 1"), 5, &recorder);
  EXPECT_EQ(first.code(), Code::kTimeout);
  EXPECT_EQ(first.message(), "rank 3 waited for rank 1");  // its own: nobody came before
  Status later = reconcile_with_first_failure(&store, 0, peer_lost("rank 0 lost rank 3"), 5, nullptr);
  EXPECT_EQ(later.code(), Code::kTimeout);  // the root cause's code
  EXPECT_EQ(later.message(), "rank 0 lost rank 3; the job's first failure was on rank 3: rank 3 waited for rank 1");
  // The first rank asking again still gets its own.
  EXPECT_EQ(reconcile_with_first_failure(&store, 3, timeout_error("again"), 5, nullptr).message(), "again");
}

// A store whose host is gone: every call fails.
class GoneStore final : public Store {
 public:
  Status set(const std::string&, const std::string&) override { return gone(); }
  Status set_if_absent(const std::string&, const std::string&, Deadline, std::string*) override { return gone(); }
  Status get(const std::vector<std::string>&, Deadline, std::vector<std::string>*) override { return gone(); }

 private:
  static Status gone() { return peer_lost("connection refused talking to the rendezvous store"); }
};

TEST(FirstFailure, AStoreThatDoesNotAnswerPointsAtRankZero) {
  GoneStore store;
  Status s = reconcile_with_first_failure(&store, 2, peer_lost("rank 2 lost its ring"), 5, nullptr);
  EXPECT_EQ(s.code(), Code::kPeerLost);
  EXPECT_NE(s.message().find("rank 2 lost its ring; the rendezvous store on rank 0 is unreachable too"),
            std::string::npos)
      << s.message();
  // Rank 0 serves the store: it says nothing of itself.
  EXPECT_EQ(reconcile_with_first_failure(&store, 0, peer_lost("mine"), 5, nullptr).message(), "mine");
}

}  // namespace
}  // namespace kolo
