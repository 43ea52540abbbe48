// One TCP listener per bind address per process, shared by every TCP
// transport (every communicator) in the process, as Gloo shares a
// transport::Device across contexts: it owns the Asio io_context, the thread
// that runs it and one listening socket on one ephemeral port. Every
// transport publishes the listener's address and registers an endpoint under
// its communicator's id (the Hello's job_id) and its rank.
//
// The listener challenges each accepted connection and reads its Hello (see
// handshake.h) within a short deadline, finds the endpoint by (job_id,
// to_rank) - to_rank because in tests many ranks of one job are threads of
// one process and so share the listener - checks the Hello against that
// endpoint's expectation and secret, and parks the socket in that endpoint
// until its data path claims it with take(). A stranger that sends nothing,
// garbage or a Hello for no endpoint of this process is logged and dropped;
// it never blocks a job, because the handshake runs asynchronously per
// connection. The listener closes (thread, acceptor) when its last user lets
// go of it.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/deadline.h"
#include "common/status.h"
#include "transport/handshake.h"

namespace kolo {

class TcpListener;

// One communicator's rank on a listener: what its Hellos must say, its secret,
// and the sockets accepted for it. Each endpoint aborts on its own.
class TcpEndpoint {
 public:
  TcpEndpoint(HelloExpectation expectation, std::string secret, double handshake_timeout_s)
      : expectation_(expectation), secret_(std::move(secret)), handshake_timeout_s_(handshake_timeout_s) {}

  TcpEndpoint(const TcpEndpoint&) = delete;
  TcpEndpoint& operator=(const TcpEndpoint&) = delete;

  // Waits for the accepted socket of (from_rank, stream_index), and gives
  // its handshake's link_salt (handshake.h) for its keys.
  Status take(int from_rank, int stream_index, Deadline deadline, std::unique_ptr<boost::asio::ip::tcp::socket>* out,
              std::string* salt);
  // Whether streams 0..streams-1 of from_rank are all accepted and not yet
  // taken: take() then waits for none of them.
  bool has_all(int from_rank, int streams);

  // Wakes every waiting take() of this endpoint (only) with ABORTED.
  void abort();

 private:
  friend class TcpListener;
  // A verdict on a link before its socket is parked: a second connection
  // for a link already parked or in use is refused.
  Status check_new_link(const std::pair<int, int>& key);
  void park(const std::pair<int, int>& key, std::unique_ptr<boost::asio::ip::tcp::socket> socket, std::string salt);

  const HelloExpectation expectation_;
  const std::string secret_;  // the job secret; never logged
  const double handshake_timeout_s_;

  std::mutex mutex_;
  std::condition_variable cv_;
  struct Accepted {
    std::unique_ptr<boost::asio::ip::tcp::socket> socket;
    std::string salt;
  };
  std::map<std::pair<int, int>, Accepted> accepted_;
  std::set<std::pair<int, int>> claimed_;  // links already handed to the data path
  bool aborted_ = false;
};

class TcpListener {
 public:
  // The process's listener on `bind_address`, opened (listening on an
  // ephemeral port, its thread started) if no one holds it now.
  static Status get(const std::string& bind_address, std::shared_ptr<TcpListener>* out);

  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // Registers the endpoint of rank `expectation.rank` of communicator
  // `expectation.job_id`. The id is meant to be unique to a communicator,
  // but a re-formed one (survivors of a failure, same job) may open beside
  // the old: a Hello then goes to the newest endpoint that accepts it and
  // has not that link yet.
  void listen(const HelloExpectation& expectation, const std::string& secret, double handshake_timeout_s,
              std::shared_ptr<TcpEndpoint>* out);
  // Unregisters it: later Hellos for it are turned away; sockets parked in
  // it close when the caller lets go of it.
  void unlisten(const std::shared_ptr<TcpEndpoint>& endpoint);

  // The address peers should connect to, and the context that runs on the
  // listener's thread (dialing sockets are created on it too).
  boost::asio::ip::tcp::endpoint endpoint() const { return endpoint_; }
  boost::asio::io_context& io() { return io_; }
  size_t endpoint_count();

 private:
  struct Pending;
  using Key = std::pair<uint64_t, int>;  // (communicator id, rank)

  TcpListener() = default;
  Status start(const boost::asio::ip::address& bind_address);
  void accept_next();
  void on_hello(const std::shared_ptr<Pending>& pending);
  std::vector<std::shared_ptr<TcpEndpoint>> find(const Hello& hello);
  double handshake_timeout_s();

  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  boost::asio::ip::tcp::endpoint endpoint_;
  std::thread thread_;

  std::mutex mutex_;  // guards endpoints_
  std::map<Key, std::vector<std::shared_ptr<TcpEndpoint>>> endpoints_;  // oldest first
};

}  // namespace kolo
