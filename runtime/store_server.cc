#include "runtime/store_server.h"

#include <chrono>
#include <future>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "common/hmac.h"
#include "common/log.h"
#include "runtime/store_protocol.h"
#include "transport/socket/address.h"

namespace kolo {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string simple_reply(StoreReply code, const std::string& text = "") {
  MessageWriter w;
  w.u8(static_cast<uint8_t>(code));
  w.str(text);
  return w.finish();
}

}  // namespace

class StoreServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(StoreServer* server, tcp::socket socket)
      : server_(server), socket_(std::move(socket)), hello_timer_(socket_.get_executor()) {}

  void start() {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    remote_ = ec ? "unknown peer" : format_endpoint(ep);
    auto self = shared_from_this();
    hello_timer_.expires_after(std::chrono::seconds(10));
    hello_timer_.async_wait([self](const boost::system::error_code& tec) {
      if (tec || self->introduced_) return;
      KOLO_WARN("rendezvous store dropped " << self->remote_ << ": no handshake within 10 s");
      self->close();
    });
    // Open with the challenge; the client's hello must answer it.
    nonce_ = random_bytes(kNonceBytesStore);
    MessageWriter challenge;
    challenge.u32(kStoreMagic);
    challenge.str(nonce_);
    reply(challenge.finish());
  }

  static constexpr size_t kNonceBytesStore = 16;
  std::string nonce_;

  void reply(const std::string& message) {
    auto self = shared_from_this();
    out_ = seal_ ? seal_->seal(message) : message;
    asio::async_write(socket_, asio::buffer(out_), [self](const boost::system::error_code& ec, size_t) {
      if (ec) return self->close();
      self->read_length();
    });
  }

  void close() {
    if (!closed_) {
      closed_ = true;
      if (introduced_) server_->forget_client(this);
    }
    boost::system::error_code ec;
    socket_.close(ec);
    hello_timer_.cancel();
  }

  // For shutdown: a final reply, written synchronously (it is small), then close.
  void reply_and_close(const std::string& message) {
    boost::system::error_code ec;
    asio::write(socket_, asio::buffer(seal_ ? seal_->seal(message) : message), ec);
    close();
  }

  bool introduced_ = false;
  std::unique_ptr<StoreSeal> seal_;  // after the handshake of a job with KOLO_ENCRYPT=1
  const std::string& remote() const { return remote_; }

 private:
  void read_length() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(len_buf_, 4), [self](const boost::system::error_code& ec, size_t) {
      if (ec) return self->close();
      uint32_t n = 0;
      for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(self->len_buf_[i]) << (8 * i);
      if (n == 0 || n > kStoreMaxMessage) {
        KOLO_WARN("rendezvous store dropped " << self->remote_ << ": message length " << n << " out of bounds");
        return self->close();
      }
      // Before a valid hello, only a hello-sized message is believable.
      if (!self->introduced_ && n > 128) {
        KOLO_WARN("rendezvous store dropped " << self->remote_ << ": oversized first message");
        return self->close();
      }
      self->body_.resize(n);
      asio::async_read(self->socket_, asio::buffer(self->body_), [self](const boost::system::error_code& rec, size_t) {
        if (rec) return self->close();
        if (self->seal_ && !self->seal_->open(self->len_buf_, &self->body_)) {
          KOLO_WARN("rendezvous store dropped " << self->remote_
                                                << ": a sealed message failed to authenticate (tampered on the way?)");
          return self->close();
        }
        self->server_->handle(self, self->body_);
      });
    });
  }

  StoreServer* server_;
  bool closed_ = false;
  tcp::socket socket_;
  asio::steady_timer hello_timer_;
  std::string remote_;
  unsigned char len_buf_[4];
  std::string body_;
  std::string out_;
};

struct StoreServer::Waiter {
  Waiter(asio::io_context& io) : timer(io) {}
  std::shared_ptr<Session> session;
  std::vector<std::string> keys;
  asio::steady_timer timer;
};

StoreServer::StoreServer(uint64_t job_id, int world_size, std::string secret, bool encrypt)
    : job_id_(job_id), world_size_(world_size), secret_(std::move(secret)), encrypt_(encrypt) {}

StoreServer::~StoreServer() {
  // Ranks still waiting on keys get their timeout answer (naming the keys
  // that never arrived) now, rather than a closed connection when this
  // process goes away: they must learn which rank was missing.
  std::promise<void> flushed;
  asio::post(io_, [this, &flushed] {
    boost::system::error_code ec;
    if (acceptor_) acceptor_->close(ec);
    for (const auto& w : waiters_) {
      std::string missing;
      for (const auto& k : w->keys) {
        if (!map_.count(k)) missing += (missing.empty() ? "" : " ") + k;
      }
      w->timer.cancel();
      w->session->reply_and_close(simple_reply(StoreReply::kTimeout, missing));
    }
    waiters_.clear();
    flushed.set_value();
  });
  if (thread_.joinable()) {
    flushed.get_future().wait_for(std::chrono::seconds(2));
  }
  io_.stop();
  if (thread_.joinable()) thread_.join();
  // Sessions and waiters hold sockets bound to io_; release them before it goes.
  waiters_.clear();
}

std::vector<StoreServer::Client> StoreServer::clients() const {
  std::lock_guard<std::mutex> lock(clients_mu_);
  std::vector<Client> out;
  for (const auto& entry : clients_) out.push_back(entry.second);
  return out;
}

void StoreServer::forget_client(const Session* session) {
  int rank = -1;
  {
    std::lock_guard<std::mutex> lock(clients_mu_);
    auto it = clients_.find(session);
    if (it == clients_.end()) return;
    rank = it->second.rank;
    clients_.erase(it);
  }
  // A shrink that drops the ranks it finds dead learns here, at once, of a
  // process that has ended (its connection closed), rather than waiting for
  // its deadline. Posted: a close may come from a walk of the waiters that
  // set_key would change under it.
  if (rank >= 0) asio::post(io_, [this, rank] { set_key(departed_key(rank), "1"); });
}

void StoreServer::stop_accepting() {
  auto closed = std::make_shared<std::promise<void>>();  // shared: the wait below may give up first
  std::future<void> done = closed->get_future();
  asio::post(io_, [this, closed] {
    boost::system::error_code ec;
    if (acceptor_) acceptor_->close(ec);
    closed->set_value();
  });
  if (thread_.joinable()) done.wait_for(std::chrono::seconds(2));
}

Status StoreServer::start(const std::string& host, int port) {
  KOLO_RETURN_IF_ERROR(listen(host, port));
  serve();
  return Status::ok();
}

Status StoreServer::listen(const std::string& host, int port) {
  tcp::endpoint ep;
  KOLO_RETURN_IF_ERROR(resolve_endpoint(host, port, &ep));
  boost::system::error_code ec;
  acceptor_ = std::make_unique<tcp::acceptor>(io_);
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return transport_error("cannot serve the rendezvous store on " + format_endpoint(ep) + ": " + ec.message() +
                           " (is the port taken, or the address not this host's?)");
  }
  port_ = acceptor_->local_endpoint(ec).port();
  return Status::ok();
}

void StoreServer::serve() {
  if (thread_.joinable()) return;
  accept_next();
  thread_ = std::thread([this] { io_.run(); });
}

void StoreServer::accept_next() {
  acceptor_->async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (!acceptor_->is_open()) return;
    if (!ec) std::make_shared<Session>(this, std::move(socket))->start();
    accept_next();
  });
}

void StoreServer::handle(const std::shared_ptr<Session>& session, const std::string& body) {
  StoreRequest q;
  Status parsed = parse_store_request(body, &q);
  if (!parsed.is_ok()) {
    KOLO_WARN("rendezvous store dropped " << session->remote() << ": " << parsed.message());
    return session->close();
  }
  if (!session->introduced_) {
    if (q.op != StoreOp::kHello || q.magic != kStoreMagic) {
      KOLO_WARN("rendezvous store dropped " << session->remote() << ": not a kolo client");
      return session->close();
    }
    if (!store_macs_equal(store_hello_mac(secret_, session->nonce_, q.job, q.rank, q.nonce, q.sealed), q.mac)) {
      KOLO_WARN("rendezvous store rejected " << session->remote()
                                             << ": authentication failed (it does not know KOLO_SECRET)");
      // Said, not just closed: a client takes a silent close for a store going away.
      return session->reply_and_close(simple_reply(StoreReply::kRejected, "this job has another KOLO_SECRET"));
    }
    if (q.job != job_id_) return session->reply(simple_reply(StoreReply::kOtherJob, "another job"));
    if (static_cast<int>(q.rank) >= world_size_) {
      KOLO_WARN("rendezvous store rejected " << session->remote() << ": rank " << q.rank << " is beyond the world");
      return session->reply_and_close(
          simple_reply(StoreReply::kRejected,
                       "rank " + std::to_string(q.rank) + " is beyond the world size " + std::to_string(world_size_)));
    }
    if ((q.sealed != 0) != encrypt_) {
      KOLO_WARN("rendezvous store rejected " << session->remote() << ": KOLO_ENCRYPT differs");
      return session->reply_and_close(simple_reply(
          StoreReply::kRejected, std::string("this job's store ") + (encrypt_ ? "encrypts" : "does not encrypt") +
                                     " (KOLO_ENCRYPT=" + (encrypt_ ? "1" : "0") +
                                     "); set KOLO_ENCRYPT alike on every rank"));
    }
    std::unique_ptr<StoreSeal> seal;
    if (encrypt_) {
      Status sealed = StoreSeal::create(secret_, session->nonce_, q.nonce, /*server_side=*/true, &seal);
      if (!sealed.is_ok()) return session->reply_and_close(simple_reply(StoreReply::kRejected, sealed.message()));
    }
    session->introduced_ = true;
    {
      std::lock_guard<std::mutex> lock(clients_mu_);
      clients_[session.get()] = Client{static_cast<int>(q.rank), session->remote()};
    }
    // The OK goes in the clear; everything after it is sealed.
    session->reply(simple_reply(StoreReply::kOk, store_ack_mac(secret_, session->nonce_, q.nonce)));
    session->seal_ = std::move(seal);
    return;
  }
  switch (q.op) {
    case StoreOp::kSet:
      set_key(q.key, q.value);
      return session->reply(simple_reply(StoreReply::kOk));
    case StoreOp::kSetIfAbsent:
      if (!map_.count(q.key)) set_key(q.key, q.value);
      return session->reply(simple_reply(StoreReply::kOk, map_[q.key]));
    case StoreOp::kGet: {
      auto w = std::make_shared<Waiter>(io_);
      w->session = session;
      w->keys = std::move(q.keys);
      if (try_answer(*w)) return;
      waiters_.insert(w);
      w->timer.expires_after(std::chrono::milliseconds(q.timeout_ms));
      w->timer.async_wait([this, w](const boost::system::error_code& ec) {
        if (ec || !waiters_.count(w)) return;
        waiters_.erase(w);
        std::string missing;
        for (const auto& k : w->keys) {
          if (!map_.count(k)) missing += (missing.empty() ? "" : " ") + k;
        }
        w->session->reply(simple_reply(StoreReply::kTimeout, missing));
      });
      return;
    }
    default:
      KOLO_WARN("rendezvous store dropped " << session->remote() << ": a second hello");
      return session->close();
  }
}

bool StoreServer::try_answer(Waiter& w) {
  for (const auto& k : w.keys) {
    if (!map_.count(k)) return false;
  }
  MessageWriter out;
  out.u8(static_cast<uint8_t>(StoreReply::kOk));
  out.u32(static_cast<uint32_t>(w.keys.size()));
  for (const auto& k : w.keys) out.str(map_[k]);
  w.session->reply(out.finish());
  return true;
}

void StoreServer::set_key(const std::string& key, const std::string& value) {
  map_[key] = value;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (try_answer(**it)) {
      (*it)->timer.cancel();
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace kolo
