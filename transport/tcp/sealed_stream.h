// One TCP stream's messages sealed (KOLO_ENCRYPT): each message travels as
// a header record, then its payload in records of at most kRecordBytes,
// each [4-byte length][ciphertext][16-byte tag], opened (authenticated and
// decrypted, common/record_cipher.h) before anything in it is used. Each
// direction of each stream has its own keys, from the job's secret and the
// stream's handshake nonces; records are numbered implicitly, so a record
// replayed, dropped, reordered or altered on the way fails to open, and
// the connection ends with an error naming the peer, never with wrong data.
//
// A stream moves one message at a time in each direction (its front one),
// so the progress of the message under way is kept here; the caller passes
// the message again on every call until it is done.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/record_cipher.h"
#include "common/status.h"
#include "transport/frame.h"

namespace kolo {

class SealedStream {
 public:
  // `dialer`: this end connected (the other accepted); the two directions'
  // keys differ by it.
  static Status create(const std::string& secret, const std::string& link_salt, bool dialer,
                       std::unique_ptr<SealedStream>* out);

  enum class Step { kBlocked, kHeader, kDone, kFailed };

  // Moves the message's next bytes to the socket: kDone once all of it has
  // gone, kBlocked when the socket takes no more, kFailed with *error (an
  // errno; 0 when the peer closed).
  Step send(int fd, const FrameHeader& header, const void* payload, size_t bytes, bool* moved, int* error);
  // Moves the next bytes of a message of `bytes` (what the receive posted)
  // from the socket: kHeader once its header record opened (*header set;
  // the caller checks it, then calls again for the payload), kDone once
  // every payload record opened, kBlocked, or kFailed with *error, or with
  // *broken saying which record failed to open or came in the wrong size.
  Step recv(int fd, FrameHeader* header, void* payload, size_t bytes, bool* moved, int* error, std::string* broken);
  // The next message's header without taking it (receiving from any
  // source): true once its whole header record is there and opens;
  // *broken when it is there and does not.
  bool peek_header(int fd, FrameHeader* header, std::string* broken, ssize_t* peeked);

  // The bytes that finish the record being received (for the wake-up
  // threshold), or a header record's when none is under way.
  size_t recv_wanted(size_t bytes) const;
  static size_t header_record_bytes();

 private:
  SealedStream(const SealKey& send_key, const SealKey& recv_key);
  // Seals `bytes` of `plain` as the next record at the end of out_.
  Status stage(const void* plain, size_t bytes);
  size_t next_record_bytes(size_t bytes) const;  // the payload record under way's plaintext size

  RecordCipher send_cipher_, recv_cipher_;
  // Sending: the message's plaintext bytes sealed so far (header first),
  // and the records sealed and not yet written.
  size_t sent_plain_ = 0;
  std::vector<uint8_t> out_;
  size_t out_sent_ = 0;
  // Receiving: the message's plaintext bytes opened so far, and the record
  // under way (its length, header ciphertext and tag as read so far).
  size_t opened_ = 0;
  size_t record_got_ = 0;
  uint8_t length_[4] = {};
  uint8_t header_cipher_[sizeof(FrameHeader)] = {};
  uint8_t tag_[kSealTagBytes] = {};
};

}  // namespace kolo
