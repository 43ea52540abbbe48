// Receiving from any peer over TCP: the peek conformance suite
// (transport/peek_conformance.h) with one socket per peer and with two,
// whose messages alternate between the sockets, and sealed (KOLO_ENCRYPT:
// a peek opens the next header record without moving past it).
#include <memory>

#include "transport/peek_conformance.h"
#include "transport/tcp/tcp_transport.h"

namespace kolo {
namespace {

PeekTransportFactory tcp(uint64_t job_id, int streams, bool encrypt = false) {
  return [job_id, streams, encrypt](Store* store, int rank, int size, std::unique_ptr<Transport>* out) {
    TcpOptions o;
    o.job_id = job_id;
    o.streams_per_peer = streams;
    o.secret = "peek";
    o.encrypt = encrypt;
    std::unique_ptr<TcpTransport> t;
    KOLO_RETURN_IF_ERROR(TcpTransport::create(store, rank, size, o, &t));
    *out = std::move(t);
    return Status::ok();
  };
}

INSTANTIATE_TEST_SUITE_P(OneSocket, PeekConformance, ::testing::Values(tcp(0x7ee01, 1)));
INSTANTIATE_TEST_SUITE_P(TwoSockets, PeekConformance, ::testing::Values(tcp(0x7ee02, 2)));
INSTANTIATE_TEST_SUITE_P(Encrypted, PeekConformance, ::testing::Values(tcp(0x7ee03, 2, true)));

}  // namespace
}  // namespace kolo
