#include "transport/ib/credits.h"

#include <gtest/gtest.h>

namespace kolo {
namespace {

TEST(CreditWindow, SenderNeverFillsMoreSlotsThanTheReceiverHas) {
  CreditWindow w(4);
  int sent = 0;
  while (w.can_send()) {
    w.on_send();
    ++sent;
  }
  EXPECT_EQ(sent, 3);  // the fourth slot is kept for credit returns
  EXPECT_TRUE(w.can_send_credit_return());
  w.on_send();
  EXPECT_FALSE(w.can_send_credit_return());
  ASSERT_TRUE(w.on_credits_returned(2).is_ok());
  EXPECT_TRUE(w.can_send());
  EXPECT_EQ(w.available(), 2);
}

TEST(CreditWindow, ReturningMoreThanWasSpentIsAProtocolError) {
  CreditWindow w(4);
  w.on_send();
  EXPECT_TRUE(w.on_credits_returned(1).is_ok());
  Status s = w.on_credits_returned(1);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_NE(s.message().find("out of step"), std::string::npos);
  EXPECT_FALSE(w.on_credits_returned(-1).is_ok());
}

TEST(CreditWindow, ReceiverReturnsCreditsPiggybackedOrAtHalfTheWindow) {
  CreditWindow w(8);
  for (int i = 0; i < 3; ++i) w.on_consumed();
  EXPECT_FALSE(w.should_return_explicitly());
  w.on_consumed();
  EXPECT_TRUE(w.should_return_explicitly());
  EXPECT_EQ(w.take_owed(), 4);
  EXPECT_EQ(w.owed(), 0);
  EXPECT_EQ(w.take_owed(), 0);
}

// Two ranks: a sends data as fast as its credits allow; b consumes slowly
// and sends nothing but credit returns. b's slots never overflow, a's
// never do either, and all the data gets through.
TEST(CreditWindow, TwoRanksNeverOverflowNorDeadlock) {
  const int window = 4;
  CreditWindow a(window), b(window);
  int unconsumed_at_b = 0, unconsumed_at_a = 0;
  int returned_to_a = 0;  // credits riding on b's message in flight to a
  int delivered = 0;
  for (int step = 0; step < 100000 && delivered < 1000; ++step) {
    if (a.can_send()) {
      a.on_send();
      ASSERT_LE(++unconsumed_at_b, window);
    }
    if (step % 3 == 0 && unconsumed_at_b > 0) {  // b consumes slowly
      --unconsumed_at_b;
      ++delivered;
      b.on_consumed();
    }
    if (b.should_return_explicitly() && b.can_send_credit_return() && unconsumed_at_a == 0) {
      b.on_send();
      returned_to_a = b.take_owed();
      ASSERT_LE(++unconsumed_at_a, window);
    }
    if (unconsumed_at_a > 0) {  // a consumes b's message: its credits come back, and a owes one
      --unconsumed_at_a;
      ASSERT_TRUE(a.on_credits_returned(returned_to_a).is_ok());
      a.on_consumed();
      // a's next data message carries what it owes b.
      ASSERT_TRUE(b.on_credits_returned(a.take_owed()).is_ok());
    }
  }
  EXPECT_EQ(delivered, 1000);
}

}  // namespace
}  // namespace kolo
