// Frames that arrive corrupted, out of sequence, or for another operation
// are detected and never delivered as data.
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/thread_world.h"
#include "transport/frame.h"
#include "transport/memory_store.h"
#include "transport/tcp/tcp_transport.h"

namespace kolo {
namespace {

TEST(FrameHeader, ChecksEveryField) {
  const std::string peer = "rank 1 (test)";
  FrameHeader h = make_frame_header(7, 4096, 0xabc);
  EXPECT_TRUE(check_frame_header(h, 7, 4096, 0xabc, peer).is_ok());
  FrameHeader bad = h;
  bad.magic ^= 1;
  EXPECT_EQ(check_frame_header(bad, 7, 4096, 0xabc, peer).code(), Code::kTransport);
  Status seq = check_frame_header(h, 8, 4096, 0xabc, peer);
  EXPECT_EQ(seq.code(), Code::kTransport);
  EXPECT_NE(seq.message().find("out-of-sequence"), std::string::npos);
  EXPECT_EQ(check_frame_header(h, 7, 4096, 0xabd, peer).code(), Code::kMismatch);
  EXPECT_EQ(check_frame_header(h, 7, 4095, 0xabc, peer).code(), Code::kMismatch);
}

// Two TCP transports in one process, rank 0 and rank 1.
struct Link {
  explicit Link(bool checksum0, bool checksum1 = false, bool same = true) {
    TcpOptions o0, o1;
    o0.job_id = o1.job_id = 42;
    o0.checksum = checksum0;
    o1.checksum = same ? checksum0 : checksum1;
    EXPECT_TRUE(TcpTransport::create(&store, 0, 2, o0, &t[0]).is_ok());
    EXPECT_TRUE(TcpTransport::create(&store, 1, 2, o1, &t[1]).is_ok());
  }
  Status connect_both() {
    Status s1;
    std::thread other([&] { s1 = t[1]->connect(0, Deadline::after_seconds(5)); });
    Status s0 = t[0]->connect(1, Deadline::after_seconds(5));
    other.join();
    return s0.is_ok() ? s1 : s0;
  }
  MemoryStore store;
  std::unique_ptr<TcpTransport> t[2];
};

Status wait_done(Transport& t, const Request& r) {
  while (!r.done) KOLO_RETURN_IF_ERROR(t.progress(Deadline::after_seconds(5)));
  return Status::ok();
}

TEST(Checksum, PayloadChangedInFlightIsRejected) {
  Link link(/*checksum=*/true);
  ASSERT_TRUE(link.connect_both().is_ok());
  const size_t bytes = 1 << 20;
  std::vector<unsigned char> out(bytes, 7), in(bytes, 0);
  Request send, recv;
  ASSERT_TRUE(link.t[0]->post_send(1, out.data(), bytes, 5, &send).is_ok());
  out[bytes / 2] ^= 0x10;  // after the checksum was taken: a bit flipped on the way
  ASSERT_TRUE(link.t[1]->post_recv(0, in.data(), bytes, 5, &recv).is_ok());
  Status sent;
  std::thread sender([&] { sent = wait_done(*link.t[0], send); });
  Status got = wait_done(*link.t[1], recv);
  sender.join();
  EXPECT_TRUE(sent.is_ok()) << sent.to_string();
  EXPECT_EQ(got.code(), Code::kTransport) << got.to_string();
  EXPECT_NE(got.message().find("checksum mismatch"), std::string::npos) << got.message();
  EXPECT_FALSE(recv.done) << "a corrupt message must never be reported as received";
}

TEST(Checksum, IntactPayloadsPass) {
  Link link(true);
  ASSERT_TRUE(link.connect_both().is_ok());
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{4097}, size_t{3 << 20}}) {
    std::vector<unsigned char> out(bytes), in(bytes);
    for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(i * 31);
    Request send, recv;
    ASSERT_TRUE(link.t[0]->post_send(1, out.data(), bytes, 9, &send).is_ok());
    ASSERT_TRUE(link.t[1]->post_recv(0, in.data(), bytes, 9, &recv).is_ok());
    Status sent;
    std::thread sender([&] { sent = wait_done(*link.t[0], send); });
    ASSERT_TRUE(wait_done(*link.t[1], recv).is_ok());
    sender.join();
    ASSERT_TRUE(sent.is_ok());
    EXPECT_EQ(in, out);
  }
}

TEST(Checksum, RanksMustAgreeOnIt) {
  Link link(true, false, /*same=*/false);
  Status s = link.connect_both();
  EXPECT_FALSE(s.is_ok());
}

TEST(Checksum, CollectivesStayExact) {
  Config c = test_config(64 << 10);
  c.checksum = true;
  ThreadWorld w(3, c);
  const size_t count = 300001;
  w.run([&](int r) {
    std::vector<int64_t> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<int64_t>(i) * (r + 1);
    ASSERT_TRUE(w.comm(r).allreduce(in.data(), out.data(), count, DataType::kInt64,
                                    ReduceOp::kSum).is_ok());
    for (size_t i = 0; i < count; i += 101) EXPECT_EQ(out[i], static_cast<int64_t>(i) * 6);
  });
}

}  // namespace
}  // namespace kolo
