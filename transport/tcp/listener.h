// Accepts connections from peers on a background Asio thread, challenges
// each one and checks its Hello (see handshake.h) within a short deadline,
// and parks the accepted sockets until
// the data path claims them with take(). A stranger that sends nothing,
// garbage or a Hello from another job is logged and dropped; it never blocks
// the job, because the handshake runs asynchronously per connection.
#pragma once

#include <condition_variable>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/deadline.h"
#include "common/status.h"
#include "transport/handshake.h"

namespace kolo {

class TcpListener {
 public:
  // `io` must outlive the listener; the listener runs it on its own thread.
  TcpListener(boost::asio::io_context& io, HelloExpectation expectation, std::string secret,
              double handshake_timeout_s);
  ~TcpListener();

  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // Binds to `bind_address` on an ephemeral port and starts accepting.
  Status start(const boost::asio::ip::address& bind_address);

  // The address peers should connect to.
  boost::asio::ip::tcp::endpoint endpoint() const { return endpoint_; }

  // Waits for the accepted socket of (from_rank, stream_index).
  Status take(int from_rank, int stream_index, Deadline deadline, std::unique_ptr<boost::asio::ip::tcp::socket>* out);

  // Wakes every waiting take() with ABORTED.
  void abort();

 private:
  struct Pending;
  void accept_next();
  void on_hello(const std::shared_ptr<Pending>& pending);

  boost::asio::io_context& io_;
  HelloExpectation expectation_;
  std::string secret_;  // the job secret; never logged
  double handshake_timeout_s_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  boost::asio::ip::tcp::endpoint endpoint_;
  std::thread thread_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, std::unique_ptr<boost::asio::ip::tcp::socket>> accepted_;
  std::set<std::pair<int, int>> claimed_;  // links already handed to the data path
  bool aborted_ = false;
};

}  // namespace kolo
