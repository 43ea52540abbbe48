// The first bytes on every connection between two ranks:
//   1. the accepting side sends a Challenge (a fresh random nonce);
//   2. the connecting side sends a HelloMessage: who it is and which link it
//      wants, its own nonce, and an HMAC-SHA256 over both nonces and the
//      Hello, keyed with the job secret (KOLO_SECRET);
//   3. the accepting side checks the MAC and the Hello and answers with a
//      HelloAck whose MAC (over both nonces and the verdict) proves that it
//      knows the secret too.
// Fresh nonces on both sides make a recorded handshake useless to replay.
// Anything that is not a Hello from a member of this job, addressed to this
// rank, is rejected before it can touch a collective. The secret itself
// never crosses the wire and is never logged.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace kolo {

constexpr uint32_t kHelloMagic = 0x4b4f4c48;  // "KOLH"
constexpr uint32_t kChallengeMagic = 0x4b4f4c43;  // "KOLC"
constexpr uint32_t kProtocolVersion = 2;
constexpr size_t kNonceBytes = 16;

struct Challenge {
  uint32_t magic;
  uint32_t version;
  uint8_t nonce[kNonceBytes];
};
static_assert(sizeof(Challenge) == 24, "Challenge is a wire format");

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint64_t job_id;
  int32_t from_rank;
  int32_t to_rank;
  int32_t world_size;
  int32_t stream_index;  // which of the pair's parallel sockets this is
  int32_t stream_count;
  uint32_t flags;  // kHelloFlag* options that both ends must share
};

constexpr uint32_t kHelloFlagChecksum = 1;  // frame payloads carry a CRC-32C
constexpr uint32_t kHelloFlagEncrypt = 2;   // everything after the handshake is sealed (KOLO_ENCRYPT)
static_assert(sizeof(Hello) == 40, "Hello is a wire format");

struct HelloMessage {
  Hello hello;
  uint8_t nonce[kNonceBytes];  // the connecting side's
  uint8_t mac[32];
};
static_assert(sizeof(HelloMessage) == 88, "HelloMessage is a wire format");

struct HelloAck {
  uint32_t magic;
  int32_t code;  // a Code; kOk when accepted
  uint8_t mac[32];
};
static_assert(sizeof(HelloAck) == 40, "HelloAck is a wire format");

// What the accepting rank knows about itself, to judge a Hello against.
struct HelloExpectation {
  uint64_t job_id;
  int32_t rank;
  int32_t world_size;
  int32_t stream_count;
  uint32_t flags;
};

Hello make_hello(uint64_t job_id, int from, int to, int world_size, int stream_index, int stream_count,
                 uint32_t flags = 0);

// Who a message that introduces a peer (a TCP Hello, an RDMA address) says
// it comes from, as far as every such message says it: the checks they all
// pass, with the same errors. `what` names the message ("connection",
// "RDMA address"); `protocol` its protocol ("protocol", "RDMA protocol").
struct PeerIdentity {
  uint32_t magic;
  uint32_t version;
  uint64_t job_id;
  int32_t world_size;
};
Status check_peer_identity(const PeerIdentity& claimed, const PeerIdentity& expected, const std::string& what,
                           const std::string& protocol);
Status check_hello(const Hello& hello, const HelloExpectation& expected);

Challenge make_challenge();
Status check_challenge(const Challenge& challenge);

HelloMessage make_hello_message(const Hello& hello, const Challenge& challenge, const std::string& secret);
// AUTH when the MAC is wrong (a stranger, or a different KOLO_SECRET), else
// check_hello's verdict.
Status check_hello_message(const HelloMessage& message, const Challenge& challenge,
                           const HelloExpectation& expected, const std::string& secret);

HelloAck make_ack(Code verdict, const HelloMessage& message, const Challenge& challenge, const std::string& secret);
// Checks the verdict and, when accepted, that the acceptor knows the secret.
Status check_ack(const HelloAck& ack, const HelloMessage& message, const Challenge& challenge,
                 const std::string& secret, const std::string& who);

// What a connection's keys are derived from besides the job's secret
// (KOLO_ENCRYPT): both sides' nonces, fresh for every connection.
std::string link_salt(const Challenge& challenge, const HelloMessage& message);

// Stable 64-bit identity of a job from its name (FNV-1a).
uint64_t job_id_from_name(const std::string& name);

}  // namespace kolo
