#include "common/status.h"

#include <cstring>

namespace kolo {

const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kInvalidUsage: return "INVALID_USAGE";
    case Code::kTimeout: return "TIMEOUT";
    case Code::kPeerLost: return "PEER_LOST";
    case Code::kMismatch: return "MISMATCH";
    case Code::kTransport: return "TRANSPORT";
    case Code::kAuth: return "AUTH";
    case Code::kAborted: return "ABORTED";
    case Code::kUnsupported: return "UNSUPPORTED";
    case Code::kInternal: return "INTERNAL";
    case Code::kDevice: return "DEVICE";
    case Code::kRevoked: return "REVOKED";
  }
  return "UNKNOWN";
}

const std::string& Status::message() const {
  static const std::string none;
  return rep_ ? rep_->message : none;
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  return std::string(code_name(code())) + ": " + message();
}

Status Status::with_context(const std::string& context) const {
  if (is_ok()) return *this;
  return Status(code(), context + ": " + message());
}

Status invalid_argument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
Status invalid_usage(std::string m) { return Status(Code::kInvalidUsage, std::move(m)); }
Status timeout_error(std::string m) { return Status(Code::kTimeout, std::move(m)); }
Status peer_lost(std::string m) { return Status(Code::kPeerLost, std::move(m)); }
Status mismatch(std::string m) { return Status(Code::kMismatch, std::move(m)); }
Status transport_error(std::string m) { return Status(Code::kTransport, std::move(m)); }
Status auth_error(std::string m) { return Status(Code::kAuth, std::move(m)); }
Status aborted(std::string m) { return Status(Code::kAborted, std::move(m)); }
Status revoked(std::string m) { return Status(Code::kRevoked, std::move(m)); }
Status unsupported(std::string m) { return Status(Code::kUnsupported, std::move(m)); }
Status internal_error(std::string m) { return Status(Code::kInternal, std::move(m)); }
Status device_error(std::string m) { return Status(Code::kDevice, std::move(m)); }

Status errno_error(Code code, const std::string& what, int err) {
  char buf[128];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* text = strerror_r(err, buf, sizeof(buf));
  return Status(code, what + ": " + text + " (errno " + std::to_string(err) + ")");
}

}  // namespace kolo
