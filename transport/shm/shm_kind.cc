// The shared-memory transport as a kind (transport/kind.h): ranks of one
// host, when /dev/shm has room for their rings and arenas.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "transport/handshake.h"
#include "transport/kind.h"
#include "common/log.h"
#include "transport/shm/shm_arena.h"
#include "transport/shm/shm_fit.h"
#include "transport/shm/shm_transport.h"

namespace kolo {
namespace {

// This rank's /dev/shm: its free bytes and its size; false if it has none
// it may write.
bool dev_shm(uint64_t* free, uint64_t* total) {
  struct statvfs vfs {};
  if (::statvfs("/dev/shm", &vfs) != 0 || ::access("/dev/shm", W_OK) != 0) return false;
  *free = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  *total = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  return true;
}

// An offer's "FREE TOTAL" (one number, from a rank of an older kolo: both).
void parse(const std::string& offer, uint64_t* free, uint64_t* total) {
  char* end = nullptr;
  *free = std::strtoull(offer.c_str(), &end, 10);
  *total = *end != '\0' ? std::strtoull(end, nullptr, 10) : *free;
}

// The shapes of a communicator's rings and arena on this machine.
ShmFit fitted(const TransportContext& c) {
  uint64_t free = 0, total = 0;
  if (!dev_shm(&free, &total)) return fit_shared_memory(c.ranks_on_host, UINT64_MAX);
  return fit_shared_memory(c.ranks_on_host, shm_budget(total));
}

class ShmKind final : public TransportKind {
 public:
  const char* name() const override { return "shm"; }
  bool shares_memory() const override { return true; }
  // Measured on the machines in docs/performance.md.
  LinkCost link_cost(bool) const override { return {2.5e-6, 12e9}; }

  // The bytes free in this rank's /dev/shm, and its size: "FREE TOTAL".
  Status offer(const TransportContext&, std::string* offer, std::unique_ptr<DirectTransport>*) const override {
    uint64_t free = 0, total = 0;
    if (!dev_shm(&free, &total)) return unsupported("no writable /dev/shm");
    *offer = std::to_string(free) + " " + std::to_string(total);
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
    // world and the engine's communicator, their slots shrunk to fit the
    // budget of /dev/shm's size (shm_fit.h): the same shapes every rank
    // of the machine computes in open().
    uint64_t free_a = 0, total_a = 0, free_b = 0, total_b = 0;
    parse(*a.offer, &free_a, &total_a);
    parse(*b.offer, &free_b, &total_b);
    const uint64_t have = std::min(free_a, free_b);
    const ShmFit fit = fit_shared_memory(ranks_on_host, shm_budget(std::min(total_a, total_b)));
    if (!fit.fits || fit.bytes > have) {
      *why_not = "/dev/shm has " + std::to_string(have >> 20) + " MiB free and " + std::to_string(ranks_on_host) +
                 " ranks here need " + std::to_string((fit.bytes + (1 << 20) - 1) >> 20) +
                 " MiB even with the smallest rings (in a container, raise it: docker run --shm-size=" +
                 std::to_string(((fit.bytes * 4 / 3 >> 20) / 256 + 1) * 256) + "m)";
      return false;
    }
    return true;
  }

  Status open(const TransportContext& c, std::unique_ptr<DirectTransport>* out) const override {
    const ShmFit fit = fitted(c);
    if (fit.shrunk && c.rank == 0 && c.store_prefix.empty()) {
      KOLO_INFO("shared memory sized to /dev/shm: " << fit.describe(c.ranks_on_host));
    }
    ShmOptions options;
    options.ring = fit.ring;
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
    options.slot_bytes = fitted(c).arena_slot_bytes;
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
