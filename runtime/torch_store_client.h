// kolo's Store over the c10d TCPStore that torchrun's agent serves on
// MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE). The workers join it
// as clients and never bind the port themselves. Every key is prefixed (the
// run id and restart count, so a restarted job starts clean). The store has
// no authentication. Thread-safe: one request at a time.
//
// Waits: a wait that reaches its deadline closes the connection (the
// server forgets the waiter with it) and the next request opens a new one.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "runtime/torch_store_protocol.h"
#include "transport/store.h"

namespace kolo {

class TorchStoreClient : public Store {
 public:
  // Connects to host:port, retrying refused connections until the deadline.
  // `timeout_s` bounds later requests that take no deadline (set).
  static Status connect(const std::string& host, int port, const std::string& key_prefix, double timeout_s,
                        Deadline deadline, std::unique_ptr<TorchStoreClient>* out);

  Status set(const std::string& key, const std::string& value) override;
  // COMPARE_SET with an empty expected value: sets an absent key, else
  // leaves it; *current is the value it holds afterwards. (An existing key
  // whose value is empty would be overwritten: kolo never stores empty values
  // under a key it uses this way.)
  Status set_if_absent(const std::string& key, const std::string& value, Deadline deadline,
                       std::string* current) override;
  Status get(const std::vector<std::string>& keys, Deadline deadline, std::vector<std::string>* values) override;

  Status add(const std::string& key, int64_t delta, Deadline deadline, int64_t* sum);
  Status check(const std::vector<std::string>& keys, Deadline deadline, bool* all_set);

  // This end's address on the connection to the store.
  std::string local_address() const;
  const std::string& address() const { return server_; }

 private:
  TorchStoreClient() = default;
  Status open(Deadline deadline);
  // Sends a request and, unless the query has none, reads its reply. Any
  // failure closes the connection.
  Status request(TorchQuery query, const std::string& body, const std::string& what, Deadline deadline,
                 TorchReply* reply);
  Status wait_keys(const std::vector<std::string>& keys, Deadline deadline);
  std::string where(const std::string& key) const;

  std::mutex mutex_;
  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::ip::tcp::socket> socket_;
  std::string host_;
  int port_ = 0;
  std::string server_;  // host:port, for messages
  std::string prefix_;
  double timeout_s_ = 30;
  std::string local_address_ = "127.0.0.1";
};

}  // namespace kolo
