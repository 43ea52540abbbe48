#include "transport/handshake.h"

#include <cstring>

#include "common/hmac.h"

namespace kolo {

Hello make_hello(uint64_t job_id, int from, int to, int world_size, int stream_index, int stream_count,
                 uint32_t flags) {
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kProtocolVersion;
  h.job_id = job_id;
  h.from_rank = from;
  h.to_rank = to;
  h.world_size = world_size;
  h.stream_index = stream_index;
  h.stream_count = stream_count;
  h.flags = flags;
  return h;
}

Status check_peer_identity(const PeerIdentity& c, const PeerIdentity& e, const std::string& what,
                           const std::string& protocol) {
  if (c.magic != e.magic) return auth_error("not a kolo " + what + " (bad magic)");
  if (c.version != e.version) {
    return invalid_usage("peer speaks " + protocol + " version " + std::to_string(c.version) + ", this rank " +
                         std::to_string(e.version));
  }
  if (c.job_id != e.job_id) return auth_error(what + " from a different job");
  if (c.world_size != e.world_size) {
    return mismatch("peer believes the world has " + std::to_string(c.world_size) + " ranks, this rank " +
                    std::to_string(e.world_size));
  }
  return Status::ok();
}

Status check_hello(const Hello& h, const HelloExpectation& e) {
  KOLO_RETURN_IF_ERROR(check_peer_identity({h.magic, h.version, h.job_id, h.world_size},
                                           {kHelloMagic, kProtocolVersion, e.job_id, e.world_size}, "connection",
                                           "protocol"));
  if (h.to_rank != e.rank) {
    return invalid_usage("connection meant for rank " + std::to_string(h.to_rank) + " reached rank " +
                         std::to_string(e.rank));
  }
  if (h.from_rank < 0 || h.from_rank >= e.world_size || h.from_rank == e.rank) {
    return invalid_usage("connection claims impossible rank " + std::to_string(h.from_rank));
  }
  if (h.stream_count != e.stream_count) {
    return mismatch("peer uses " + std::to_string(h.stream_count) + " sockets per peer, this rank " +
                    std::to_string(e.stream_count) + " (set KOLO_SOCKETS_PER_PEER alike on every rank)");
  }
  if ((h.flags ^ e.flags) & kHelloFlagChecksum) {
    return mismatch(std::string("peer ") + ((h.flags & kHelloFlagChecksum) ? "checksums" : "does not checksum") +
                    " frame payloads and this rank " + ((e.flags & kHelloFlagChecksum) ? "does" : "does not") +
                    " (set KOLO_CHECKSUM alike on every rank)");
  }
  if ((h.flags ^ e.flags) & kHelloFlagEncrypt) {
    return mismatch(std::string("peer ") + ((h.flags & kHelloFlagEncrypt) ? "encrypts" : "does not encrypt") +
                    " its connections and this rank " + ((e.flags & kHelloFlagEncrypt) ? "does" : "does not") +
                    " (set KOLO_ENCRYPT alike on every rank)");
  }
  if (h.flags != e.flags) return mismatch("peer's handshake flags " + std::to_string(h.flags) + " are unknown here");
  if (h.stream_index < 0 || h.stream_index >= h.stream_count) {
    return invalid_usage("bad socket index " + std::to_string(h.stream_index));
  }
  return Status::ok();
}

std::string link_salt(const Challenge& challenge, const HelloMessage& message) {
  return std::string(reinterpret_cast<const char*>(challenge.nonce), kNonceBytes) +
         std::string(reinterpret_cast<const char*>(message.nonce), kNonceBytes);
}

uint64_t job_id_from_name(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace kolo

namespace kolo {
namespace {

// HMAC over a label and a list of byte ranges, concatenated.
Digest mac_over(const std::string& secret, const char* label,
                std::initializer_list<std::pair<const void*, size_t>> parts) {
  std::string buf = label;
  for (const auto& part : parts) buf.append(static_cast<const char*>(part.first), part.second);
  return hmac_sha256(secret, buf.data(), buf.size());
}

Digest hello_mac(const HelloMessage& m, const Challenge& c, const std::string& secret) {
  return mac_over(secret, "kolo hello", {{c.nonce, kNonceBytes}, {&m.hello, sizeof(Hello)}, {m.nonce, kNonceBytes}});
}

Digest ack_mac(int32_t code, const HelloMessage& m, const Challenge& c, const std::string& secret) {
  return mac_over(secret, "kolo ack", {{m.nonce, kNonceBytes}, {c.nonce, kNonceBytes}, {&code, sizeof(code)}});
}

}  // namespace

Challenge make_challenge() {
  Challenge c{};
  c.magic = kChallengeMagic;
  c.version = kProtocolVersion;
  std::string r = random_bytes(kNonceBytes);
  std::memcpy(c.nonce, r.data(), kNonceBytes);
  return c;
}

Status check_challenge(const Challenge& c) {
  if (c.magic != kChallengeMagic) return auth_error("the other side is not a kolo rank (bad challenge)");
  if (c.version != kProtocolVersion) {
    return invalid_usage("the other side speaks protocol version " + std::to_string(c.version) + ", this rank " +
                         std::to_string(kProtocolVersion));
  }
  return Status::ok();
}

HelloMessage make_hello_message(const Hello& hello, const Challenge& challenge, const std::string& secret) {
  HelloMessage m{};
  m.hello = hello;
  std::string r = random_bytes(kNonceBytes);
  std::memcpy(m.nonce, r.data(), kNonceBytes);
  Digest d = hello_mac(m, challenge, secret);
  std::memcpy(m.mac, d.data(), d.size());
  return m;
}

Status check_hello_message(const HelloMessage& m, const Challenge& challenge, const HelloExpectation& expected,
                           const std::string& secret) {
  if (m.hello.magic != kHelloMagic) return auth_error("not a kolo connection (bad magic)");
  Digest want = hello_mac(m, challenge, secret), got;
  std::memcpy(got.data(), m.mac, got.size());
  if (!digests_equal(want, got)) {
    return auth_error("authentication failed: the peer does not know this job's secret (KOLO_SECRET)");
  }
  return check_hello(m.hello, expected);
}

HelloAck make_ack(Code verdict, const HelloMessage& m, const Challenge& challenge, const std::string& secret) {
  HelloAck a{};
  a.magic = kHelloMagic;
  a.code = static_cast<int32_t>(verdict);
  // Only an accepted peer learns anything keyed by the secret.
  if (verdict == Code::kOk) {
    Digest d = ack_mac(a.code, m, challenge, secret);
    std::memcpy(a.mac, d.data(), d.size());
  }
  return a;
}

Status check_ack(const HelloAck& ack, const HelloMessage& m, const Challenge& challenge, const std::string& secret,
                 const std::string& who) {
  if (ack.magic != kHelloMagic) return auth_error(who + " answered the handshake with garbage");
  if (ack.code != static_cast<int32_t>(Code::kOk)) {
    Code code = ack.code > 0 && ack.code <= static_cast<int32_t>(kLastCode) ? static_cast<Code>(ack.code)
                                                                                   : Code::kInternal;
    // A mismatch is a setting both ends must share (check_hello).
    const std::string hint = code == Code::kMismatch
                                 ? ": a setting both ends must share differs (KOLO_SOCKETS_PER_PEER, KOLO_CHECKSUM or "
                                   "KOLO_ENCRYPT; that rank's log says which)"
                                 : " (see that rank's log for the reason)";
    return Status(code, who + " rejected this rank's connection: " + code_name(code) + hint);
  }
  Digest want = ack_mac(ack.code, m, challenge, secret), got;
  std::memcpy(got.data(), ack.mac, got.size());
  if (!digests_equal(want, got)) return auth_error(who + " does not know this job's secret (KOLO_SECRET)");
  return Status::ok();
}

}  // namespace kolo
