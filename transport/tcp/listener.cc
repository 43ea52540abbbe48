#include "transport/tcp/listener.h"

#include <chrono>

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "common/log.h"
#include "transport/socket/address.h"

namespace kolo {

namespace asio = boost::asio;
using asio::ip::tcp;

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

TcpListener::TcpListener(asio::io_context& io, HelloExpectation expectation, std::string secret,
                         double handshake_timeout_s)
    : io_(io), expectation_(expectation), secret_(std::move(secret)), handshake_timeout_s_(handshake_timeout_s) {}

TcpListener::~TcpListener() {
  abort();
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
          std::chrono::duration<double>(handshake_timeout_s_)));
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
  Status verdict = check_hello_message(pending->hello, pending->challenge, expectation_, secret_);
  std::pair<int, int> key{pending->hello.hello.from_rank, pending->hello.hello.stream_index};
  if (verdict.is_ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (accepted_.count(key) || claimed_.count(key)) {
      verdict = invalid_usage("duplicate connection for an existing link from rank " + std::to_string(key.first));
    }
  }
  pending->ack = make_ack(verdict.code(), pending->hello, pending->challenge, secret_);
  if (!verdict.is_ok()) {
    KOLO_WARN("rejected connection from " << pending->remote << ": " << verdict.message());
    // Tell a misconfigured member why, then drop it. A stranger learns only a code.
    asio::async_write(pending->socket, asio::buffer(&pending->ack, sizeof(HelloAck)),
                      [pending](const boost::system::error_code&, size_t) {
                        boost::system::error_code cec;
                        pending->socket.close(cec);
                      });
    return;
  }
  asio::async_write(pending->socket, asio::buffer(&pending->ack, sizeof(HelloAck)),
                    [this, pending, key](const boost::system::error_code& wec, size_t) {
                      if (wec) {
                        KOLO_WARN("connection from " << pending->remote << " failed during handshake: "
                                                     << wec.message());
                        return;
                      }
                      auto socket = std::make_unique<tcp::socket>(std::move(pending->socket));
                      {
                        std::lock_guard<std::mutex> lock(mutex_);
                        accepted_[key] = std::move(socket);
                      }
                      cv_.notify_all();
                    });
}

Status TcpListener::take(int from_rank, int stream_index, Deadline deadline, std::unique_ptr<tcp::socket>* out) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::pair<int, int> key{from_rank, stream_index};
  for (;;) {
    if (aborted_) return aborted("communicator aborted while waiting for rank " + std::to_string(from_rank));
    auto it = accepted_.find(key);
    if (it != accepted_.end()) {
      *out = std::move(it->second);
      accepted_.erase(it);
      claimed_.insert(key);
      return Status::ok();
    }
    if (cv_.wait_until(lock, deadline.time_point()) == std::cv_status::timeout && deadline.expired()) {
      return timeout_error("rank " + std::to_string(from_rank) + " did not connect to this rank in time");
    }
  }
}

void TcpListener::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }
  cv_.notify_all();
}

}  // namespace kolo
