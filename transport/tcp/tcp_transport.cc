#include "transport/tcp/tcp_transport.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>

#include "common/log.h"
#include "transport/handshake.h"
#include "transport/socket/address.h"
#include "transport/socket/congestion.h"
#include "transport/socket/io.h"

namespace kolo {

namespace asio = boost::asio;
using asio::ip::tcp;

TcpTransport::TcpTransport(Store* store, int rank, int size, const TcpOptions& options)
    : store_(store), rank_(rank), size_(size), options_(options) {}

TcpTransport::~TcpTransport() {
  abort();
  // Sockets live on the listener's io_context: close them before letting go
  // of the listener, which may be the last reference.
  pairs_.clear();
  if (listener_ && endpoint_) listener_->unlisten(endpoint_);
  endpoint_.reset();
  listener_.reset();
}

Status TcpTransport::create(Store* store, int rank, int size, const TcpOptions& options,
                            std::unique_ptr<TcpTransport>* out) {
  if (options.streams_per_peer < 1 || options.streams_per_peer > 64) {
    return invalid_argument("sockets per peer must be in [1, 64], got " + std::to_string(options.streams_per_peer));
  }
  if (options.encrypt && options.secret.empty()) {
    return invalid_argument("KOLO_ENCRYPT=1 needs the job's secret (KOLO_SECRET; kolorun and kolo_get_unique_id "
                            "make one): the connections' keys are derived from it");
  }
  // Every rank refuses a bad name here, before any connection, rather than
  // the first to dial leaving its peers waiting for it.
  KOLO_RETURN_IF_ERROR(check_congestion_setting(options.congestion));
  std::unique_ptr<TcpTransport> t(new TcpTransport(store, rank, size, options));
  KOLO_RETURN_IF_ERROR(t->start());
  *out = std::move(t);
  return Status::ok();
}

Status TcpTransport::start() {
  KOLO_RETURN_IF_ERROR(loop_.open());
  KOLO_RETURN_IF_ERROR(TcpListener::get(options_.bind_address, &listener_));
  HelloExpectation expect{options_.job_id, rank_, size_, options_.streams_per_peer, hello_flags()};
  listener_->listen(expect, options_.secret, options_.handshake_timeout_s, &endpoint_);
  KOLO_RETURN_IF_ERROR(store_->set(options_.store_prefix + std::to_string(rank_), listen_address()));
  KOLO_DEBUG("tcp transport listening on " << listen_address());
  return Status::ok();
}

uint32_t TcpTransport::hello_flags() const {
  return (options_.checksum ? kHelloFlagChecksum : 0u) | (options_.encrypt ? kHelloFlagEncrypt : 0u);
}

std::string TcpTransport::listen_address() const { return format_endpoint(listener_->endpoint()); }

Status TcpTransport::connect_stream(int peer, const std::string& address, int stream_index, Deadline deadline,
                                    std::unique_ptr<tcp::socket>* out, std::string* salt) {
  const std::string who = "rank " + std::to_string(peer) + " (" + address + ")";
  std::string host;
  int port = 0;
  KOLO_RETURN_IF_ERROR(split_host_port(address, &host, &port));
  tcp::endpoint ep;
  KOLO_RETURN_IF_ERROR(resolve_endpoint(host, port, &ep));

  sockaddr_storage destination{};
  std::memcpy(&destination, ep.data(), std::min(sizeof(destination), static_cast<size_t>(ep.size())));
  const bool this_host = is_this_hosts_address(destination);

  // The peer published its address only after it started listening, so a
  // refused connection means it is gone; still retry briefly in case its
  // backlog was momentarily full.
  for (int attempt = 0;; ++attempt) {
    if (loop_.aborted()) return aborted("communicator aborted while connecting to " + who);
    asio::io_context& io = listener_->io();
    auto socket = std::make_unique<tcp::socket>(io);
    boost::system::error_code opened;
    socket->open(ep.protocol(), opened);
    if (!opened) {
      begin_congestion_control(socket->native_handle(), congestion_control_for(options_.congestion, this_host));
    }
    std::promise<boost::system::error_code> done;
    auto result = done.get_future();
    asio::post(io, [&] { socket->async_connect(ep, [&](const boost::system::error_code& ec) { done.set_value(ec); }); });
    if (result.wait_until(deadline.time_point()) == std::future_status::timeout) {
      asio::post(io, [&] {
        boost::system::error_code ignored;
        socket->cancel(ignored);
      });
      result.wait();
      return timeout_error("timed out connecting to " + who);
    }
    boost::system::error_code ec = result.get();
    if (ec) {
      if (attempt < 20 && !deadline.expired() && ec == asio::error::connection_refused) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10 * (attempt + 1)));
        continue;
      }
      return peer_lost("cannot connect to " + who + ": " + ec.message());
    }
    KOLO_RETURN_IF_ERROR(configure_data_socket(*socket, options_.socket_buffer_bytes, options_.congestion));
    Challenge challenge{};
    KOLO_RETURN_IF_ERROR(
        read_fully(*socket, &challenge, sizeof(challenge), deadline, "waiting for the handshake challenge from " + who));
    KOLO_RETURN_IF_ERROR(check_challenge(challenge).with_context(who));
    Hello hello = make_hello(options_.job_id, rank_, peer, size_, stream_index, options_.streams_per_peer,
                             hello_flags());
    HelloMessage message = make_hello_message(hello, challenge, options_.secret);
    KOLO_RETURN_IF_ERROR(write_fully(*socket, &message, sizeof(message), deadline, "sending handshake to " + who));
    HelloAck ack{};
    KOLO_RETURN_IF_ERROR(read_fully(*socket, &ack, sizeof(ack), deadline, "waiting for handshake reply from " + who));
    KOLO_RETURN_IF_ERROR(check_ack(ack, message, challenge, options_.secret, who));
    *out = std::move(socket);
    *salt = link_salt(challenge, message);
    return Status::ok();
  }
}

Status TcpTransport::connect(int peer, Deadline deadline) {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return invalid_argument("cannot connect rank " + std::to_string(rank_) + " to rank " + std::to_string(peer));
  }
  if (pairs_.contains(peer)) return Status::ok();
  std::string address;
  Status s = store_->get_one(options_.store_prefix + std::to_string(peer), deadline, &address);
  if (s.code() == Code::kTimeout) {
    return timeout_error("rank " + std::to_string(peer) + " never published its address (did it start?)");
  }
  KOLO_RETURN_IF_ERROR(s);

  // One side dials, the other accepts: the lower rank dials, so both agree
  // without talking and no pair is ever connected twice.
  std::vector<std::unique_ptr<tcp::socket>> sockets(options_.streams_per_peer);
  std::vector<std::unique_ptr<SealedStream>> sealed;
  for (int i = 0; i < options_.streams_per_peer; ++i) {
    std::string salt;
    if (rank_ < peer) {
      KOLO_RETURN_IF_ERROR(connect_stream(peer, address, i, deadline, &sockets[i], &salt));
    } else {
      Status taken = endpoint_->take(peer, i, deadline, &sockets[i], &salt);
      if (taken.code() == Code::kTimeout) {
        return timeout_error("rank " + std::to_string(peer) + " (" + address + ") did not connect to this rank in time");
      }
      KOLO_RETURN_IF_ERROR(taken);
      KOLO_RETURN_IF_ERROR(configure_data_socket(*sockets[i], options_.socket_buffer_bytes, options_.congestion));
    }
    if (options_.encrypt) {
      sealed.emplace_back();
      KOLO_RETURN_IF_ERROR(SealedStream::create(options_.secret, salt, rank_ < peer, &sealed.back()));
    }
  }
  auto pair = std::make_unique<TcpPair>(peer, address, std::move(sockets), options_.checksum,
                                        options_.socket_buffer_bytes, std::move(sealed));
  TcpPair* added = pair.get();
  KOLO_RETURN_IF_ERROR(pairs_.add(peer, std::move(pair), [&](TcpPair& p) {
    if (!loop_.aborted()) return Status::ok();
    p.shutdown();  // an abort raced with this connect
    return aborted("communicator aborted while connecting to rank " + std::to_string(peer));
  }));
  active_.push_back(added);
  KOLO_DEBUG("connected to rank " << peer << " at " << address << " with " << options_.streams_per_peer
                                  << " socket(s), congestion control " << congestion_control_of(added->first_fd()));
  return Status::ok();
}

int TcpTransport::socket_fd(int peer) {
  TcpPair* pair = pairs_.find(peer);
  return pair ? pair->first_fd() : -1;
}

Status TcpTransport::post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) {
  TcpPair* pair = nullptr;
  KOLO_RETURN_IF_ERROR(pairs_.lookup_from_collective(peer, rank_, &pair));
  pair->post_send(data, bytes, tag, request);
  return Status::ok();
}

Status TcpTransport::post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) {
  TcpPair* pair = nullptr;
  KOLO_RETURN_IF_ERROR(pairs_.lookup_from_collective(peer, rank_, &pair));
  pair->post_recv(data, bytes, tag, request);
  return Status::ok();
}

Status TcpTransport::pump(Pumped* pumped) {
  for (TcpPair* p : active_) {
    if (p->has_pending()) KOLO_RETURN_IF_ERROR(p->pump(&pumped->completed, &pumped->moved));
  }
  if (!watched_.empty()) {
    for (TcpPair* p : watched_) {
      Arrival next;
      KOLO_RETURN_IF_ERROR(p->peek(&next));
      if (next.state != Arrival::kNothing) pumped->noticed = true;
    }
  }
  return Status::ok();
}

Status TcpTransport::try_connect(int peer, Deadline deadline, bool* connected) {
  *connected = false;
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return invalid_argument("cannot connect rank " + std::to_string(rank_) + " to rank " + std::to_string(peer));
  }
  if (pairs_.contains(peer)) {
    *connected = true;
    return Status::ok();
  }
  // The accepting side: connect() would wait for the peer's dial.
  if (rank_ > peer && !endpoint_->has_all(peer, options_.streams_per_peer)) return Status::ok();
  KOLO_RETURN_IF_ERROR(connect(peer, deadline));
  *connected = true;
  return Status::ok();
}

Status TcpTransport::peek(int peer, Arrival* next) {
  TcpPair* pair = nullptr;
  KOLO_RETURN_IF_ERROR(pairs_.lookup_from_collective(peer, rank_, &pair));
  return pair->peek(next);
}

Status TcpTransport::watch(const std::vector<int>& peers) {
  watched_.clear();
  for (int peer : peers) {
    TcpPair* pair = nullptr;
    KOLO_RETURN_IF_ERROR(pairs_.lookup_from_collective(peer, rank_, &pair));
    watched_.push_back(pair);
  }
  return Status::ok();
}

bool TcpTransport::has_pending() {
  for (TcpPair* p : active_) {
    if (p->has_pending()) return true;
  }
  return false;
}

Status TcpTransport::sleep(Deadline deadline, Pumped*) {
  pollfds_.clear();
  for (TcpPair* p : active_) {
    if (p->has_pending()) p->collect_pollfds(&pollfds_);
  }
  const size_t watched_at = pollfds_.size();
  for (TcpPair* p : watched_) p->collect_watch_pollfd(&pollfds_);
  int ready = 0;
  Status s = loop_.wait(&pollfds_, deadline.remaining_ms(), &ready);
  for (size_t i = 0; i < watched_.size(); ++i) watched_[i]->note_watch_events(pollfds_[watched_at + i].revents);
  return s;
}

std::string TcpTransport::describe_pending() {
  std::string what;
  for (TcpPair* p : active_) {
    if (!p->has_pending()) continue;
    if (!what.empty()) what += "; ";
    what += p->describe_pending();
  }
  return what;
}

Status TcpTransport::progress(Deadline deadline) {
  return loop_.run(
      deadline, [this](Pumped* pumped) { return pump(pumped); },
      [this](Deadline d, Pumped* pumped) { return sleep(d, pumped); }, [this] { return describe_pending(); });
}

void TcpTransport::interrupt() { loop_.interrupt(); }

void TcpTransport::abort() {
  // Ending the connections is how the neighbours learn of the failure at
  // once rather than at their deadline; they pass it on the same way. A
  // pair that connect() adds meanwhile is either shut here or sees the
  // abort there (PairTable::add).
  if (!loop_.abort()) return;
  (void)pairs_.for_each([](int, TcpPair& p) {
    p.shutdown();
    return Status::ok();
  });
  if (endpoint_) endpoint_->abort();
}

}  // namespace kolo
