// The TCP transport over Boost.Asio. Connection set-up (listen, accept,
// handshake) runs on the background Asio thread of the process's TcpListener,
// which every TcpTransport on the same bind address shares (one listening
// port, one thread); the data path runs on the
// thread that calls progress(), driving non-blocking sockets directly so a
// message costs no thread hand-off. When nothing can move it spins briefly
// (yielding the core if ranks outnumber cores), then sleeps in poll().
#pragma once

#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "transport/pair_table.h"
#include "transport/progress_loop.h"
#include "transport/store.h"
#include "transport/tcp/listener.h"
#include "transport/tcp/pair.h"
#include "transport/any_source.h"
#include "transport/transport.h"

namespace kolo {

struct TcpOptions {
  // Identifies the communicator (not only the job) on the process's shared
  // listener: every rank of one communicator has the same; two communicators
  // of one process (the engine's sibling, a split) differ.
  uint64_t job_id = 0;
  std::string bind_address = "127.0.0.1";  // the address peers reach this rank at
  std::string store_prefix = "tcp/";       // keys this transport owns in the store
  int streams_per_peer = 1;                // parallel sockets to each peer
  int socket_buffer_bytes = 0;             // SO_SNDBUF/SO_RCVBUF; 0 keeps kernel autotuning
  std::string congestion = "auto";         // KOLO_TCP_CONGESTION (transport/socket/congestion.h)
  double handshake_timeout_s = 10;
  bool checksum = false;                   // CRC-32C on every payload (KOLO_CHECKSUM)
  bool encrypt = false;                    // every stream sealed (KOLO_ENCRYPT; sealed_stream.h)
  std::string secret;                      // job secret for the handshake (KOLO_SECRET); may be empty
};

class TcpTransport final : public DirectTransport, public AnySource {
 public:
  // Listens and publishes this rank's address in the store.
  static Status create(Store* store, int rank, int size, const TcpOptions& options,
                       std::unique_ptr<TcpTransport>* out);
  ~TcpTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "tcp"; }

  Status connect(int peer, Deadline deadline) override;
  Status post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) override;
  Status post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) override;
  Status progress(Deadline deadline) override;
  void abort() override;
  void interrupt() override;
  void set_polling(int spin_us, bool yield) override { loop_.set_polling(spin_us, yield); }
  Status pump(Pumped* pumped) override;
  // poll() on the sockets of the peers with requests in flight.
  Status sleep(Deadline deadline, Pumped* pumped) override;
  bool has_pending() override;
  std::string describe_pending() override;
  // Receiving from any peer: a message's header waits in its socket until
  // a receive reads it, so peek() reads it there with MSG_PEEK. Of a pair,
  // the lower rank dials and the higher accepts: try_connect dials at once
  // (the peer's listener accepts in the background, whatever the peer is
  // doing), or, on the accepting side, takes the connection once the
  // peer's dial has been accepted.
  AnySource* any_source() override { return this; }
  bool can_peek(int) const override { return true; }
  Status try_connect(int peer, Deadline deadline, bool* connected) override;
  Status peek(int peer, Arrival* next) override;
  Status watch(const std::vector<int>& peers) override;
  bool watching() const override { return !watched_.empty(); }

  // The shared listener's address, which this rank publishes.
  std::string listen_address() const;

  // The file descriptor of the first socket to `peer`, or -1 before
  // connect(). For a transport that keeps a TCP connection beside its own
  // data path (RDMA) to learn the moment a peer process ends: the socket is
  // then never used for data, and its end (EOF, reset) is the news.
  int socket_fd(int peer);

 private:
  TcpTransport(Store* store, int rank, int size, const TcpOptions& options);
  Status start();
  // Dials one stream and does its handshake; *salt: its link_salt.
  Status connect_stream(int peer, const std::string& address, int stream_index, Deadline deadline,
                        std::unique_ptr<boost::asio::ip::tcp::socket>* out, std::string* salt);
  uint32_t hello_flags() const;

  Store* store_;
  int rank_;
  int size_;
  TcpOptions options_;
  std::shared_ptr<TcpListener> listener_;      // shared with the process's other TCP transports
  std::shared_ptr<TcpEndpoint> endpoint_;  // this rank of this communicator on the listener
  PairTable<TcpPair> pairs_{"TCP"};
  std::vector<TcpPair*> active_;  // pairs, in a vector for the hot loop
  std::vector<TcpPair*> watched_;  // watch()'s peers
  ProgressLoop loop_;             // progress(), abort() and interrupt()
  std::vector<struct pollfd> pollfds_;
};

}  // namespace kolo
