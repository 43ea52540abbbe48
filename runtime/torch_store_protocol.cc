#include "runtime/torch_store_protocol.h"

namespace kolo {
namespace {

void put_u64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

void put_bytes(std::string* out, const std::string& s) {
  put_u64(out, s.size());
  out->append(s);
}

std::string start(TorchQuery q) { return std::string(1, static_cast<char>(q)); }

std::string keys_request(TorchQuery q, const std::vector<std::string>& keys) {
  std::string r = start(q);
  put_u64(&r, keys.size());
  for (const auto& k : keys) put_bytes(&r, k);
  return r;
}

}  // namespace

std::string torch_validate_request() {
  std::string r = start(TorchQuery::kValidate);
  for (int i = 0; i < 4; ++i) r.push_back(static_cast<char>((kTorchValidationMagic >> (8 * i)) & 0xff));
  return r;
}

std::string torch_set_request(const std::string& key, const std::string& value) {
  std::string r = start(TorchQuery::kSet);
  put_bytes(&r, key);
  put_bytes(&r, value);
  return r;
}

std::string torch_compare_set_request(const std::string& key, const std::string& expected,
                                      const std::string& desired) {
  std::string r = start(TorchQuery::kCompareSet);
  put_bytes(&r, key);
  put_bytes(&r, expected);
  put_bytes(&r, desired);
  return r;
}

std::string torch_get_request(const std::string& key) {
  std::string r = start(TorchQuery::kGet);
  put_bytes(&r, key);
  return r;
}

std::string torch_add_request(const std::string& key, int64_t delta) {
  std::string r = start(TorchQuery::kAdd);
  put_bytes(&r, key);
  put_u64(&r, static_cast<uint64_t>(delta));
  return r;
}

std::string torch_check_request(const std::vector<std::string>& keys) {
  return keys_request(TorchQuery::kCheck, keys);
}

std::string torch_wait_request(const std::vector<std::string>& keys) {
  return keys_request(TorchQuery::kWait, keys);
}

TorchReplyKind torch_reply_kind(TorchQuery query) {
  switch (query) {
    case TorchQuery::kAdd:
      return TorchReplyKind::kInt64;
    case TorchQuery::kCheck:
      return TorchReplyKind::kCheck;
    case TorchQuery::kWait:
      return TorchReplyKind::kWait;
    default:
      return TorchReplyKind::kValue;
  }
}

Status parse_torch_reply(TorchReplyKind kind, const char* data, size_t size, size_t max_value, bool* complete,
                         size_t* needed, TorchReply* reply) {
  *complete = false;
  switch (kind) {
    case TorchReplyKind::kCheck:
    case TorchReplyKind::kWait: {
      *needed = 1;
      if (size < 1) return Status::ok();
      uint8_t flag = static_cast<uint8_t>(data[0]);
      if (kind == TorchReplyKind::kCheck && flag != kTorchCheckReady && flag != kTorchCheckNotReady) {
        return transport_error("CHECK answered " + std::to_string(flag) + ", neither READY (0) nor NOT_READY (1)");
      }
      if (kind == TorchReplyKind::kWait && flag != kTorchStopWaiting) {
        return transport_error("WAIT answered " + std::to_string(flag) + ", not STOP_WAITING (0)");
      }
      reply->flag = flag;
      reply->consumed = 1;
      break;
    }
    case TorchReplyKind::kInt64:
      *needed = 8;
      if (size < 8) return Status::ok();
      reply->number = static_cast<int64_t>(get_u64(data));
      reply->consumed = 8;
      break;
    case TorchReplyKind::kValue: {
      *needed = 8;
      if (size < 8) return Status::ok();
      uint64_t n = get_u64(data);
      if (n > max_value) {
        return transport_error("a value of " + std::to_string(n) + " bytes, more than the " +
                               std::to_string(max_value) + " expected");
      }
      *needed = 8 + static_cast<size_t>(n);
      if (size < *needed) return Status::ok();
      reply->value.assign(data + 8, static_cast<size_t>(n));
      reply->consumed = *needed;
      break;
    }
  }
  *complete = true;
  return Status::ok();
}

}  // namespace kolo
