#include "transport/tcp/pair.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/crc32c.h"
#include "transport/tcp/stream_io.h"

namespace kolo {

using boost::asio::ip::tcp;

namespace {

constexpr size_t kHeaderBytes = sizeof(FrameHeader);

// A sleeping receiver is woken once this much of a message is there. Each
// wake-up costs a context switch and an inter-processor interrupt, tens of
// microseconds in a VM; 1 MiB instead of 256 KiB made N=4 64 MiB allreduce
// 6% faster on the 2-core VMs (N=2: 3%), 2 MiB no faster again.
constexpr int kMaxWakeupBytes = 1 << 20;

}  // namespace

TcpPair::TcpPair(int peer_rank, std::string peer_address, std::vector<std::unique_ptr<tcp::socket>> sockets,
                 bool checksum, int socket_buffer_bytes, std::vector<std::unique_ptr<SealedStream>> sealed)
    : peer_(peer_rank),
      peer_address_(std::move(peer_address)),
      checksum_(checksum),
      // A fixed receive buffer smaller than the threshold would never fill
      // to it. With autotuning the kernel grows the buffer to fit (and wakes
      // the reader anyway when the buffer runs short).
      max_wakeup_bytes_(socket_buffer_bytes > 0 ? std::max(1, std::min(kMaxWakeupBytes, socket_buffer_bytes / 2))
                                                : kMaxWakeupBytes) {
  streams_.resize(sockets.size());
  for (size_t i = 0; i < sockets.size(); ++i) {
    // Taking the descriptor out of Asio also takes it out of the epoll set.
    boost::system::error_code ec;
    streams_[i].fd = sockets[i]->release(ec);
    // Asio refuses only where its reactor cannot give a descriptor back
    // (not Linux's epoll); a duplicate then serves the same.
    if (ec) streams_[i].fd = ::dup(sockets[i]->native_handle());
    if (i < sealed.size()) streams_[i].sealed = std::move(sealed[i]);
  }
}

void TcpPair::shutdown() {
  for (const auto& s : streams_) ::shutdown(s.fd, SHUT_RDWR);
}

TcpPair::~TcpPair() {
  for (const auto& s : streams_) {
    if (s.fd >= 0) ::close(s.fd);
  }
}

std::string TcpPair::name() const { return "rank " + std::to_string(peer_) + " (" + peer_address_ + ")"; }

void TcpPair::post_send(const void* data, size_t bytes, uint64_t tag, Request* r) {
  r->data = const_cast<void*>(data);
  r->bytes = bytes;
  r->tag = tag;
  r->done = false;
  Message m{r, next_send_seq_, make_frame_header(next_send_seq_, bytes, tag), 0};
  if (checksum_) m.header.checksum = crc32c(0, data, bytes);
  streams_[next_send_seq_ % streams_.size()].sends.push_back(m);
  ++next_send_seq_;
  ++pending_;
}

void TcpPair::post_recv(void* data, size_t bytes, uint64_t tag, Request* r) {
  r->data = data;
  r->bytes = bytes;
  r->tag = tag;
  r->done = false;
  streams_[next_recv_seq_ % streams_.size()].recvs.push_back(Message{r, next_recv_seq_, FrameHeader{}, 0});
  ++next_recv_seq_;
  ++pending_;
}

Status TcpPair::lost(const std::string& doing, int error) const {
  if (error == 0) return peer_lost(name() + " closed the connection while this rank was " + doing);
  return peer_lost("connection to " + name() + " failed while this rank was " + doing + ": " + std::strerror(error));
}

Status TcpPair::pump_sends(Stream& s, int* completed, bool* moved) {
  if (s.sealed) return pump_sealed_sends(s, completed, moved);
  while (!s.sends.empty()) {
    Message& m = s.sends.front();
    Request* r = m.request;
    const size_t total = kHeaderBytes + r->bytes;
    // Header and payload leave in one gather write, so a small message costs
    // one system call.
    iovec iov[2];
    int iovcnt = 1;
    if (m.moved < kHeaderBytes) {
      iov[0] = {reinterpret_cast<char*>(&m.header) + m.moved, kHeaderBytes - m.moved};
      iov[1] = {r->data, r->bytes};
      iovcnt = r->bytes ? 2 : 1;
    } else {
      iov[0] = {static_cast<char*>(r->data) + (m.moved - kHeaderBytes), total - m.moved};
    }
    int error = 0;
    const ssize_t n = move_bytes(s.fd, true, iov, iovcnt, &error);
    if (n < 0 && would_block(error)) return Status::ok();
    if (n < 0) {
      return lost("sending message " + std::to_string(m.seq) + " (" + std::to_string(r->bytes) +
                      " bytes, " + describe_tag(r->tag) + ")",
                  error);
    }
    *moved = true;
    m.moved += static_cast<size_t>(n);
    if (m.moved < total) return Status::ok();  // socket buffer full
    complete(s.sends, completed);
  }
  return Status::ok();
}

void TcpPair::complete(Fifo<Message>& queue, int* completed) {
  queue.front().request->done = true;
  queue.pop_front();
  --pending_;
  ++*completed;
}

Status TcpPair::check_payload(const Message& m) const {
  const Request* r = m.request;
  if (checksum_ && crc32c(0, r->data, r->bytes) != m.header.checksum) {
    return transport_error("corrupt frame from " + name() + ": payload checksum mismatch on message " +
                           std::to_string(m.seq) + " (" + std::to_string(r->bytes) + " bytes, " +
                           describe_tag(r->tag) + "); the data was not used");
  }
  return Status::ok();
}

Status TcpPair::pump_recvs(Stream& s, int* completed, bool* moved) {
  if (s.sealed) return pump_sealed_recvs(s, completed, moved);
  while (!s.recvs.empty()) {
    Message& m = s.recvs.front();
    Request* r = m.request;
    const uint64_t seq = m.seq;
    const size_t total = kHeaderBytes + r->bytes;
    iovec iov[2];
    int iovcnt = 1;
    const bool in_header = m.moved < kHeaderBytes;
    if (in_header) {
      // Read only the header first when the payload is large, so a bad
      // header is caught before any payload byte lands in the user's buffer.
      iov[0] = {reinterpret_cast<char*>(&m.header) + m.moved, kHeaderBytes - m.moved};
      if (r->bytes > 0 && r->bytes <= 4096) {
        iov[1] = {r->data, r->bytes};
        iovcnt = 2;
      }
    } else {
      iov[0] = {static_cast<char*>(r->data) + (m.moved - kHeaderBytes), total - m.moved};
    }
    int error = 0;
    const ssize_t n = move_bytes(s.fd, false, iov, iovcnt, &error);
    if (n < 0 && would_block(error)) return Status::ok();
    if (n < 0) {
      return lost("receiving message " + std::to_string(seq) + " (" + std::to_string(r->bytes) + " bytes, " +
                      describe_tag(r->tag) + ")",
                  error);
    }
    *moved = true;
    m.moved += static_cast<size_t>(n);
    if (in_header && m.moved >= kHeaderBytes) {
      KOLO_RETURN_IF_ERROR(check_frame_header(m.header, seq, r->bytes, r->tag, name()));
    }
    if (m.moved < total) {
      if (in_header && m.moved >= kHeaderBytes) continue;  // header done: go on with the payload
      return Status::ok();
    }
    KOLO_RETURN_IF_ERROR(check_payload(m));
    complete(s.recvs, completed);
  }
  return Status::ok();
}

Status TcpPair::pump_sealed_sends(Stream& s, int* completed, bool* moved) {
  while (!s.sends.empty()) {
    Message& m = s.sends.front();
    Request* r = m.request;
    int error = 0;
    const SealedStream::Step step = s.sealed->send(s.fd, m.header, r->data, r->bytes, moved, &error);
    if (step == SealedStream::Step::kBlocked) return Status::ok();
    if (step == SealedStream::Step::kFailed) {
      return lost("sending message " + std::to_string(m.seq) + " (" + std::to_string(r->bytes) + " bytes, " +
                      describe_tag(r->tag) + ", encrypted)",
                  error);
    }
    m.moved = kHeaderBytes + r->bytes;
    complete(s.sends, completed);
  }
  return Status::ok();
}

Status TcpPair::pump_sealed_recvs(Stream& s, int* completed, bool* moved) {
  while (!s.recvs.empty()) {
    Message& m = s.recvs.front();
    Request* r = m.request;
    int error = 0;
    std::string broken;
    const SealedStream::Step step = s.sealed->recv(s.fd, &m.header, r->data, r->bytes, moved, &error, &broken);
    if (step == SealedStream::Step::kBlocked) return Status::ok();
    if (step == SealedStream::Step::kFailed) {
      const std::string what = "message " + std::to_string(m.seq) + " (" + std::to_string(r->bytes) + " bytes, " +
                               describe_tag(r->tag) + ", encrypted)";
      if (broken.empty()) return lost("receiving " + what, error);
      return transport_error("tampered or corrupt data from " + name() + " in " + what + ": " + broken +
                             "; the connection is ended and the data was not used");
    }
    if (step == SealedStream::Step::kHeader) {
      m.moved = kHeaderBytes;
      KOLO_RETURN_IF_ERROR(check_frame_header(m.header, m.seq, r->bytes, r->tag, name()));
      continue;
    }
    KOLO_RETURN_IF_ERROR(check_payload(m));
    complete(s.recvs, completed);
  }
  return Status::ok();
}

Status TcpPair::pump(int* completed, bool* moved) {
  for (auto& s : streams_) {
    if (!s.sends.empty()) KOLO_RETURN_IF_ERROR(pump_sends(s, completed, moved));
    if (!s.recvs.empty()) KOLO_RETURN_IF_ERROR(pump_recvs(s, completed, moved));
  }
  return Status::ok();
}

void TcpPair::set_wakeup_threshold(Stream& s, int bytes) {
  if (bytes == s.rcvlowat) return;
  if (::setsockopt(s.fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof(bytes)) == 0) {
    s.rcvlowat = bytes;
  }
}

void TcpPair::collect_pollfds(std::vector<struct pollfd>* fds) {
  for (auto& s : streams_) {
    short events = 0;
    if (!s.sends.empty()) events |= POLLOUT;
    if (!s.recvs.empty()) {
      events |= POLLIN;
      // Each loopback packet carries at most 64 KiB, and waking a sleeping
      // process per packet costs more than the copy. Once the header has
      // been checked, the rest of the message is sure to come (or the
      // connection to end, which wakes us anyway), so ask to be woken only
      // when it is all there, or max_wakeup_bytes_ of it.
      const Message& m = s.recvs.front();
      int want = 1;
      if (s.sealed) {
        // A record is opened whole: wake when the one under way is in.
        want = static_cast<int>(std::min<size_t>(s.sealed->recv_wanted(m.request->bytes), max_wakeup_bytes_));
      } else if (m.moved >= kHeaderBytes) {
        const size_t left = kHeaderBytes + m.request->bytes - m.moved;
        want = static_cast<int>(std::min<size_t>(left, max_wakeup_bytes_));
      }
      set_wakeup_threshold(s, std::max(want, 1));
    }
    if (events == 0) continue;
    struct pollfd p {};
    p.fd = s.fd;
    p.events = events;
    fds->push_back(p);
  }
}

Status TcpPair::peek(Arrival* next) {
  *next = Arrival{};
  // A receive is pending: the next message may be behind its bytes (on
  // its stream), and is in any case not the caller's to take yet.
  for (const Stream& s : streams_) {
    if (!s.recvs.empty()) return Status::ok();
  }
  Stream& s = streams_[next_recv_seq_ % streams_.size()];
  FrameHeader h{};
  ssize_t n;
  bool whole = false;
  if (s.sealed) {
    std::string broken;
    whole = s.sealed->peek_header(s.fd, &h, &broken, &n);
    if (!broken.empty()) {
      return transport_error("tampered or corrupt data from " + name() + ": " + broken +
                             "; the connection is ended and the data was not used");
    }
  } else {
    do {
      n = ::recv(s.fd, &h, kHeaderBytes, MSG_PEEK | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    whole = n == static_cast<ssize_t>(kHeaderBytes);
  }
  if (whole) {
    // The same check a receive makes first, but for size and tag, which
    // the caller weighs itself (and its receive checks again).
    KOLO_RETURN_IF_ERROR(check_frame_header(h, next_recv_seq_, h.bytes, h.tag, name()));
    next->state = Arrival::kArrived;
    next->bytes = h.bytes;
    next->tag = h.tag;
    return Status::ok();
  }
  // End of stream, a reset, or a header that stops short of a hang-up:
  // nothing more will come from this peer.
  if (n == 0 || (n < 0 && !would_block(errno)) || (n > 0 && hung_up_)) next->state = Arrival::kClosed;
  return Status::ok();
}

void TcpPair::collect_watch_pollfd(std::vector<struct pollfd>* fds) {
  Stream& s = streams_[next_recv_seq_ % streams_.size()];
  set_wakeup_threshold(s, static_cast<int>(s.sealed ? SealedStream::header_record_bytes() : kHeaderBytes));
  struct pollfd p {};
  p.fd = s.fd;
  p.events = POLLIN | POLLRDHUP;
  fds->push_back(p);
}

void TcpPair::note_watch_events(short revents) {
  if (revents & (POLLRDHUP | POLLHUP | POLLERR)) hung_up_ = true;
}

std::string TcpPair::describe_pending() const {
  std::string out;
  for (const auto& s : streams_) {
    if (!s.recvs.empty()) {
      const Message& m = s.recvs.front();
      if (!out.empty()) out += "; ";
      out += "receiving message " + std::to_string(m.seq) + " (" + std::to_string(m.request->bytes) + " bytes, " +
             describe_tag(m.request->tag) + ", " + std::to_string(m.moved) + " bytes in) from " + name();
    }
    if (!s.sends.empty()) {
      const Message& m = s.sends.front();
      if (!out.empty()) out += "; ";
      out += "sending message " + std::to_string(m.seq) + " (" + std::to_string(m.request->bytes) + " bytes, " +
             describe_tag(m.request->tag) + ") to " + name();
    }
  }
  return out;
}

}  // namespace kolo
