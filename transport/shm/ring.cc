#include "transport/shm/ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "transport/shm/futex.h"

namespace kolo {

namespace {

size_t round_up(size_t n) { return (n + 63) / 64 * 64; }
// Every slot starts on a cache line, so a chunk's header and its first 32
// payload bytes share one: a small message moves as one line. (Rounding
// the payload alone left every other slot's header astride two lines.)
size_t slot_stride(uint64_t slot_bytes) { return round_up(sizeof(ShmChunk) + slot_bytes); }
// Where the slots start: after the header, on a cache line of their own.
const size_t kSlotsAt = round_up(sizeof(ShmRingHeader));

Status map_fd(int fd, size_t bytes, ShmRingHeader** out) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return errno_error(Code::kTransport, "mmap of a shared memory ring", errno);
  *out = static_cast<ShmRingHeader*>(p);
  return Status::ok();
}

}  // namespace

size_t ShmRingShape::segment_bytes() const { return kSlotsAt + slots * slot_stride(slot_bytes); }

bool ShmRingShape::valid() const {
  return slots >= 2 && (slots & (slots - 1)) == 0 && slot_bytes >= 64 && slot_bytes <= UINT32_MAX;
}

ShmRingShape ShmRingShape::for_ranks_on_host(int ranks_on_host) {
  ShmRingShape shape;
  const uint64_t peers = static_cast<uint64_t>(std::max(1, ranks_on_host - 1));
  const uint64_t fits = kRingBytesPerRank / peers / shape.slots / 4096 * 4096;  // payload per slot
  shape.slot_bytes = std::max<uint64_t>(16 << 10, std::min<uint64_t>(shape.slot_bytes, fits));
  return shape;
}

Status ShmRing::create(const std::string& name, const ShmRingShape& shape, uint64_t job_id, int from, int to,
                       ShmRing* out) {
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return errno_error(Code::kTransport, "shm_open(" + name + ")", errno);
  const size_t bytes = shape.segment_bytes();
  // posix_fallocate, not only ftruncate: a /dev/shm too small fails here,
  // not later with SIGBUS on first touch.
  int err =
      ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) : errno;
  ShmRingHeader* h = nullptr;
  Status s = Status::ok();
  if (err == ENOSPC) {
    s = transport_error("/dev/shm has no room for a ring of " + std::to_string(bytes) +
                        " bytes: it is too small for this job (a container's default is often 64 MiB: raise it, "
                        "e.g. docker run --shm-size=1g, or use KOLO_TRANSPORT=tcp)");
  } else if (err != 0) {
    s = errno_error(Code::kTransport, "reserving " + std::to_string(bytes) + " bytes for " + name, err);
  } else {
    s = map_fd(fd, bytes, &h);
  }
  ::close(fd);
  if (!s.is_ok()) {
    ::shm_unlink(name.c_str());
    return s;
  }
  new (h) ShmRingHeader();
  h->head.store(0);
  h->tail.store(0);
  h->sender_sleeping.store(0);
  h->sender_closed.store(0);
  h->receiver_awaits.store(0);
  h->receiver_sleeping.store(0);
  h->receiver_closed.store(0);
  h->receiver_attached.store(0);
  h->job_id = job_id;
  h->from = from;
  h->to = to;
  h->sender_pid = static_cast<int32_t>(::getpid());
  h->slots = shape.slots;
  h->slot_bytes = shape.slot_bytes;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = ShmRingHeader::kMagic;
  ShmRing ring;
  ring.name_ = name;
  ring.header_ = h;
  ring.mapped_bytes_ = bytes;
  ring.slots_ = shape.slots;
  ring.slot_stride_ = slot_stride(shape.slot_bytes);
  *out = std::move(ring);
  return Status::ok();
}

Status ShmRing::open_and_unlink(const std::string& name, uint64_t job_id, int from, int to, ShmRing* out) {
  int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return errno_error(Code::kTransport, "shm_open(" + name + ")", errno);
  ::shm_unlink(name.c_str());
  struct stat st {};
  Status s = ::fstat(fd, &st) == 0 ? Status::ok() : errno_error(Code::kTransport, "fstat(" + name + ")", errno);
  const size_t bytes = static_cast<size_t>(st.st_size);
  ShmRingHeader* h = nullptr;
  if (s.is_ok() && bytes < sizeof(ShmRingHeader)) s = transport_error(name + " is too small to be a kolo ring");
  if (s.is_ok()) s = map_fd(fd, bytes, &h);
  ::close(fd);
  KOLO_RETURN_IF_ERROR(s);
  ShmRing ring;
  ring.header_ = h;
  ring.mapped_bytes_ = bytes;
  const ShmRingShape shape{h->slots, h->slot_bytes};
  if (h->magic != ShmRingHeader::kMagic || h->job_id != job_id || h->from != from || h->to != to || !shape.valid() ||
      shape.segment_bytes() != bytes) {
    return transport_error(name + " is not the ring from rank " + std::to_string(from) + " to rank " +
                           std::to_string(to) + " of this communicator");
  }
  ring.slots_ = h->slots;
  ring.slot_stride_ = slot_stride(h->slot_bytes);
  h->receiver_attached.store(1);
  *out = std::move(ring);
  return Status::ok();
}

ShmRing::~ShmRing() {
  unlink_if_unattached();
  if (header_) ::munmap(header_, mapped_bytes_);
}

ShmRing::ShmRing(ShmRing&& other) noexcept { *this = std::move(other); }

ShmRing& ShmRing::operator=(ShmRing&& other) noexcept {
  if (this != &other) {
    unlink_if_unattached();
    if (header_) ::munmap(header_, mapped_bytes_);
    name_ = std::move(other.name_);
    header_ = std::exchange(other.header_, nullptr);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    tail_seen_ = std::exchange(other.tail_seen_, 0);
    slots_ = std::exchange(other.slots_, 0);
    slot_stride_ = std::exchange(other.slot_stride_, 0);
    other.name_.clear();
  }
  return *this;
}

void ShmRing::unlink_if_unattached() {
  if (!name_.empty() && header_ && !header_->receiver_attached.load()) ::shm_unlink(name_.c_str());
  name_.clear();
}

ShmChunk* ShmRing::slot(uint32_t index) const {
  auto* base = reinterpret_cast<unsigned char*>(header_) + kSlotsAt;
  return reinterpret_cast<ShmChunk*>(base + (index & (slots_ - 1)) * slot_stride_);
}

bool ShmRing::write_chunk(const void* data, size_t bytes, uint64_t tag, size_t* offset) {
  const uint32_t head = header_->head.load(std::memory_order_relaxed);
  if (head - tail_seen_ >= slots_) {
    tail_seen_ = header_->tail.load(std::memory_order_acquire);
    if (head - tail_seen_ >= slots_) return false;
  }
  ShmChunk* c = slot(head);
  const size_t n = std::min<size_t>(bytes - *offset, header_->slot_bytes);
  c->tag = tag;
  c->message_bytes = bytes;
  c->offset = *offset;
  c->bytes = static_cast<uint32_t>(n);
  unsigned char* payload = reinterpret_cast<unsigned char*>(c) + sizeof(ShmChunk);
  if (n > 0) std::memcpy(payload, static_cast<const unsigned char*>(data) + *offset, n);
  *offset += n;
  c->seq.store(head + 1, std::memory_order_release);
  // seq_cst, paired with the receiver's: it either sees the new head before
  // it sleeps, or its sleeping flag is seen here and it is woken.
  header_->head.store(head + 1, std::memory_order_seq_cst);
  if (header_->receiver_sleeping.load(std::memory_order_seq_cst)) futex_wake_all(&header_->head);
  return true;
}

const ShmChunk* ShmRing::peek() const {
  const uint32_t tail = header_->tail.load(std::memory_order_relaxed);
  const ShmChunk* c = slot(tail);
  return c->seq.load(std::memory_order_acquire) == tail + 1 ? c : nullptr;
}

void ShmRing::release() {
  header_->tail.store(header_->tail.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
  if (header_->sender_sleeping.load(std::memory_order_seq_cst)) futex_wake_all(&header_->tail);
}

}  // namespace kolo
