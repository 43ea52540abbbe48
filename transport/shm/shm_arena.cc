#include "transport/shm/shm_arena.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>

#include "common/log.h"
#include "transport/shm/futex.h"

namespace kolo {

// The segment: this header, a Member per rank, two Mailboxes per rank,
// then a slot per rank. Cache-line apart where different ranks write.
struct ShmArena::Header {
  // "kolo" "arei" was mailboxes with small data on the posting line (a
  // build with another layout must not share a segment with this one).
  // "kolo" "arej": and members that say whether they read their peers.
  static constexpr uint64_t kMagic = 0x6b6f6c6f6172656a;
  alignas(64) std::atomic<uint32_t> arrived;               // at the current barrier
  std::atomic<uint32_t> sleepers;                          // ranks asleep on `generation`
  alignas(64) std::atomic<uint32_t> generation;            // barriers completed; the futex word
  // Ranks asleep on a peer's `posts`: read by every exchange, written only
  // by a rank about to sleep, so it stays in every cache while ranks are busy.
  alignas(64) std::atomic<uint32_t> post_sleepers;
  alignas(64) std::atomic<uint32_t> attached;              // ranks that mapped the segment
  uint64_t magic;
  uint64_t job_id;
  uint32_t size;
  uint64_t slot_bytes;
};

struct ShmArena::Member {
  alignas(64) std::atomic<uint32_t> closed;  // the rank aborted or went away
  std::atomic<uint64_t> arrivals;            // barriers it has entered, for a timeout's message
  int32_t pid;
  std::atomic<uint32_t> posts;  // the low bits of its last exchange: the futex word its readers sleep on
  uint64_t probe_address;       // where a word of its process lies, for its peers to read
  uint64_t probe_word;          // what they should find there
  uint32_t reads_its_peers;     // whether it could read every peer's word (1) or not (0)
};

// One rank's mailbox of one parity: this on a line of its own, then its
// data from the next line on; data of up to kInlineBytes on this line
// itself. Where the cores share a cache, the second line cost nothing
// measurable for 8 bytes; where they do not, each line is a trip between
// them (bench/core_round_trip). Larger data stays off this line: beside
// the header, a reduction's vector loads straddled lines, and a 512-byte
// allreduce took 1.2x as long.
struct ShmArena::Mailbox {
  alignas(64) std::atomic<uint64_t> round;  // the exchange it was last posted for, stored (release) after the rest
  uint64_t fingerprint;
  alignas(16) unsigned char inline_data[SharedArena::kInlineBytes];
};
static_assert(sizeof(ShmArena::Mailbox) == 64, "a mailbox's data starts on the line after its header");

namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t members_at() { return round_up(sizeof(ShmArena::Header), 64); }
// Each mailbox's share of the segment: its header's line and its data.
constexpr size_t kMailboxStride = sizeof(ShmArena::Mailbox) + SharedArena::kMailboxBytes;
// Where a buffer of `bytes` lies in `box`: on its posting line if it fits,
// else from the next line on.
unsigned char* data_for(ShmArena::Mailbox* box, size_t bytes) {
  return bytes <= SharedArena::kInlineBytes ? box->inline_data : reinterpret_cast<unsigned char*>(box + 1);
}
size_t mailboxes_at(int size) { return round_up(members_at() + size * sizeof(ShmArena::Member), 4096); }
size_t slots_at(int size) { return round_up(mailboxes_at(size) + 2 * size * kMailboxStride, 4096); }
constexpr int kLivenessMs = 100;

std::string arena_name(uint64_t job_id) {
  std::random_device random;
  std::ostringstream name;
  name << "/kolo-" << std::hex << job_id << "-arena-" << random() << random();
  return name.str();
}

}  // namespace

ShmArena::ShmArena(int rank, int size, const ShmArenaOptions& options)
    : rank_(rank), size_(size), slot_bytes_(options.slot_bytes), options_(options), processes_(size) {}

ShmArena::Member& ShmArena::member(int r) const {
  return reinterpret_cast<Member*>(reinterpret_cast<unsigned char*>(header_) + members_at())[r];
}

unsigned char* ShmArena::slot(int r) {
  return reinterpret_cast<unsigned char*>(header_) + slots_at(size_) + r * round_up(slot_bytes_, 4096);
}

size_t ShmArena::segment_bytes(int size, size_t slot_bytes) {
  return slots_at(size) + size * round_up(slot_bytes, 4096);
}

ShmArena::Mailbox* ShmArena::mailbox(int r, uint64_t parity) const {
  return reinterpret_cast<Mailbox*>(reinterpret_cast<unsigned char*>(header_) + mailboxes_at(size_) +
                                    (2 * r + parity) * kMailboxStride);
}

unsigned char* ShmArena::outbox(size_t bytes) { return data_for(mailbox(rank_, chunks % 2), bytes); }

const unsigned char* ShmArena::inbox(int q, size_t bytes) const {
  return data_for(mailbox(q, exchanged_parity_), bytes);
}

uint64_t ShmArena::fingerprint_of(int q) const { return mailbox(q, exchanged_parity_)->fingerprint; }

Status ShmArena::create(Store* store, int rank, int size, const ShmArenaOptions& options, Deadline deadline,
                        std::unique_ptr<ShmArena>* out) {
  std::unique_ptr<ShmArena> a(new ShmArena(rank, size, options));
  const size_t bytes = ShmArena::segment_bytes(size, options.slot_bytes);
  std::string name;
  int fd = -1;
  if (rank == 0) {
    name = arena_name(options.job_id);
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      const int err = errno;
      (void)store->set(options.store_key, "");  // the others go without it too
      return unsupported(errno_error(Code::kTransport, "shm_open(" + name + ")", err).message());
    }
    a->name_ = name;  // unlinked by the destructor unless every rank mapped it
    // posix_fallocate, not only ftruncate: a /dev/shm too small fails here,
    // not later with SIGBUS on first touch.
    int err =
        ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) : errno;
    if (err != 0) {
      ::close(fd);
      ::shm_unlink(name.c_str());
      a->name_.clear();
      (void)store->set(options.store_key, "");  // the others go without it too
      if (err == ENOSPC) {
        return unsupported("/dev/shm has no room for the " + std::to_string(bytes) +
                           "-byte shared-memory allreduce arena (a container's default is often 64 MiB: raise it, "
                           "e.g. docker run --shm-size=1g)");
      }
      return unsupported("reserving " + std::to_string(bytes) + " bytes for " + name + ": " + std::strerror(err));
    }
  } else {
    Status s = store->get_one(options.store_key, deadline, &name);
    if (!s.is_ok()) return s.with_context("waiting for rank 0's shared-memory arena");
    if (name.empty()) return unsupported("rank 0 could not make the shared-memory arena");
    fd = ::shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) return errno_error(Code::kTransport, "shm_open(" + name + ")", errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
      ::close(fd);
      return transport_error(name + " is not the shared-memory arena of this communicator");
    }
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);
  if (p == MAP_FAILED) return errno_error(Code::kTransport, "mmap of the shared-memory arena", mmap_errno);
  a->header_ = static_cast<Header*>(p);
  a->mapped_bytes_ = bytes;
  Header* h = a->header_;
  if (rank == 0) {
    new (h) Header();
    h->arrived.store(0);
    h->sleepers.store(0);
    h->generation.store(0);
    h->attached.store(0);
    h->post_sleepers.store(0);
    h->job_id = options.job_id;
    h->size = static_cast<uint32_t>(size);
    h->slot_bytes = options.slot_bytes;
    for (int r = 0; r < size; ++r) {
      Member* m = new (&a->member(r)) Member();
      m->closed.store(0);
      m->arrivals.store(0);
      m->pid = 0;
      m->posts.store(0);
      m->probe_address = 0;
      m->probe_word = 0;
      m->reads_its_peers = 0;
      for (uint64_t parity : {0, 1}) {
        Mailbox* box = new (a->mailbox(r, parity)) Mailbox();
        box->round.store(0);  // no exchange is numbered 0
        box->fingerprint = 0;
      }
    }
    std::atomic_thread_fence(std::memory_order_release);
    h->magic = Header::kMagic;
    KOLO_RETURN_IF_ERROR(store->set(options.store_key, name));
  } else if (h->magic != Header::kMagic || h->job_id != options.job_id || h->size != static_cast<uint32_t>(size) ||
             h->slot_bytes != options.slot_bytes) {
    return transport_error(name + " is not the shared-memory arena of this communicator");
  }
  a->member(rank).pid = static_cast<int32_t>(::getpid());
  std::random_device random;
  a->probe_word_ = (uint64_t{random()} << 32) | random() | 1;
  a->member(rank).probe_address = reinterpret_cast<uintptr_t>(&a->probe_word_);
  a->member(rank).probe_word = a->probe_word_;
  // The last rank to map it removes the name: from then on the segment
  // lives exactly as long as the ranks that map it.
  if (h->attached.fetch_add(1) + 1 == static_cast<uint32_t>(size)) ::shm_unlink(name.c_str());
  // Every rank has mapped it (and written its pid) once this returns.
  KOLO_RETURN_IF_ERROR(a->barrier(deadline).with_context("while every rank mapped the shared-memory arena"));
  a->name_.clear();
  for (int r = 0; r < size; ++r) {
    const int pid = a->member(r).pid;
    if (pid != ::getpid()) a->processes_[r] = ProcessWatch(pid);
  }
  // Whether every rank reads every peer: each says what it found, and all
  // read all verdicts after a second barrier, so all agree.
  a->member(rank).reads_its_peers = a->can_read_every_peer() ? 1 : 0;
  KOLO_RETURN_IF_ERROR(
      a->barrier(deadline).with_context("while the shared-memory arena's ranks tried each other's memory"));
  a->reads_peers_ = true;
  for (int r = 0; r < size; ++r) a->reads_peers_ = a->reads_peers_ && a->member(r).reads_its_peers == 1;
  if (!a->reads_peers_ && rank == 0) {
    KOLO_DEBUG("shared-memory arena: not every rank may read its peers' memory (process_vm_readv refused: a "
               "seccomp profile, Yama's ptrace_scope or another pid namespace), so large allreduces go through "
               "the slots, in two copies instead of one");
  }
  *out = std::move(a);
  return Status::ok();
}

ShmArena::~ShmArena() {
  if (header_) {
    member(rank_).closed.store(1);
    // Whoever waits on this rank learns it now: in a barrier, or asleep
    // on this rank's post.
    futex_wake_all(&header_->generation);
    futex_wake_all(&member(rank_).posts);
    ::munmap(header_, mapped_bytes_);
  }
  if (!name_.empty()) ::shm_unlink(name_.c_str());
}

void ShmArena::abort() {
  if (aborted_.exchange(true)) return;
  member(rank_).closed.store(1);
  futex_wake_all(&header_->generation);
  // An exchange sleeps on a peer's post: this rank's own, asleep on any
  // peer's, and the peers asleep on this rank's, all wake (the others'
  // wakes are spurious, and they sleep again).
  for (int r = 0; r < size_; ++r) futex_wake_all(&member(r).posts);
}

Status ShmArena::check_peers() {
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) KOLO_RETURN_IF_ERROR(check_peer(r));
  }
  return Status::ok();
}

Status ShmArena::check_peer(int r) {
  if (member(r).closed.load()) {
    return peer_lost("rank " + std::to_string(r) + " (shared memory) closed its end: its communicator closed or failed");
  }
  if (processes_[r].ended()) return peer_lost("rank " + std::to_string(r) + " (shared memory): its process has ended");
  return Status::ok();
}

bool ShmArena::can_read_every_peer() const {
  for (int q = 0; q < size_; ++q) {
    uint64_t found = 0;
    iovec local{&found, sizeof found};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(member(q).probe_address)), sizeof found};
    if (::process_vm_readv(member(q).pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof found)) return false;
    if (found != member(q).probe_word) return false;  // another process of that number: another pid namespace
  }
  return true;
}

Status ShmArena::read_peer(int q, const iovec* local, size_t local_count, const iovec* remote, size_t remote_count) {
  if (!reads_peers_) return unsupported("this arena's ranks cannot read each other's memory");
  if (local_count > IOV_MAX || remote_count > IOV_MAX) {
    return invalid_argument("read_peer: more than IOV_MAX (" + std::to_string(IOV_MAX) + ") pieces");
  }
  size_t wanted = 0;
  for (size_t i = 0; i < local_count; ++i) wanted += local[i].iov_len;
  // It moves everything unless a page of either side cannot be reached.
  const ssize_t got = ::process_vm_readv(member(q).pid, local, local_count, remote, remote_count, 0);
  const int err = errno;
  if (got >= 0 && static_cast<size_t>(got) == wanted) return Status::ok();
  if (got < 0 && err == ESRCH) {
    return peer_lost("rank " + std::to_string(q) + " (shared memory): its process has ended");
  }
  // A peer that failed (its arena closed, so its caller may have freed the
  // buffers it posted) or whose process ended is lost, not a fault of
  // this transport.
  KOLO_RETURN_IF_ERROR(check_peer(q));
  if (got < 0) return errno_error(Code::kTransport, "reading rank " + std::to_string(q) + "'s memory", err);
  return transport_error("reading rank " + std::to_string(q) + "'s memory: " + std::to_string(got) + " of " +
                         std::to_string(wanted) + " bytes");
}

Status ShmArena::barrier(Deadline deadline) {
  if (!failed_.is_ok()) return failed_;
  if (aborted_.load()) return failed_ = aborted("communicator aborted");
  Header* h = header_;
  const uint32_t gen = h->generation.load(std::memory_order_acquire);
  const uint64_t mine = member(rank_).arrivals.fetch_add(1) + 1;
  if (h->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(size_)) {
    // The last to arrive: reset the count before releasing anyone (who may
    // then enter the next barrier), then release them.
    h->arrived.store(0, std::memory_order_relaxed);
    h->generation.fetch_add(1);
    if (h->sleepers.load() > 0) futex_wake_all(&h->generation);
    return Status::ok();
  }
  using Clock = std::chrono::steady_clock;
  const auto spin_until = Clock::now() + std::chrono::microseconds(options_.spin_us);
  while (Clock::now() < spin_until) {
    if (h->generation.load(std::memory_order_acquire) != gen) return Status::ok();
    if (options_.yield) sched_yield();
  }
  for (;;) {
    h->sleepers.fetch_add(1);
    if (h->generation.load() == gen) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.time_point() - Clock::now());
      futex_wait_any({{&h->generation, gen}}, static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, kLivenessMs)));
    }
    h->sleepers.fetch_sub(1);
    if (h->generation.load(std::memory_order_acquire) != gen) return Status::ok();
    if (aborted_.load()) return failed_ = aborted("communicator aborted");
    Status s = check_peers();
    // A rank may close (or exit) right after the barrier completed: the
    // barrier succeeded if the generation moved meanwhile.
    if (h->generation.load(std::memory_order_acquire) != gen) return Status::ok();
    if (!s.is_ok()) return failed_ = s;
    if (deadline.expired()) {
      std::string missing;
      for (int r = 0; r < size_; ++r) {
        if (member(r).arrivals.load() < mine) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      return failed_ = timeout_error("no progress before the deadline in a shared-memory barrier: waiting for rank(s) " +
                                     (missing.empty() ? std::string("?") : missing));
    }
  }
}

Status ShmArena::exchange(uint64_t fingerprint, double timeout_s, const Stalled& stalled, int* differs) {
  *differs = -1;
  if (!failed_.is_ok()) return failed_;
  if (aborted_.load(std::memory_order_relaxed)) return failed_ = aborted("communicator aborted");
  const uint64_t parity = chunks % 2;
  const uint64_t round = ++chunks;  // the same on every rank, and never 0
  exchanged_parity_ = parity;
  Mailbox* mine = mailbox(rank_, parity);
  mine->fingerprint = fingerprint;
  mine->round.store(round, std::memory_order_release);
  // For a reader about to sleep: the futex word, then whether one sleeps
  // (seq_cst, paired with wait_for_post).
  Member& me = member(rank_);
  me.posts.store(static_cast<uint32_t>(round), std::memory_order_seq_cst);
  if (header_->post_sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(&me.posts);
  std::optional<Deadline> deadline;  // from the first wait: a call that waits for no one reads no clock
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    const Mailbox* box = mailbox(q, parity);
    if (box->round.load(std::memory_order_acquire) != round) {
      if (!deadline) deadline = Deadline::after_seconds(timeout_s);
      KOLO_RETURN_IF_ERROR(wait_for_post(q, box, round, *deadline, stalled));
    }
    // On the line just read.
    if (box->fingerprint != fingerprint && *differs < 0) *differs = q;
  }
  return Status::ok();
}

Status ShmArena::wait_for_post(int q, const Mailbox* box, uint64_t round, Deadline deadline,
                                const Stalled& stalled) {
  using Clock = std::chrono::steady_clock;
  const auto posted = [&] { return box->round.load(std::memory_order_acquire) == round; };
  // Spin first, reading the clock only every so many looks (a look that
  // hits the cache takes a nanosecond, a clock read twenty; one that
  // yields, a system call): a busy peer posts within a few hundred.
  const int looks = options_.yield ? 16 : 1024;
  const auto spin = [&] {
    for (int i = 0; i < looks; ++i) {
      if (posted()) return true;
      if (options_.yield) sched_yield();
    }
    return false;
  };
  if (spin()) return Status::ok();
  const auto spin_until = Clock::now() + std::chrono::microseconds(options_.spin_us);
  while (Clock::now() < spin_until) {
    if (spin()) return Status::ok();
  }
  std::atomic<uint32_t>* word = &member(q).posts;
  for (;;) {
    // Declare the sleep, then look once more: a post meanwhile either
    // changed `word` (the futex returns at once) or its poster sees the
    // sleeper and wakes it.
    const uint32_t seen = word->load(std::memory_order_seq_cst);
    header_->post_sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (!posted()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.time_point() - Clock::now());
      futex_wait_any({{word, seen}}, static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, kLivenessMs)));
    }
    header_->post_sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (posted()) return Status::ok();
    if (aborted_.load()) return failed_ = aborted("communicator aborted");
    Status s = check_peers();
    if (s.is_ok() && stalled) s = stalled(q);
    // It posted meanwhile, then closed, exited or went on past this
    // exchange (where `stalled` may have seen it): no failure.
    if (posted()) return Status::ok();
    if (!s.is_ok()) return failed_ = s;
    if (deadline.expired()) {
      return failed_ = timeout_error("no progress before the deadline in a shared-memory exchange: waiting for rank " +
                                     std::to_string(q));
    }
  }
}

}  // namespace kolo
