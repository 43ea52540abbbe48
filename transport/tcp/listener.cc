#include "transport/tcp/listener.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "common/log.h"
#include "transport/socket/address.h"
#include "transport/socket/congestion.h"

namespace kolo {

namespace asio = boost::asio;
using asio::ip::tcp;

Status TcpEndpoint::take(int from_rank, int stream_index, Deadline deadline, std::unique_ptr<tcp::socket>* out,
                         std::string* salt) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::pair<int, int> key{from_rank, stream_index};
  for (;;) {
    if (aborted_) return aborted("communicator aborted while waiting for rank " + std::to_string(from_rank));
    auto it = accepted_.find(key);
    if (it != accepted_.end()) {
      *out = std::move(it->second.socket);
      *salt = std::move(it->second.salt);
      accepted_.erase(it);
      claimed_.insert(key);
      return Status::ok();
    }
    if (cv_.wait_until(lock, deadline.time_point()) == std::cv_status::timeout && deadline.expired()) {
      return timeout_error("rank " + std::to_string(from_rank) + " did not connect to this rank in time");
    }
  }
}

bool TcpEndpoint::has_all(int from_rank, int streams) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < streams; ++i) {
    if (!accepted_.count({from_rank, i})) return false;
  }
  return true;
}

void TcpEndpoint::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }
  cv_.notify_all();
}

Status TcpEndpoint::check_new_link(const std::pair<int, int>& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (accepted_.count(key) || claimed_.count(key)) {
    return invalid_usage("duplicate connection for an existing link from rank " + std::to_string(key.first));
  }
  return Status::ok();
}

void TcpEndpoint::park(const std::pair<int, int>& key, std::unique_ptr<tcp::socket> socket, std::string salt) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    accepted_[key] = Accepted{std::move(socket), std::move(salt)};
  }
  cv_.notify_all();
}

// One connection between accept and verdict.
struct TcpListener::Pending {
  explicit Pending(asio::io_context& io) : socket(io), timer(io) {}
  tcp::socket socket;
  asio::steady_timer timer;
  Challenge challenge{};
  HelloMessage hello{};
  HelloAck ack{};
  std::string remote;
};

Status TcpListener::get(const std::string& bind_address, std::shared_ptr<TcpListener>* out) {
  boost::system::error_code ec;
  auto bind = asio::ip::make_address(bind_address, ec);
  if (ec) return invalid_argument("bad bind address '" + bind_address + "': " + ec.message());
  // Weakly held: the listener closes when its last transport lets go of it.
  static std::mutex registry_mutex;
  static std::map<std::string, std::weak_ptr<TcpListener>> registry;
  std::lock_guard<std::mutex> lock(registry_mutex);
  std::shared_ptr<TcpListener>& listener = *out;
  listener = registry[bind.to_string()].lock();
  if (listener) return Status::ok();
  listener.reset(new TcpListener());
  Status s = listener->start(bind);
  if (!s.is_ok()) {
    listener.reset();
    return s;
  }
  for (auto it = registry.begin(); it != registry.end();) {
    it = it->second.expired() ? registry.erase(it) : std::next(it);
  }
  registry[bind.to_string()] = listener;
  KOLO_DEBUG("tcp listener listening on " << format_endpoint(listener->endpoint()));
  return Status::ok();
}

TcpListener::~TcpListener() {
  if (acceptor_) {
    asio::post(io_, [this] {
      boost::system::error_code ec;
      acceptor_->close(ec);
    });
  }
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

Status TcpListener::start(const asio::ip::address& bind_address) {
  boost::system::error_code ec;
  acceptor_ = std::make_unique<tcp::acceptor>(io_);
  tcp::endpoint ep(bind_address, 0);
  acceptor_->open(ep.protocol(), ec);
  // Accepted connections begin with the listener's congestion control, and
  // most of a job's are within one host, where KOLO_TCP_CONGESTION=auto
  // wants Reno; the transport switches the others to what the setting
  // wants for them once accepted (transport/socket/congestion.h).
  if (!ec) begin_congestion_control(acceptor_->native_handle(), "reno");
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return transport_error("cannot listen on " + bind_address.to_string() + ": " + ec.message());
  endpoint_ = acceptor_->local_endpoint(ec);
  if (ec) return transport_error("cannot read listening address: " + ec.message());
  accept_next();
  thread_ = std::thread([this] {
    // Handlers never throw; the loop ends when the listener stops io_.
    io_.run();
  });
  return Status::ok();
}

void TcpListener::listen(const HelloExpectation& expectation, const std::string& secret, double handshake_timeout_s,
                       std::shared_ptr<TcpEndpoint>* out) {
  auto endpoint = std::make_shared<TcpEndpoint>(expectation, secret, handshake_timeout_s);
  std::lock_guard<std::mutex> lock(mutex_);
  endpoints_[Key{expectation.job_id, expectation.rank}].push_back(endpoint);
  *out = std::move(endpoint);
}

void TcpListener::unlisten(const std::shared_ptr<TcpEndpoint>& endpoint) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = endpoints_.find(Key{endpoint->expectation_.job_id, endpoint->expectation_.rank});
  if (it == endpoints_.end()) return;
  auto& list = it->second;
  list.erase(std::remove(list.begin(), list.end(), endpoint), list.end());
  if (list.empty()) endpoints_.erase(it);
}

size_t TcpListener::endpoint_count() {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& entry : endpoints_) n += entry.second.size();
  return n;
}

double TcpListener::handshake_timeout_s() {
  // A peer gets the most time any endpoint allows; a stranger never blocks
  // anyone meanwhile, as each handshake runs on its own.
  std::lock_guard<std::mutex> lock(mutex_);
  double t = 0;
  for (const auto& entry : endpoints_) {
    for (const auto& endpoint : entry.second) t = std::max(t, endpoint->handshake_timeout_s_);
  }
  return t > 0 ? t : 10.0;
}

std::vector<std::shared_ptr<TcpEndpoint>> TcpListener::find(const Hello& hello) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = endpoints_.find(Key{hello.job_id, hello.to_rank});
  if (it != endpoints_.end()) return it->second;
  // Another rank of the same communicator lives here: its expectation says
  // what is wrong with the Hello (the rank it names), once the MAC shows
  // that the sender knows the secret.
  it = endpoints_.lower_bound(Key{hello.job_id, INT_MIN});
  if (it != endpoints_.end() && it->first.first == hello.job_id) return {it->second.back()};
  return {};
}

void TcpListener::accept_next() {
  auto pending = std::make_shared<Pending>(io_);
  acceptor_->async_accept(pending->socket, [this, pending](const boost::system::error_code& ec) {
    if (ec == asio::error::operation_aborted || !acceptor_->is_open()) return;
    if (!ec) {
      boost::system::error_code ep_ec;
      auto remote = pending->socket.remote_endpoint(ep_ec);
      pending->remote = ep_ec ? "unknown peer" : format_endpoint(remote);
      // A peer gets a bounded time to introduce itself; then it is dropped.
      pending->timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(handshake_timeout_s())));
      pending->timer.async_wait([pending](const boost::system::error_code& tec) {
        if (tec) return;  // cancelled: the handshake finished first
        KOLO_WARN("dropped connection from " << pending->remote << ": no handshake within the deadline");
        boost::system::error_code cec;
        pending->socket.close(cec);
      });
      pending->challenge = make_challenge();
      asio::async_write(
          pending->socket, asio::buffer(&pending->challenge, sizeof(Challenge)),
          [this, pending](const boost::system::error_code& wec, size_t) {
            if (wec) return;
            asio::async_read(pending->socket, asio::buffer(&pending->hello, sizeof(HelloMessage)),
                             [this, pending](const boost::system::error_code& rec, size_t) {
                               pending->timer.cancel();
                               if (rec) {
                                 KOLO_WARN("dropped connection from " << pending->remote
                                                                      << ": closed before a full handshake");
                                 return;
                               }
                               on_hello(pending);
                             });
          });
    }
    accept_next();
  });
}

void TcpListener::on_hello(const std::shared_ptr<Pending>& pending) {
  // Look up first, then verify: each endpoint has its own secret. The
  // newest endpoint that accepts the Hello and lacks the link takes it;
  // else the newest one's verdict, preferring one that knew the secret.
  std::shared_ptr<TcpEndpoint> endpoint;
  Status verdict = auth_error("connection for no communicator of this process (another job?)");
  const std::pair<int, int> key{pending->hello.hello.from_rank, pending->hello.hello.stream_index};
  const std::vector<std::shared_ptr<TcpEndpoint>> candidates = find(pending->hello.hello);
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    Status v = check_hello_message(pending->hello, pending->challenge, (*it)->expectation_, (*it)->secret_);
    if (v.is_ok()) v = (*it)->check_new_link(key);
    if (v.is_ok()) {
      endpoint = *it;
      verdict = v;
      break;
    }
    if (it == candidates.rbegin() || (verdict.code() == Code::kAuth && v.code() != Code::kAuth)) verdict = v;
  }
  if (!verdict.is_ok()) {
    pending->ack = make_ack(verdict.code(), pending->hello, pending->challenge, std::string());
    KOLO_WARN("rejected connection from " << pending->remote << ": " << verdict.message());
    // Tell a misconfigured member why, then drop it. A stranger learns only a code.
    asio::async_write(pending->socket, asio::buffer(&pending->ack, sizeof(HelloAck)),
                      [pending](const boost::system::error_code&, size_t) {
                        boost::system::error_code cec;
                        pending->socket.close(cec);
                      });
    return;
  }
  pending->ack = make_ack(verdict.code(), pending->hello, pending->challenge, endpoint->secret_);
  asio::async_write(pending->socket, asio::buffer(&pending->ack, sizeof(HelloAck)),
                    [pending, endpoint, key](const boost::system::error_code& wec, size_t) {
                      if (wec) {
                        KOLO_WARN("connection from " << pending->remote << " failed during handshake: "
                                                     << wec.message());
                        return;
                      }
                      endpoint->park(key, std::make_unique<tcp::socket>(std::move(pending->socket)),
                                     link_salt(pending->challenge, pending->hello));
                    });
}

}  // namespace kolo
