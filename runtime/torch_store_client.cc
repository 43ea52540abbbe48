#include "runtime/torch_store_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "transport/socket/address.h"
#include "transport/socket/io.h"

namespace kolo {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr size_t kMaxValue = 64u << 20;

}  // namespace

Status TorchStoreClient::connect(const std::string& host, int port, const std::string& key_prefix, double timeout_s,
                                 Deadline deadline, std::unique_ptr<TorchStoreClient>* out) {
  std::unique_ptr<TorchStoreClient> c(new TorchStoreClient());
  c->host_ = host;
  c->port_ = port;
  c->server_ = host + ":" + std::to_string(port);
  c->prefix_ = key_prefix;
  c->timeout_s_ = timeout_s;
  KOLO_RETURN_IF_ERROR(c->open(deadline));
  *out = std::move(c);
  return Status::ok();
}

Status TorchStoreClient::open(Deadline deadline) {
  socket_.reset();
  tcp::endpoint ep;
  KOLO_RETURN_IF_ERROR(resolve_endpoint(host_, port_, &ep));
  // The agent starts its store before the workers, but a restarted agent
  // may still be binding.
  std::unique_ptr<tcp::socket> socket;
  Status connected = connect_with_retry(io_, ep, deadline, "connecting to torchrun's store at " + server_, &socket);
  if (connected.code() == Code::kTimeout) {
    return timeout_error("could not reach torchrun's store at " + server_ +
                         " (TORCHELASTIC_USE_AGENT_STORE is set: the torchrun agent serves it at MASTER_ADDR:MASTER_PORT)");
  }
  KOLO_RETURN_IF_ERROR(connected);
  boost::system::error_code ec;
  auto local = socket->local_endpoint(ec);
  if (!ec) local_address_ = local.address().to_string();
  // torch 2's greeting, before any request (it has no reply).
  const std::string hello = torch_validate_request();
  KOLO_RETURN_IF_ERROR(write_fully(*socket, hello.data(), hello.size(), deadline, "greeting torchrun's store at " + server_));
  socket_ = std::move(socket);
  return Status::ok();
}

std::string TorchStoreClient::where(const std::string& key) const {
  return "torchrun's store at " + server_ + ", key '" + prefix_ + key + "'";
}

std::string TorchStoreClient::local_address() const { return local_address_; }

Status TorchStoreClient::request(TorchQuery query, const std::string& body, const std::string& what,
                                 Deadline deadline, TorchReply* reply) {
  if (!socket_) KOLO_RETURN_IF_ERROR(open(deadline));
  const std::string context = "talking to " + what;
  Status s = write_fully(*socket_, body.data(), body.size(), deadline, context);
  if (s.is_ok() && query != TorchQuery::kSet) {
    std::string buffer;
    bool complete = false;
    size_t needed = 1;
    while (s.is_ok()) {
      s = parse_torch_reply(torch_reply_kind(query), buffer.data(), buffer.size(), kMaxValue, &complete, &needed,
                            reply);
      if (!s.is_ok()) s = transport_error("malformed reply from " + what + ": " + s.message());
      if (!s.is_ok() || complete) break;
      size_t have = buffer.size();
      buffer.resize(needed);
      s = read_fully(*socket_, &buffer[have], needed - have, deadline, context);
    }
  }
  if (!s.is_ok()) socket_.reset();  // out of step with the server: start over on the next request
  return s;
}

Status TorchStoreClient::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  TorchReply reply;
  return request(TorchQuery::kSet, torch_set_request(prefix_ + key, value), where(key),
                 Deadline::after_seconds(timeout_s_), &reply);
}

Status TorchStoreClient::set_if_absent(const std::string& key, const std::string& value, Deadline deadline,
                                       std::string* current) {
  std::lock_guard<std::mutex> lock(mutex_);
  TorchReply reply;
  KOLO_RETURN_IF_ERROR(request(TorchQuery::kCompareSet, torch_compare_set_request(prefix_ + key, "", value),
                               where(key), deadline, &reply));
  *current = std::move(reply.value);
  return Status::ok();
}

Status TorchStoreClient::add(const std::string& key, int64_t delta, Deadline deadline, int64_t* sum) {
  std::lock_guard<std::mutex> lock(mutex_);
  TorchReply reply;
  KOLO_RETURN_IF_ERROR(request(TorchQuery::kAdd, torch_add_request(prefix_ + key, delta), where(key), deadline, &reply));
  *sum = reply.number;
  return Status::ok();
}

Status TorchStoreClient::check(const std::vector<std::string>& keys, Deadline deadline, bool* all_set) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(prefix_ + k);
  TorchReply reply;
  KOLO_RETURN_IF_ERROR(request(TorchQuery::kCheck, torch_check_request(full), "torchrun's store at " + server_,
                               deadline, &reply));
  *all_set = reply.flag == kTorchCheckReady;
  return Status::ok();
}

// WAIT for all keys. On the deadline the connection is closed (the server
// forgets the waiter with it, and no CANCEL_WAIT is needed); a fresh one then asks which keys are missing, for the error.
Status TorchStoreClient::wait_keys(const std::vector<std::string>& keys, Deadline deadline) {
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(prefix_ + k);
  TorchReply reply;
  Status s = request(TorchQuery::kWait, torch_wait_request(full), "torchrun's store at " + server_, deadline, &reply);
  if (s.code() != Code::kTimeout) return s;
  std::string missing;
  // A second to tell which keys are missing (a store's trip, as kolo's own
  // client allows): a stuck store costs the caller's deadline and that.
  Deadline probe = Deadline::after_seconds(1);
  for (size_t i = 0; i < keys.size(); ++i) {
    TorchReply r;
    if (!request(TorchQuery::kCheck, torch_check_request({full[i]}), server_, probe, &r).is_ok()) break;
    if (r.flag != kTorchCheckReady) missing += (missing.empty() ? "" : ", ") + keys[i];
  }
  return timeout_error("store keys never set: " + (missing.empty() ? std::string("(could not tell which)") : missing) +
                       " (in torchrun's store at " + server_ + ", key prefix '" + prefix_ + "')");
}

Status TorchStoreClient::get(const std::vector<std::string>& keys, Deadline deadline,
                             std::vector<std::string>* values) {
  std::lock_guard<std::mutex> lock(mutex_);
  KOLO_RETURN_IF_ERROR(wait_keys(keys, deadline));
  std::vector<std::string> out(keys.size());
  // The keys exist now; the GETs get what is left of the deadline, which
  // the wait may have nearly used up, and a second more: a store's trip.
  Deadline io = Deadline::after(std::max(deadline.time_point() - Deadline::Clock::now(), Deadline::Clock::duration(0)) +
                                std::chrono::seconds(1));
  for (size_t i = 0; i < keys.size(); ++i) {
    TorchReply reply;
    KOLO_RETURN_IF_ERROR(request(TorchQuery::kGet, torch_get_request(prefix_ + keys[i]), where(keys[i]), io, &reply));
    out[i] = std::move(reply.value);
  }
  *values = std::move(out);
  return Status::ok();
}

}  // namespace kolo
