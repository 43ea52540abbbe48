// Errors as values. Every fallible internal call returns a Status; the C API
// converts it to a kolo_result_t plus a message. OK is a single enum, so the
// success path costs no allocation.
#pragma once

#include <string>
#include <utility>

namespace kolo {

// Mirrors kolo_result_t in bindings/c/kolo.h value for value.
enum class Code {
  kOk = 0,
  kInvalidArgument,
  kInvalidUsage,
  kTimeout,
  kPeerLost,
  kMismatch,
  kTransport,
  kAuth,
  kAborted,
  kUnsupported,
  kInternal,
  kDevice,
  kRevoked,
};
// The greatest code: decoders of codes sent between ranks refuse any above.
constexpr Code kLastCode = Code::kRevoked;

const char* code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "CODE: message", for logs and test failure output.
  std::string to_string() const;

  // Prefixes context ("while connecting to rank 3: ...") keeping the code.
  Status with_context(const std::string& context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

Status invalid_argument(std::string message);
Status invalid_usage(std::string message);
Status timeout_error(std::string message);
Status peer_lost(std::string message);
Status mismatch(std::string message);
Status transport_error(std::string message);
Status auth_error(std::string message);
Status aborted(std::string message);
Status unsupported(std::string message);
Status internal_error(std::string message);
Status device_error(std::string message);
Status revoked(std::string message);

// errno-carrying transport error: "what: strerror(errno) (errno N)".
Status errno_error(Code code, const std::string& what, int err);

}  // namespace kolo

// Returns early from the enclosing function when `expr` fails.
#define KOLO_RETURN_IF_ERROR(expr)            \
  do {                                        \
    ::kolo::Status kolo_status_ = (expr);     \
    if (!kolo_status_.is_ok()) return kolo_status_; \
  } while (0)
