// The shared-memory transport as a kind (transport/kind.h): ranks of one
// host, when /dev/shm has room for their rings and arenas.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>

#include "transport/handshake.h"
#include "transport/kind.h"
#include "transport/shm/shm_arena.h"
#include "transport/shm/shm_transport.h"

namespace kolo {
namespace {

class ShmKind final : public TransportKind {
 public:
  const char* name() const override { return "shm"; }
  bool shares_memory() const override { return true; }
  // Measured on the machines in docs/performance.md.
  LinkCost link_cost(bool) const override { return {2.5e-6, 12e9}; }

  // The bytes free in this rank's /dev/shm.
  Status offer(const TransportContext&, std::string* offer, std::unique_ptr<DirectTransport>*) const override {
    struct statvfs vfs {};
    if (::statvfs("/dev/shm", &vfs) != 0 || ::access("/dev/shm", W_OK) != 0) {
      return unsupported("no writable /dev/shm");
    }
    *offer = std::to_string(static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize);
    return Status::ok();
  }

  bool reaches(const Peer& a, const Peer& b, int ranks_on_host, std::string* why_not) const override {
    if (a.host != b.host) {
      *why_not = "another machine";
      return false;
    }
    if (!a.offer || !b.offer) {
      *why_not = "no writable /dev/shm";
      return false;
    }
    // Room for a ring each way between every two ranks of the machine (a
    // communicator connects fewer pairs, lazily; the rest is for the
    // engine's and splits' communicators), and the allreduce arenas of the
    // world and the engine's communicator: linear in the ranks, since the
    // rings shrink as they multiply.
    const uint64_t rings = static_cast<uint64_t>(ranks_on_host) * (ranks_on_host - 1) *
                           ShmRingShape::for_ranks_on_host(ranks_on_host).segment_bytes();
    const uint64_t need = rings + 2 * ShmArena::segment_bytes(ranks_on_host, ShmArenaOptions{}.slot_bytes);
    const uint64_t have = std::min(std::strtoull(a.offer->c_str(), nullptr, 10),
                                   std::strtoull(b.offer->c_str(), nullptr, 10));
    if (have < need) {
      *why_not = "/dev/shm has " + std::to_string(have >> 20) + " MiB free and " + std::to_string(ranks_on_host) +
                 " ranks here need " + std::to_string((need + (1 << 20) - 1) >> 20) +
                 " MiB (in a container, raise it: docker run --shm-size=" +
                 std::to_string(((need >> 20) / 256 + 1) * 256) + "m)";
      return false;
    }
    return true;
  }

  Status open(const TransportContext& c, std::unique_ptr<DirectTransport>* out) const override {
    ShmOptions options;
    options.ring = ShmRingShape::for_ranks_on_host(c.ranks_on_host);
    options.store_prefix = c.store_prefix + "shm/";
    options.job_id = job_id_from_name(c.job_name + c.store_prefix);
    std::unique_ptr<ShmTransport> t;
    KOLO_RETURN_IF_ERROR(ShmTransport::create(c.store, c.rank, c.size, options, &t));
    *out = std::move(t);
    return Status::ok();
  }

  Status open_arena(const TransportContext& c, int spin_us, bool yield, Deadline deadline,
                    std::unique_ptr<SharedArena>* out) const override {
    ShmArenaOptions options;
    options.job_id = job_id_from_name(c.job_name + c.store_prefix);
    options.store_key = c.store_prefix + "shm/arena";
    options.spin_us = spin_us;
    options.yield = yield;
    std::unique_ptr<ShmArena> arena;
    KOLO_RETURN_IF_ERROR(ShmArena::create(c.store, c.rank, c.size, options, deadline, &arena));
    *out = std::move(arena);
    return Status::ok();
  }
};

const TransportRegistration registration(10, std::make_unique<ShmKind>());

}  // namespace
}  // namespace kolo
