// The data path to one peer: one or more TCP sockets ("streams") carrying
// framed messages in both directions at once. Message k in each direction
// travels on stream k % streams, so several streams share the load while each
// stays an ordered byte stream that needs no reassembly.
//
// Asio sets the connections up; once handed to a pair they are plain
// descriptors. A socket left on the device's io_context stays in its
// epoll set, and the device thread running that context was woken by
// every message that arrived (one needless wake-up per message, measured
// with strace: as many epoll_wait returns as messages received).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <poll.h>

#include "common/status.h"
#include "transport/frame.h"
#include "transport/fifo.h"
#include "transport/any_source.h"
#include "transport/tcp/sealed_stream.h"
#include "transport/transport.h"

namespace kolo {

class TcpPair {
 public:
  // With `checksum`, every payload carries a CRC-32C that the receiver
  // verifies before it reports the message done. `socket_buffer_bytes` is
  // the fixed SO_RCVBUF the streams were given, 0 when the kernel sizes it.
  // `sealed`: one per stream when the connection is encrypted
  // (KOLO_ENCRYPT), else empty.
  TcpPair(int peer_rank, std::string peer_address, std::vector<std::unique_ptr<boost::asio::ip::tcp::socket>> streams,
          bool checksum, int socket_buffer_bytes, std::vector<std::unique_ptr<SealedStream>> sealed = {});
  ~TcpPair();
  TcpPair(const TcpPair&) = delete;
  TcpPair& operator=(const TcpPair&) = delete;

  int peer() const { return peer_; }
  const std::string& peer_address() const { return peer_address_; }

  void post_send(const void* data, size_t bytes, uint64_t tag, Request* request);
  void post_recv(void* data, size_t bytes, uint64_t tag, Request* request);

  bool has_pending() const { return pending_ > 0; }

  // Shuts both directions of every socket so the peer sees the connection
  // end at once. Safe from any thread: it touches only the descriptors,
  // which stay open until the pair is destroyed.
  void shutdown();
  int first_fd() const { return streams_.empty() ? -1 : streams_.front().fd; }

  // Moves as many bytes as the sockets take without blocking. Adds the number
  // of requests completed to *completed and sets *moved when any byte moved.
  Status pump(int* completed, bool* moved);

  // Appends pollfds for the streams that wait on I/O. Before sleeping it
  // also tells the kernel how many bytes are worth waking up for.
  void collect_pollfds(std::vector<struct pollfd>* fds);

  // Receiving from any peer (Transport::peek): the header of the next
  // message no posted receive takes, read with MSG_PEEK, so its bytes stay
  // in the socket for the receive that takes it (on the stream that
  // message travels on). Only while no receive is pending.
  Status peek(Arrival* next);
  // Appends the pollfd that wakes a sleep when peek() has news (the next
  // message's stream, woken once a whole header is there or the peer
  // closes); `fds` positions map back through note_watch_events.
  void collect_watch_pollfd(std::vector<struct pollfd>* fds);
  // After the poll: the stream's revents. A hang-up with less than a header
  // there means that header never comes: peek() reports the peer closed.
  void note_watch_events(short revents);

  // Words for timeout messages: what this pair still waits for.
  std::string describe_pending() const;

  // "rank 3 (10.0.0.4:5123)".
  std::string name() const;

 private:
  // A posted request and how far it has got on the wire. The caller's
  // Request holds only what every transport needs; the frame is TCP's.
  struct Message {
    Request* request;
    uint64_t seq;        // its place in its direction's sequence
    FrameHeader header;  // a send's, written before its payload; a receive's, as read
    size_t moved;        // header and payload bytes moved so far
  };

  struct Stream {
    int fd = -1;  // owned, non-blocking; fixed at construction, so any thread may read it
    Fifo<Message> sends;
    Fifo<Message> recvs;
    int rcvlowat = 1;  // SO_RCVLOWAT currently set on the socket
    std::unique_ptr<SealedStream> sealed;  // KOLO_ENCRYPT: its records' keys and progress
  };

  void set_wakeup_threshold(Stream& s, int bytes);

  Status pump_sends(Stream& s, int* completed, bool* moved);
  Status pump_recvs(Stream& s, int* completed, bool* moved);
  Status pump_sealed_sends(Stream& s, int* completed, bool* moved);
  Status pump_sealed_recvs(Stream& s, int* completed, bool* moved);
  // The payload's checksum (KOLO_CHECKSUM), once the whole message is in.
  Status check_payload(const Message& m) const;
  void complete(Fifo<Message>& queue, int* completed);
  // `error` is an errno value, 0 when the peer closed the connection.
  Status lost(const std::string& doing, int error) const;

  int peer_;
  std::string peer_address_;
  bool checksum_;
  int max_wakeup_bytes_;  // the largest SO_RCVLOWAT worth asking for
  std::vector<Stream> streams_;
  uint64_t next_send_seq_ = 0;
  uint64_t next_recv_seq_ = 0;
  int pending_ = 0;
  bool hung_up_ = false;  // the peer shut its sending side (seen by a watch); what it sent before is still read
};

}  // namespace kolo
