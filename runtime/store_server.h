// The rendezvous store served by rank 0: a key-value map on a background
// Asio thread. Clients first say who they are (job and rank); then they set
// keys and get keys, a get waiting on the server until every key exists or
// its timeout passes, so nobody polls. A connection that does not introduce
// itself as a member of the job within a few seconds is dropped.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/status.h"

namespace kolo {

// The key the server sets when world rank `rank`'s connection closes: its
// process ended (or left the store).
inline std::string departed_key(int rank) { return "departed/" + std::to_string(rank); }

class StoreServer {
 public:
  // `secret` (KOLO_SECRET, may be empty) authenticates every client;
  // `encrypt` (KOLO_ENCRYPT) seals every message after the handshake
  // (StoreSeal, store_protocol.h), and takes only clients that seal too.
  StoreServer(uint64_t job_id, int world_size, std::string secret, bool encrypt = false);
  ~StoreServer();

  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // Binds host:port (port 0 = ephemeral) and starts serving.
  Status start(const std::string& host, int port);
  // The two halves of start. Between them the port is taken and clients'
  // connections wait in its backlog, but no thread runs: a rank's standby
  // store (rendezvous.h) costs one socket until it must serve.
  Status listen(const std::string& host, int port);
  void serve();
  bool serving() const { return thread_.joinable(); }
  int port() const { return port_; }
  bool encrypt() const { return encrypt_; }

  // Closes the listening socket (its port is free at once); the clients
  // already connected are still served.
  void stop_accepting();
  // The members of the job connected now: each one's rank and address.
  struct Client {
    int rank;
    std::string endpoint;
  };
  std::vector<Client> clients() const;

 private:
  class Session;
  struct Waiter;
  void accept_next();
  void handle(const std::shared_ptr<Session>& session, const std::string& body);
  void set_key(const std::string& key, const std::string& value);
  bool try_answer(Waiter& w);
  void forget_client(const Session* session);

  uint64_t job_id_;
  int world_size_;
  std::string secret_;  // never logged
  bool encrypt_;
  boost::asio::io_context io_;
  // Keeps io_.run() going with no session and the acceptor closed (after
  // stop_accepting), so that the destructor's last words still run.
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> keep_running_{io_.get_executor()};
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::thread thread_;
  int port_ = 0;
  std::map<std::string, std::string> map_;
  std::set<std::shared_ptr<Waiter>> waiters_;
  mutable std::mutex clients_mu_;
  std::map<const Session*, Client> clients_;  // the introduced sessions
};

}  // namespace kolo
