#include "transport/tcp/sealed_stream.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/tcp/stream_io.h"

namespace kolo {
namespace {

// A record's plaintext at most: large enough that its 20 bytes of framing
// and one cipher call per record cost nothing next to the bytes (AES-GCM
// runs at GB/s), small enough that a receiver opens one while the next
// arrives.
constexpr size_t kRecordBytes = 128 << 10;
constexpr size_t kLengthBytes = 4;
constexpr size_t kHeaderBytes = sizeof(FrameHeader);
constexpr size_t kOverhead = kLengthBytes + kSealTagBytes;

void put_length(uint8_t* out, uint32_t n) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
}

uint32_t get_length(const uint8_t* in) {
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(in[i]) << (8 * i);
  return n;
}

}  // namespace

Status SealedStream::create(const std::string& secret, const std::string& link_salt, bool dialer,
                            std::unique_ptr<SealedStream>* out) {
  SealKey forward, backward;
  KOLO_RETURN_IF_ERROR(derive_seal_key(secret, link_salt, "kolo tcp: dialer to acceptor", &forward));
  KOLO_RETURN_IF_ERROR(derive_seal_key(secret, link_salt, "kolo tcp: acceptor to dialer", &backward));
  out->reset(dialer ? new SealedStream(forward, backward) : new SealedStream(backward, forward));
  return Status::ok();
}

SealedStream::SealedStream(const SealKey& send_key, const SealKey& recv_key)
    : send_cipher_(send_key), recv_cipher_(recv_key) {
  out_.reserve(kHeaderBytes + kRecordBytes + 2 * kOverhead);
}

size_t SealedStream::header_record_bytes() { return kOverhead + kHeaderBytes; }

Status SealedStream::stage(const void* plain, size_t bytes) {
  const size_t at = out_.size();
  out_.resize(at + kOverhead + bytes);
  uint8_t* record = out_.data() + at;
  put_length(record, static_cast<uint32_t>(bytes));
  return send_cipher_.seal(plain, bytes, record, kLengthBytes, record + kLengthBytes,
                           record + kLengthBytes + bytes);
}

SealedStream::Step SealedStream::send(int fd, const FrameHeader& header, const void* payload, size_t bytes,
                                      bool* moved, int* error) {
  const size_t total = kHeaderBytes + bytes;
  for (;;) {
    if (out_sent_ == out_.size()) {
      out_.clear();
      out_sent_ = 0;
      if (sent_plain_ == total) {
        sent_plain_ = 0;
        return Step::kDone;
      }
      // The header and the first payload record leave together: a small
      // message costs one system call, as unsealed.
      Status staged = Status::ok();
      if (sent_plain_ == 0) {
        staged = stage(&header, kHeaderBytes);
        sent_plain_ = kHeaderBytes;
      }
      if (staged.is_ok() && sent_plain_ < total) {
        const size_t n = std::min(kRecordBytes, total - sent_plain_);
        staged = stage(static_cast<const char*>(payload) + (sent_plain_ - kHeaderBytes), n);
        sent_plain_ += n;
      }
      if (!staged.is_ok()) {
        *error = EPROTO;  // OpenSSL refused to seal: nothing sensible can follow on this stream
        return Step::kFailed;
      }
    }
    iovec iov{out_.data() + out_sent_, out_.size() - out_sent_};
    const ssize_t n = move_bytes(fd, true, &iov, 1, error);
    if (n < 0) return would_block(*error) ? Step::kBlocked : Step::kFailed;
    *moved = true;
    out_sent_ += static_cast<size_t>(n);
  }
}

size_t SealedStream::next_record_bytes(size_t bytes) const {
  return opened_ < kHeaderBytes ? kHeaderBytes : std::min(kRecordBytes, kHeaderBytes + bytes - opened_);
}

size_t SealedStream::recv_wanted(size_t bytes) const {
  return kOverhead + next_record_bytes(bytes) - record_got_;
}

SealedStream::Step SealedStream::recv(int fd, FrameHeader* header, void* payload, size_t bytes, bool* moved,
                                      int* error, std::string* broken) {
  for (;;) {
    const bool in_header = opened_ < kHeaderBytes;
    if (!in_header && opened_ == kHeaderBytes + bytes) {  // a message of no payload, its header opened
      opened_ = 0;
      return Step::kDone;
    }
    const size_t plain = next_record_bytes(bytes);
    uint8_t* cipher = in_header ? header_cipher_ : static_cast<uint8_t*>(payload) + (opened_ - kHeaderBytes);
    // The record's length, ciphertext and tag in one scatter read.
    iovec iov[3];
    int iovcnt = 0;
    size_t at = record_got_;
    if (at < kLengthBytes) {
      iov[iovcnt++] = {length_ + at, kLengthBytes - at};
      at = kLengthBytes;
    }
    if (at < kLengthBytes + plain) {
      iov[iovcnt++] = {cipher + (at - kLengthBytes), kLengthBytes + plain - at};
      at = kLengthBytes + plain;
    }
    iov[iovcnt++] = {tag_ + (at - kLengthBytes - plain), kOverhead + plain - at};
    const ssize_t n = move_bytes(fd, false, iov, iovcnt, error);
    if (n < 0) return would_block(*error) ? Step::kBlocked : Step::kFailed;
    *moved = true;
    const bool had_length = record_got_ >= kLengthBytes;
    record_got_ += static_cast<size_t>(n);
    if (!had_length && record_got_ >= kLengthBytes && get_length(length_) != plain) {
      *broken = "a record of " + std::to_string(get_length(length_)) + " bytes where " + std::to_string(plain) +
                " were due (record " + std::to_string(recv_cipher_.records()) + " of the stream)";
      return Step::kFailed;
    }
    if (record_got_ < kOverhead + plain) continue;  // the rest may be there already; else kBlocked next
    void* to = in_header ? static_cast<void*>(header) : static_cast<void*>(cipher);
    if (!recv_cipher_.open(cipher, plain, length_, kLengthBytes, tag_, to)) {
      *broken = "record " + std::to_string(recv_cipher_.records()) +
                " of the stream failed to authenticate (altered, replayed or out of order on the way, or sealed "
                "with another key)";
      return Step::kFailed;
    }
    record_got_ = 0;
    opened_ += plain;
    if (in_header) return Step::kHeader;
    if (opened_ == kHeaderBytes + bytes) {
      opened_ = 0;
      return Step::kDone;
    }
  }
}

bool SealedStream::peek_header(int fd, FrameHeader* header, std::string* broken, ssize_t* peeked) {
  uint8_t record[kOverhead + kHeaderBytes];
  ssize_t n;
  do {
    n = ::recv(fd, record, sizeof(record), MSG_PEEK | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  *peeked = n;
  if (n != static_cast<ssize_t>(sizeof(record))) return false;
  if (get_length(record) != kHeaderBytes ||
      !recv_cipher_.open_ahead(record + kLengthBytes, kHeaderBytes, record, kLengthBytes,
                               record + kLengthBytes + kHeaderBytes, header)) {
    *broken = "the next message's header record failed to authenticate";
    return false;
  }
  return true;
}

}  // namespace kolo
