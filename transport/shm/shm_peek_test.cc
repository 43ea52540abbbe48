// Receiving from any peer over shared memory: the peek conformance suite
// (transport/peek_conformance.h) on the default rings.
#include <memory>

#include "transport/peek_conformance.h"
#include "transport/shm/shm_transport.h"

namespace kolo {
namespace {

Status make_shm(Store* store, int rank, int size, std::unique_ptr<Transport>* out) {
  ShmOptions o;
  o.job_id = 0x5ee01;
  std::unique_ptr<ShmTransport> t;
  KOLO_RETURN_IF_ERROR(ShmTransport::create(store, rank, size, o, &t));
  *out = std::move(t);
  return Status::ok();
}

INSTANTIATE_TEST_SUITE_P(Shm, PeekConformance, ::testing::Values(PeekTransportFactory(make_shm)));

}  // namespace
}  // namespace kolo
