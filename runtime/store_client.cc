#include "runtime/store_client.h"

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "common/hmac.h"
#include "runtime/store_protocol.h"
#include "transport/socket/address.h"
#include "transport/socket/io.h"

namespace kolo {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

struct OwnEndpoints {
  std::mutex mu;
  std::multiset<std::string> endpoints;
};

OwnEndpoints& own_endpoints() {
  static OwnEndpoints* e = new OwnEndpoints();  // outlives every static destructor that might touch it
  return *e;
}

}  // namespace

bool is_this_process_store_client(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(own_endpoints().mu);
  return own_endpoints().endpoints.count(endpoint) > 0;
}

StoreClient::~StoreClient() {
  if (endpoint_.empty()) return;
  std::lock_guard<std::mutex> lock(own_endpoints().mu);
  auto it = own_endpoints().endpoints.find(endpoint_);
  if (it != own_endpoints().endpoints.end()) own_endpoints().endpoints.erase(it);
}

Status StoreClient::connect(const std::string& host, int port, uint64_t job_id, int rank, const std::string& secret,
                            double request_timeout_s, Deadline deadline, std::unique_ptr<StoreClient>* out,
                            bool encrypt) {
  bool saw_other_run = false;
  for (int backoff_ms = 5;; backoff_ms = std::min(backoff_ms * 2, 100)) {
    bool other_job = false;
    Status s = connect_once(host, port, job_id, rank, secret, encrypt, deadline, &other_job, out);
    saw_other_run = saw_other_run || other_job;
    if (s.is_ok()) (*out)->request_timeout_s_ = request_timeout_s;
    if (s.is_ok() || (!other_job && !(saw_other_run && s.code() == Code::kTimeout))) return s;
    if (deadline.expired()) {
      return timeout_error("the rendezvous store at " + host + ":" + std::to_string(port) +
                           " served another run of this job (or another job with the same secret, or went away) "
                           "and never this one");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoff_ms, deadline.remaining_ms())));
  }
}

Status StoreClient::connect_once(const std::string& host, int port, uint64_t job_id, int rank,
                                 const std::string& secret, bool encrypt, Deadline deadline, bool* other_job,
                                 std::unique_ptr<StoreClient>* out) {
  std::unique_ptr<StoreClient> c(new StoreClient());
  c->server_ = host + ":" + std::to_string(port);
  tcp::endpoint ep;
  KOLO_RETURN_IF_ERROR(resolve_endpoint(host, port, &ep));
  // Rank 0 may not be listening yet.
  Status connected = connect_with_retry(c->io_, ep, deadline, "connecting to the rendezvous store", &c->socket_);
  if (connected.code() == Code::kTimeout) {
    return timeout_error("could not reach the rendezvous store at " + c->server_ +
                         " (rank 0 serves it: did rank 0 start, and is KOLO_MASTER_ADDR right?)");
  }
  KOLO_RETURN_IF_ERROR(connected);
  // The server opens with a challenge: [magic, nonce].
  const std::string what = "talking to the rendezvous store at " + c->server_;
  unsigned char len_buf[4];
  Status opened = read_fully(*c->socket_, len_buf, 4, deadline, what);
  if (opened.code() == Code::kPeerLost) {
    // Closed before its challenge: a store going away (an earlier run of
    // the job shutting down), or one not yet up; the next may be ours.
    *other_job = true;
    return opened;
  }
  KOLO_RETURN_IF_ERROR(opened);
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(len_buf[i]) << (8 * i);
  if (n == 0 || n > 128) return auth_error("the rendezvous store at " + c->server_ + " is not a kolo store");
  std::string challenge(n, '\0');
  KOLO_RETURN_IF_ERROR(read_fully(*c->socket_, &challenge[0], n, deadline, what));
  MessageReader cr(challenge.data(), challenge.size());
  uint32_t magic = 0;
  std::string server_nonce;
  if (!cr.u32(&magic) || magic != kStoreMagic || !cr.str(&server_nonce)) {
    return auth_error("the rendezvous store at " + c->server_ + " is not a kolo store");
  }
  const std::string client_nonce = random_bytes(16);
  MessageWriter hello;
  hello.u8(static_cast<uint8_t>(StoreOp::kHello));
  hello.u32(kStoreMagic);
  hello.u64(job_id);
  hello.u32(static_cast<uint32_t>(rank));
  hello.u8(encrypt ? 1 : 0);
  hello.str(client_nonce);
  hello.str(store_hello_mac(secret, server_nonce, job_id, static_cast<uint32_t>(rank), client_nonce, encrypt ? 1 : 0));
  std::string reply;
  Status s = c->round_trip(hello.finish(), deadline, &reply);
  if (!s.is_ok() && !reply.empty() && static_cast<uint8_t>(reply[0]) == static_cast<uint8_t>(StoreReply::kOtherJob)) {
    *other_job = true;
    return s;
  }
  if (s.code() == Code::kPeerLost) {
    *other_job = true;  // closed without a word: going away (a refusal is said, as kRejected)
    return s;
  }
  KOLO_RETURN_IF_ERROR(s);
  MessageReader rr(reply.data(), reply.size());
  uint8_t code = 0;
  std::string server_mac;
  if (!rr.u8(&code) || !rr.str(&server_mac) || server_mac.size() != Digest().size()) {
    return auth_error("the rendezvous store at " + c->server_ + " answered the handshake with garbage");
  }
  if (!store_macs_equal(store_ack_mac(secret, server_nonce, client_nonce), server_mac)) {
    return auth_error("the rendezvous store at " + c->server_ + " does not know this job's secret (KOLO_SECRET)");
  }
  if (encrypt) KOLO_RETURN_IF_ERROR(StoreSeal::create(secret, server_nonce, client_nonce, /*server_side=*/false, &c->seal_));
  boost::system::error_code ec;
  const tcp::endpoint local = c->socket_->local_endpoint(ec);
  if (!ec) {
    c->endpoint_ = format_endpoint(local);
    std::lock_guard<std::mutex> lock(own_endpoints().mu);
    own_endpoints().endpoints.insert(c->endpoint_);
  }
  *out = std::move(c);
  return Status::ok();
}

std::string StoreClient::local_address() const {
  boost::system::error_code ec;
  auto ep = socket_->local_endpoint(ec);
  return ec ? "127.0.0.1" : ep.address().to_string();
}

Status StoreClient::round_trip(const std::string& request, Deadline deadline, std::string* reply) {
  if (!broken_.is_ok()) return broken_;
  const std::string what = "talking to the rendezvous store at " + server_;
  // Once a request is on its way, a reply not read whole leaves the
  // connection out of step: nothing more is sent on it.
  const auto out_of_step = [&](const Status& s) {
    broken_ = Status(s.code(), s.message() + " (the connection to the store is unusable since)");
    return s;
  };
  const std::string sealed = seal_ ? seal_->seal(request) : std::string();
  const std::string& wire = seal_ ? sealed : request;
  Status s = write_fully(*socket_, wire.data(), wire.size(), deadline, what);
  if (!s.is_ok()) return out_of_step(s);
  unsigned char len_buf[4];
  s = read_fully(*socket_, len_buf, 4, deadline, what);
  if (!s.is_ok()) return out_of_step(s);
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(len_buf[i]) << (8 * i);
  if (n == 0 || n > kStoreMaxMessage) return out_of_step(transport_error("malformed reply " + what));
  reply->resize(n);
  s = read_fully(*socket_, &(*reply)[0], n, deadline, what);
  if (!s.is_ok()) return out_of_step(s);
  if (seal_ && !seal_->open(len_buf, reply)) {
    return out_of_step(transport_error("tampered or corrupt reply " + what +
                                       ": it failed to authenticate (KOLO_ENCRYPT); the connection is ended"));
  }
  uint8_t code = 0;
  MessageReader r(reply->data(), reply->size());
  if (!r.u8(&code)) return transport_error("malformed reply " + what);
  if (code != static_cast<uint8_t>(StoreReply::kOk)) {
    std::string text;
    r.str(&text);
    if (code == static_cast<uint8_t>(StoreReply::kTimeout)) return timeout_error("store keys never set: " + text);
    return auth_error("rejected by the rendezvous store: " + text);
  }
  return Status::ok();
}

namespace {

std::string key_value_request(StoreOp op, const std::string& key, const std::string& value) {
  MessageWriter w;
  w.u8(static_cast<uint8_t>(op));
  w.str(key);
  w.str(value);
  return w.finish();
}

}  // namespace

Status StoreClient::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string reply;
  return round_trip(key_value_request(StoreOp::kSet, key, value), Deadline::after_seconds(request_timeout_s_), &reply);
}

Status StoreClient::set_if_absent(const std::string& key, const std::string& value, Deadline deadline,
                                  std::string* current) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string reply;
  KOLO_RETURN_IF_ERROR(round_trip(key_value_request(StoreOp::kSetIfAbsent, key, value), deadline, &reply));
  MessageReader r(reply.data(), reply.size());
  uint8_t code = 0;
  if (!r.u8(&code) || !r.str(current)) return transport_error("malformed store reply");
  return Status::ok();
}

Status get_in_slices(Deadline deadline, const std::function<Status(Deadline)>& get_slice,
                     const std::function<Status()>& cancelled) {
  constexpr int kSliceMs = 50;
  Status waited;  // the last slice's timeout, naming the keys still missing
  for (;;) {
    KOLO_RETURN_IF_ERROR(cancelled());
    Status s = get_slice(Deadline::after(std::chrono::milliseconds(std::min(deadline.remaining_ms(), kSliceMs))));
    if (s.code() == Code::kTimeout && !deadline.expired()) {
      waited = s;
      continue;
    }
    if (s.code() == Code::kPeerLost && !waited.is_ok()) {
      return Status(Code::kTimeout, waited.message() + " (then the store closed)");
    }
    return s;
  }
}

Status StoreClient::ping(Deadline deadline) {
  std::lock_guard<std::mutex> lock(mutex_);
  MessageWriter w;
  w.u8(static_cast<uint8_t>(StoreOp::kGet));
  w.u32(0);  // no wait
  w.u32(0);  // no key: answered at once, with no values
  std::string reply;
  return round_trip(w.finish(), deadline, &reply);
}

Status StoreClient::get(const std::vector<std::string>& keys, Deadline deadline, std::vector<std::string>* values) {
  return get_in_slices(deadline, [&](Deadline slice) { return get_within(keys, slice, values); });
}

Status StoreClient::get_within(const std::vector<std::string>& keys, Deadline deadline,
                               std::vector<std::string>* values) {
  std::lock_guard<std::mutex> lock(mutex_);
  MessageWriter w;
  w.u8(static_cast<uint8_t>(StoreOp::kGet));
  const int wait_ms = deadline.remaining_ms();
  w.u32(static_cast<uint32_t>(wait_ms));
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) w.str(k);
  std::string reply;
  // The server answers once it has waited wait_ms (the slice's, never more
  // than what is left of the caller's deadline); a second more for the
  // answer's trip. A store that does not answer costs the caller's
  // deadline and that second, never more.
  const Deadline io_deadline = Deadline::after(std::chrono::milliseconds(wait_ms) + std::chrono::seconds(1));
  KOLO_RETURN_IF_ERROR(round_trip(w.finish(), io_deadline, &reply));
  MessageReader r(reply.data(), reply.size());
  uint8_t code = 0;
  uint32_t n = 0;
  if (!r.u8(&code) || !r.u32(&n) || n != keys.size()) return transport_error("malformed store reply");
  values->resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (!r.str(&(*values)[i])) return transport_error("malformed store reply");
  }
  return Status::ok();
}

}  // namespace kolo
