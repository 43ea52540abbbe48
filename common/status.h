// Errors as values. Every fallible internal call returns a Status; the C API
// converts it to a kolo_result_t plus a message. OK is a null pointer: the
// success path, which every call takes through a dozen layers, builds,
// moves and destroys one word, where a code and an empty string would cost
// several stores and a compare each time.
#pragma once

#include <memory>
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
  Status(Code code, std::string message)
      : rep_(code == Code::kOk && message.empty() ? nullptr : new Rep{code, std::move(message)}) {}
  Status(const Status& other) : rep_(other.rep_ ? new Rep(*other.rep_) : nullptr) {}
  Status(Status&&) noexcept = default;
  Status& operator=(const Status& other) {
    if (this != &other) rep_.reset(other.rep_ ? new Rep(*other.rep_) : nullptr);
    return *this;
  }
  Status& operator=(Status&&) noexcept = default;

  static Status ok() { return Status(); }

  bool is_ok() const { return code() == Code::kOk; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  const std::string& message() const;

  // "CODE: message", for logs and test failure output.
  std::string to_string() const;

  // Prefixes context ("while connecting to rank 3: ...") keeping the code.
  Status with_context(const std::string& context) const;

 private:
  struct Rep {
    Code code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;  // null: OK with no message
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
