// The executor under every ring algorithm (run_pipeline), on a scripted
// transport that delivers what the left neighbour "sent" one message per
// progress() call: a reduce-receive lands in staging and is reduced into
// its destination with the local operand; a send that depends on a
// receive is posted only once that receive is finished (forwarding what it
// produced); the staging window bounds the reduce-receives in flight;
// kAvg's receives are finalized; the mark time is written; a transient
// result is sent from a buffer of the executor's own and never written to
// its destination (unless no buffer is free, or the unit does not qualify);
// and a receive that never comes ends with the transport's error.
#include "collectives/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

namespace kolo {
namespace {

class Scripted final : public Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const char* name() const override { return "scripted"; }
  Status connect(int, Deadline) override { return Status::ok(); }

  Status post_send(int, const void* data, size_t bytes, uint64_t, Request* request) override {
    const auto* b = static_cast<const unsigned char*>(data);
    sent.emplace_back(b, b + bytes);
    receives_finished_at_send.push_back(receives_finished);
    if (sends_finish_after > 0) {
      unfinished_sends.push_back({request, sends_finish_after});
    } else {
      request->done = true;
    }
    return Status::ok();
  }
  Status post_recv(int, void* data, size_t bytes, uint64_t, Request* request) override {
    request->data = data;
    request->bytes = bytes;
    pending.push_back(request);
    most_pending = std::max(most_pending, pending.size());
    return Status::ok();
  }
  // One message from the left per call, into the oldest posted receive.
  // A send posted before it finishes in the sends_finish_after-th call.
  Status progress(Deadline) override {
    for (auto& [request, calls_left] : unfinished_sends) {
      if (--calls_left == 0) request->done = true;
    }
    unfinished_sends.erase(std::remove_if(unfinished_sends.begin(), unfinished_sends.end(),
                                          [](const auto& u) { return u.second == 0; }),
                           unfinished_sends.end());
    if (pending.empty()) return Status::ok();
    if (incoming.empty()) return timeout_error("scripted: nothing more will come");
    Request* r = pending.front();
    pending.pop_front();
    EXPECT_EQ(r->bytes, incoming.front().size());
    std::memcpy(r->data, incoming.front().data(), r->bytes);
    incoming.pop_front();
    r->done = true;
    ++receives_finished;
    return Status::ok();
  }
  void abort() override {}
  void interrupt() override {}

  std::deque<std::vector<unsigned char>> incoming;  // what the left neighbour sends, in order
  std::vector<std::vector<unsigned char>> sent;
  std::vector<size_t> receives_finished_at_send;
  std::deque<Request*> pending;
  int sends_finish_after = 0;  // progress calls; 0: at once
  std::vector<std::pair<Request*, int>> unfinished_sends;
  size_t most_pending = 0;
  size_t receives_finished = 0;
};

std::vector<unsigned char> bytes_of(const std::vector<float>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> floats_of(const std::vector<unsigned char>& b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

Pipeline pipeline_over(Scripted* t) {
  Pipeline p;
  p.transport = t;
  p.left = 1;
  p.right = 1;
  p.tag = 7;
  return p;
}

TEST(Pipeline, ReducesStagedReceivesAndForwardsOnlyWhatIsFinished) {
  Scripted t;
  HostMemory memory;
  const int units = 3;
  std::vector<std::vector<float>> local(units), dest(units, std::vector<float>(4, -1));
  Pipeline p = pipeline_over(&t);
  std::vector<float> first = {100, 200, 300, 400};
  p.sends.push_back({first.data(), first.size() * sizeof(float), -1});
  for (int k = 0; k < units; ++k) {
    local[k] = {1.f * k, 2.f * k, 3.f * k, 4.f * k};
    t.incoming.push_back(bytes_of({10.f + k, 20.f + k, 30.f + k, 40.f + k}));
    p.recvs.push_back({dest[k].data(), 4 * sizeof(float), local[k].data(), 4, false});
    p.sends.push_back({dest[k].data(), 4 * sizeof(float), k});  // forwards what receive k produced
  }
  ASSERT_TRUE(run_pipeline(p, PipelineOptions{}, &memory).is_ok());
  for (int k = 0; k < units; ++k) {
    EXPECT_EQ(dest[k], (std::vector<float>{10.f + 2 * k, 20.f + 3 * k, 30.f + 4 * k, 40.f + 5 * k})) << k;
  }
  ASSERT_EQ(t.sent.size(), static_cast<size_t>(units + 1));
  EXPECT_EQ(floats_of(t.sent[0]), first);
  for (int k = 0; k < units; ++k) {
    EXPECT_EQ(floats_of(t.sent[k + 1]), dest[k]) << k;
    EXPECT_GE(t.receives_finished_at_send[k + 1], static_cast<size_t>(k + 1)) << "send " << k + 1 << " went early";
  }
  EXPECT_EQ(t.receives_finished_at_send[0], 0u);  // no dependency: posted at once
}

TEST(Pipeline, TheStagingWindowBoundsReduceReceivesInFlight) {
  for (size_t slots : {size_t{1}, size_t{2}, size_t{4}}) {
    Scripted t;
    HostMemory memory;
    const int units = 10;
    std::vector<std::vector<float>> local(units, std::vector<float>(2, 1)), dest(units, std::vector<float>(2));
    Pipeline p = pipeline_over(&t);
    for (int k = 0; k < units; ++k) {
      t.incoming.push_back(bytes_of({1.f * k, 2.f * k}));
      p.recvs.push_back({dest[k].data(), 2 * sizeof(float), local[k].data(), 2, false});
    }
    PipelineOptions options;
    options.staging_slots = slots;
    ASSERT_TRUE(run_pipeline(p, options, &memory).is_ok());
    EXPECT_EQ(t.most_pending, slots);
    for (int k = 0; k < units; ++k) EXPECT_EQ(dest[k], (std::vector<float>{1.f + k, 1.f + 2 * k})) << k;
  }
  // Plain receives land in their destination and take no slot.
  Scripted t;
  HostMemory memory;
  std::vector<std::vector<float>> dest(6, std::vector<float>(1));
  Pipeline p = pipeline_over(&t);
  for (int k = 0; k < 6; ++k) {
    t.incoming.push_back(bytes_of({1.f * k}));
    p.recvs.push_back({dest[k].data(), sizeof(float), nullptr, 1, false});
  }
  PipelineOptions one_slot;
  one_slot.staging_slots = 1;
  ASSERT_TRUE(run_pipeline(p, one_slot, &memory).is_ok());
  EXPECT_EQ(t.most_pending, 6u);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(dest[k][0], 1.f * k);
}

TEST(Pipeline, AnAverageIsFinalizedAndTheMarkIsWritten) {
  Scripted t;
  HostMemory memory;
  std::vector<float> local = {2, 4}, dest0(2), dest1(2);
  Pipeline p = pipeline_over(&t);
  p.op = ReduceOp::kAvg;
  p.divisor = 4;
  t.incoming.push_back(bytes_of({6, 12}));
  t.incoming.push_back(bytes_of({8, 8}));
  p.recvs.push_back({dest0.data(), 2 * sizeof(float), local.data(), 2, false});  // a partial sum: kept whole
  p.recvs.push_back({dest1.data(), 2 * sizeof(float), local.data(), 2, true});   // the last: divided
  std::chrono::steady_clock::time_point mark{};
  p.mark_recv = 0;
  p.mark_time = &mark;
  const auto before = std::chrono::steady_clock::now();
  ASSERT_TRUE(run_pipeline(p, PipelineOptions{}, &memory).is_ok());
  EXPECT_EQ(dest0, (std::vector<float>{8, 16}));
  EXPECT_EQ(dest1, (std::vector<float>{2.5f, 3}));
  EXPECT_GE(mark, before);
}

// Receive k (transient) reduces 10 + k with 1 + k; send k forwards it.
Pipeline transient_chain(Scripted* t, int units, std::vector<std::vector<float>>* dest,
                         std::vector<std::vector<float>>* local) {
  Pipeline p = pipeline_over(t);
  dest->assign(units, std::vector<float>(2, -1));
  local->assign(units, std::vector<float>(2));
  for (int k = 0; k < units; ++k) {
    (*local)[k] = {1.f + k, 1.f + k};
    t->incoming.push_back(bytes_of({10.f + k, 20.f + k}));
    RecvUnit u{(*dest)[k].data(), 2 * sizeof(float), (*local)[k].data(), 2, false};
    u.transient = true;
    p.recvs.push_back(u);
    p.sends.push_back({(*dest)[k].data(), 2 * sizeof(float), k});
  }
  return p;
}

TEST(Pipeline, ATransientResultIsSentFromABufferOfItsOwnAndNeverStored) {
  Scripted t;
  HostMemory memory;
  std::vector<std::vector<float>> dest, local;
  Pipeline p = transient_chain(&t, 6, &dest, &local);
  ASSERT_TRUE(run_pipeline(p, PipelineOptions{}, &memory).is_ok());
  ASSERT_EQ(t.sent.size(), 6u);
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(floats_of(t.sent[k]), (std::vector<float>{11.f + 2 * k, 21.f + 2 * k})) << k;
    EXPECT_EQ(dest[k], (std::vector<float>{-1, -1})) << "receive " << k << " wrote its destination";
  }
}

TEST(Pipeline, ATransientResultGoesToItsDestinationWhileNoBufferIsFree) {
  // One buffer; a send finishes only in the second progress call after it
  // was posted, after the next receive has arrived: the first result is
  // kept, the second is not (its buffer still waits for the first send),
  // the third is kept again.
  Scripted t;
  t.sends_finish_after = 2;
  HostMemory memory;
  std::vector<std::vector<float>> dest, local;
  Pipeline p = transient_chain(&t, 3, &dest, &local);
  PipelineOptions one_slot;
  one_slot.staging_slots = 1;
  ASSERT_TRUE(run_pipeline(p, one_slot, &memory).is_ok());
  ASSERT_EQ(t.sent.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(floats_of(t.sent[k]), (std::vector<float>{11.f + 2 * k, 21.f + 2 * k})) << k;
  }
  EXPECT_EQ(dest[0], (std::vector<float>{-1, -1}));
  EXPECT_EQ(dest[1], (std::vector<float>{13, 23}));
  EXPECT_EQ(dest[2], (std::vector<float>{-1, -1}));
}

// Staging memory that has room for the receive slots only.
class TightMemory final : public HostMemory {
 public:
  explicit TightMemory(size_t room) : room_(room) {}
  void* staging(size_t bytes) override { return bytes > room_ ? nullptr : HostMemory::staging(bytes); }

 private:
  size_t room_;
};

TEST(Pipeline, WithoutRoomForTheirBuffersTransientResultsGoToTheirDestinations) {
  Scripted t;
  TightMemory memory(4 * 2 * sizeof(float));  // the four staging slots, no more
  std::vector<std::vector<float>> dest, local;
  Pipeline p = transient_chain(&t, 6, &dest, &local);
  ASSERT_TRUE(run_pipeline(p, PipelineOptions{}, &memory).is_ok());
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(floats_of(t.sent[k]), (std::vector<float>{11.f + 2 * k, 21.f + 2 * k})) << k;
    EXPECT_EQ(dest[k], (std::vector<float>{11.f + 2 * k, 21.f + 2 * k})) << k;
  }
}

TEST(Pipeline, OnlyAResultThatOneSendForwardsWholeIsKeptAside) {
  // Each case breaks one condition of RecvUnit::transient; its result must
  // then be in its destination as for any reduce-receive.
  enum Case { kNoForwarder, kTwoReaders, kPartOfIt, kFinalized };
  for (Case c : {kNoForwarder, kTwoReaders, kPartOfIt, kFinalized}) {
    Scripted t;
    HostMemory memory;
    std::vector<float> local = {1, 2}, dest = {-1, -1};
    Pipeline p = pipeline_over(&t);
    p.op = ReduceOp::kAvg;
    p.divisor = 1;
    t.incoming.push_back(bytes_of({10, 20}));
    RecvUnit u{dest.data(), 2 * sizeof(float), local.data(), 2, c == kFinalized};
    u.transient = true;
    p.recvs.push_back(u);
    if (c != kNoForwarder) p.sends.push_back({dest.data(), (c == kPartOfIt ? 1 : 2) * sizeof(float), 0});
    if (c == kTwoReaders) p.sends.push_back({dest.data(), 2 * sizeof(float), 0});
    ASSERT_TRUE(run_pipeline(p, PipelineOptions{}, &memory).is_ok()) << c;
    EXPECT_EQ(dest, (std::vector<float>{11, 22})) << c;
  }
}

TEST(Pipeline, AReceiveThatNeverComesEndsWithTheTransportsError) {
  Scripted t;
  HostMemory memory;
  std::vector<float> local = {1}, dest(1);
  Pipeline p = pipeline_over(&t);
  t.incoming.push_back(bytes_of({1}));
  p.recvs.push_back({dest.data(), sizeof(float), local.data(), 1, false});
  p.recvs.push_back({dest.data(), sizeof(float), local.data(), 1, false});  // never sent
  const Status s = run_pipeline(p, PipelineOptions{}, &memory);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_NE(s.message().find("nothing more will come"), std::string::npos) << s.message();
  EXPECT_EQ(dest[0], 2.f);  // the first was reduced before the second failed
}

TEST(Pipeline, SegmentIsTheSettingOrSizedByTheCacheAndTheCores) {
  EXPECT_EQ(pipeline_segment_bytes(8192, true, 1 << 20), 8192u);
  EXPECT_EQ(pipeline_segment_bytes(8192, false, 1 << 20), 8192u);
  EXPECT_EQ(pipeline_segment_bytes(0, true, 1 << 20), 512u << 10);      // half the L2
  EXPECT_EQ(pipeline_segment_bytes(0, true, 2 << 20), 1u << 20);
  EXPECT_EQ(pipeline_segment_bytes(0, true, 256 << 10), 256u << 10);    // at least 256 KiB
  EXPECT_EQ(pipeline_segment_bytes(0, true, 32u << 20), 2u << 20);      // at most 2 MiB
  EXPECT_EQ(pipeline_segment_bytes(0, true, 0), 512u << 10);            // L2 unknown: 1 MiB assumed
  EXPECT_EQ(pipeline_segment_bytes(0, false, 1 << 20), 2u << 20);       // ranks share cores
  EXPECT_EQ(pipeline_cache_bytes(1 << 20), 512u << 10);
  EXPECT_EQ(pipeline_cache_bytes(32u << 20), 2u << 20);
  EXPECT_EQ(pipeline_cache_bytes(0), 512u << 10);
}

}  // namespace
}  // namespace kolo
