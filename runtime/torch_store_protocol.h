// The wire protocol of PyTorch 2's c10d TCPStore (the store torchrun's
// agent serves), as far as kolo speaks it. Checked against torch 2.13's
// TCPStoreBackend.hpp (its QueryType enum) and its Python client.
//
// A connection opens with VALIDATE (the query byte and a 4-byte magic
// number; no reply), as torch's own clients do. A request is then one
// query-type byte followed by its arguments, with no authentication.
// Integers are 8 bytes, little-endian (the native order of every platform
// torch runs on); a key or value is a uint64 length followed by that many
// bytes. The replies:
//   VALIDATE     uint32 magic                    -> none
//   SET          key, value                      -> none
//   COMPARE_SET  key, expected, desired          -> value (the key's value afterwards;
//                                                   an absent key is set only when expected is empty)
//   GET          key                             -> value (the key must exist: WAIT first)
//   ADD          key, int64 delta                -> int64 (the sum)
//   CHECK        uint64 n, n keys                -> 1 byte: 0 all set, 1 not yet
//   WAIT         uint64 n, n keys                -> 1 byte 0 once all are set (no reply
//                                                   before; kolo never cancels a wait)
// torch 1.x's protocol had no VALIDATE, so its query bytes are one lower:
// kolo no longer speaks it.
// Pure: builds requests and parses replies; no I/O (unit-tested and fuzzed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace kolo {

enum class TorchQuery : uint8_t { kValidate = 0, kSet = 1, kCompareSet = 2, kGet = 3, kAdd = 4, kCheck = 5, kWait = 6 };

// What VALIDATE carries (TCPStoreBackend.hpp's validationMagicNumber).
constexpr uint32_t kTorchValidationMagic = 0x3C85F7CE;

constexpr uint8_t kTorchCheckReady = 0;
constexpr uint8_t kTorchCheckNotReady = 1;
constexpr uint8_t kTorchStopWaiting = 0;

std::string torch_validate_request();
std::string torch_set_request(const std::string& key, const std::string& value);
std::string torch_compare_set_request(const std::string& key, const std::string& expected,
                                      const std::string& desired);
std::string torch_get_request(const std::string& key);
std::string torch_add_request(const std::string& key, int64_t delta);
std::string torch_check_request(const std::vector<std::string>& keys);
std::string torch_wait_request(const std::vector<std::string>& keys);

// What a reply looks like, by the request it answers.
enum class TorchReplyKind { kValue, kInt64, kCheck, kWait };

TorchReplyKind torch_reply_kind(TorchQuery query);

struct TorchReply {
  std::string value;      // kValue
  int64_t number = 0;     // kInt64
  uint8_t flag = 0;       // kCheck, kWait
  size_t consumed = 0;    // bytes of the buffer the reply took
};

// Parses one reply from the start of `data`. *complete is false (and the
// status OK) while more bytes are needed; *needed then says how many bytes
// the buffer must hold at least before trying again. A value longer than
// `max_value` or a flag outside its enum is an error.
Status parse_torch_reply(TorchReplyKind kind, const char* data, size_t size, size_t max_value, bool* complete,
                         size_t* needed, TorchReply* reply);

}  // namespace kolo
