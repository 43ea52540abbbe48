// Credit-based flow control for one queue pair, as one rank keeps it. The
// peer has `window` receive slots for this rank's messages (posted receive
// requests, or staging segments for RDMA writes) and this rank as many for
// the peer's. This rank spends one credit per message it sends, so it never
// fills a slot the peer has not consumed and reposted; it counts the slots
// it consumed itself and owes the peer those credits, returned piggybacked
// on its next message or, once half the window is owed, explicitly.
//
// One credit is kept back for explicit returns: with both ranks out of
// ordinary credits, each can still tell the other it has room, so the pair
// never deadlocks.
#pragma once

#include "common/status.h"

namespace kolo {

class CreditWindow {
 public:
  // window >= 2: one slot for data, one kept for credit returns.
  explicit CreditWindow(int window);

  int window() const { return window_; }

  // Sender: an ordinary message may go out (a credit beyond the reserve).
  bool can_send() const { return available_ > 1; }
  // Sender: an explicit credit return may go out (the reserve included).
  bool can_send_credit_return() const { return available_ > 0; }
  void on_send() { --available_; }
  // Sender: the peer returned n credits; more than were spent is a protocol error.
  Status on_credits_returned(int n);
  int available() const { return available_; }

  // Receiver: one slot was consumed and is ready to be filled again.
  void on_consumed() { ++owed_; }
  // Receiver: the credits to piggyback on the next outgoing message (then owed no more).
  int take_owed();
  // Receiver: so many are owed that they should go back without waiting for a message to ride on.
  bool should_return_explicitly() const { return owed_ * 2 >= window_; }
  int owed() const { return owed_; }

 private:
  int window_;
  int available_;
  int owed_ = 0;
};

}  // namespace kolo
