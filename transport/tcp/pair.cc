#include "transport/tcp/pair.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>

#include <boost/asio/error.hpp>

#include "common/crc32c.h"

namespace kolo {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr size_t kHeaderBytes = sizeof(FrameHeader);

bool would_block(const boost::system::error_code& ec) {
  return ec == asio::error::would_block || ec == asio::error::try_again;
}

}  // namespace

TcpPair::TcpPair(int peer_rank, std::string peer_address, std::vector<std::unique_ptr<tcp::socket>> sockets,
                 bool checksum)
    : peer_(peer_rank), peer_address_(std::move(peer_address)), checksum_(checksum) {
  streams_.resize(sockets.size());
  for (size_t i = 0; i < sockets.size(); ++i) {
    streams_[i].socket = std::move(sockets[i]);
    fds_.push_back(streams_[i].socket->native_handle());
  }
}

void TcpPair::shutdown() {
  for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
}

TcpPair::~TcpPair() {
  for (auto& s : streams_) {
    boost::system::error_code ec;
    s.socket->close(ec);
  }
}

std::string TcpPair::name() const { return "rank " + std::to_string(peer_) + " (" + peer_address_ + ")"; }

void TcpPair::post_send(const void* data, size_t bytes, uint64_t tag, Request* r) {
  r->data = const_cast<void*>(data);
  r->bytes = bytes;
  r->tag = tag;
  r->done = false;
  r->moved = 0;
  r->header = make_frame_header(next_send_seq_, bytes, tag);
  if (checksum_) r->header.checksum = crc32c(0, data, bytes);
  Stream& s = streams_[next_send_seq_ % streams_.size()];
  ++next_send_seq_;
  s.sends.push_back(r);
  ++pending_;
}

void TcpPair::post_recv(void* data, size_t bytes, uint64_t tag, Request* r) {
  r->data = data;
  r->bytes = bytes;
  r->tag = tag;
  r->done = false;
  r->moved = 0;
  Stream& s = streams_[next_recv_seq_ % streams_.size()];
  s.recvs.push_back(r);
  s.recv_seqs.push_back(next_recv_seq_);
  ++next_recv_seq_;
  ++pending_;
}

Status TcpPair::lost(const std::string& doing, const boost::system::error_code& ec) const {
  if (ec == asio::error::eof) return peer_lost(name() + " closed the connection while this rank was " + doing);
  return peer_lost("connection to " + name() + " failed while this rank was " + doing + ": " + ec.message());
}

Status TcpPair::pump_sends(Stream& s, int* completed, bool* moved) {
  while (!s.sends.empty()) {
    Request* r = s.sends.front();
    const size_t total = kHeaderBytes + r->bytes;
    // Header and payload leave in one gather write, so a small message costs
    // one system call.
    std::array<asio::const_buffer, 2> bufs;
    if (r->moved < kHeaderBytes) {
      bufs[0] = asio::buffer(reinterpret_cast<const char*>(&r->header) + r->moved, kHeaderBytes - r->moved);
      bufs[1] = asio::buffer(r->data, r->bytes);
    } else {
      bufs[0] = asio::buffer(static_cast<const char*>(r->data) + (r->moved - kHeaderBytes), total - r->moved);
      bufs[1] = asio::const_buffer();
    }
    boost::system::error_code ec;
    size_t n = s.socket->write_some(bufs, ec);
    if (would_block(ec)) return Status::ok();
    if (ec) {
      return lost("sending message " + std::to_string(r->header.seq) + " (" + std::to_string(r->bytes) +
                      " bytes, " + describe_tag(r->tag) + ")",
                  ec);
    }
    *moved = true;
    r->moved += n;
    if (r->moved < total) return Status::ok();  // socket buffer full
    r->done = true;
    s.sends.pop_front();
    --pending_;
    ++*completed;
  }
  return Status::ok();
}

Status TcpPair::pump_recvs(Stream& s, int* completed, bool* moved) {
  while (!s.recvs.empty()) {
    Request* r = s.recvs.front();
    const uint64_t seq = s.recv_seqs.front();
    const size_t total = kHeaderBytes + r->bytes;
    std::array<asio::mutable_buffer, 2> bufs;
    const bool in_header = r->moved < kHeaderBytes;
    if (in_header) {
      // Read only the header first when the payload is large, so a bad
      // header is caught before any payload byte lands in the user's buffer.
      bufs[0] = asio::buffer(reinterpret_cast<char*>(&r->header) + r->moved, kHeaderBytes - r->moved);
      bufs[1] = r->bytes <= 4096 ? asio::buffer(r->data, r->bytes) : asio::mutable_buffer();
    } else {
      bufs[0] = asio::buffer(static_cast<char*>(r->data) + (r->moved - kHeaderBytes), total - r->moved);
      bufs[1] = asio::mutable_buffer();
    }
    boost::system::error_code ec;
    size_t n = s.socket->read_some(bufs, ec);
    if (would_block(ec)) return Status::ok();
    if (ec) {
      return lost("receiving message " + std::to_string(seq) + " (" + std::to_string(r->bytes) + " bytes, " +
                      describe_tag(r->tag) + ")",
                  ec);
    }
    *moved = true;
    r->moved += n;
    if (in_header && r->moved >= kHeaderBytes) {
      KOLO_RETURN_IF_ERROR(check_frame_header(r->header, seq, r->bytes, r->tag, name()));
    }
    if (r->moved < total) {
      if (in_header && r->moved >= kHeaderBytes) continue;  // header done: go on with the payload
      return Status::ok();
    }
    if (checksum_ && crc32c(0, r->data, r->bytes) != r->header.checksum) {
      return transport_error("corrupt frame from " + name() + ": payload checksum mismatch on message " +
                             std::to_string(seq) + " (" + std::to_string(r->bytes) + " bytes, " +
                             describe_tag(r->tag) + "); the data was not used");
    }
    r->done = true;
    s.recvs.pop_front();
    s.recv_seqs.pop_front();
    --pending_;
    ++*completed;
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
  if (::setsockopt(s.socket->native_handle(), SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof(bytes)) == 0) {
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
      // when it is all there, capped well below the receive buffer.
      const Request* r = s.recvs.front();
      int want = 1;
      if (r->moved >= sizeof(FrameHeader)) {
        const size_t left = sizeof(FrameHeader) + r->bytes - r->moved;
        want = static_cast<int>(std::min<size_t>(left, 256 << 10));
      }
      set_wakeup_threshold(s, std::max(want, 1));
    }
    if (events == 0) continue;
    struct pollfd p {};
    p.fd = s.socket->native_handle();
    p.events = events;
    fds->push_back(p);
  }
}

std::string TcpPair::describe_pending() const {
  std::string out;
  for (const auto& s : streams_) {
    if (!s.recvs.empty()) {
      const Request* r = s.recvs.front();
      if (!out.empty()) out += "; ";
      out += "receiving message " + std::to_string(s.recv_seqs.front()) + " (" + std::to_string(r->bytes) +
             " bytes, " + describe_tag(r->tag) + ", " + std::to_string(r->moved) + " bytes in) from " + name();
    }
    if (!s.sends.empty()) {
      const Request* r = s.sends.front();
      if (!out.empty()) out += "; ";
      out += "sending message " + std::to_string(r->header.seq) + " (" + std::to_string(r->bytes) + " bytes, " +
             describe_tag(r->tag) + ") to " + name();
    }
  }
  return out;
}

}  // namespace kolo
