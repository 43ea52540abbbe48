#include "transport/fifo.h"

#include <deque>

#include <gtest/gtest.h>

namespace kolo {
namespace {

TEST(Fifo, KeepsOrderAcrossWrapAndGrowth) {
  Fifo<int> fifo;
  std::deque<int> expected;
  int next = 0;
  // Queue lengths that wrap the array many times and grow it while wrapped.
  for (int round = 0; round < 200; ++round) {
    const int push = round % 7 + (round % 50 == 0 ? 20 : 0);
    const int pop = round % 5;
    for (int i = 0; i < push; ++i) {
      fifo.push_back(next);
      expected.push_back(next++);
    }
    for (int i = 0; i < pop && !expected.empty(); ++i) {
      ASSERT_EQ(fifo.front(), expected.front());
      fifo.pop_front();
      expected.pop_front();
    }
    ASSERT_EQ(fifo.size(), expected.size());
  }
  while (!expected.empty()) {
    ASSERT_EQ(fifo.front(), expected.front());
    fifo.pop_front();
    expected.pop_front();
  }
  EXPECT_TRUE(fifo.empty());
}

TEST(Fifo, FrontIsWritable) {
  Fifo<int> fifo;
  fifo.push_back(1);
  fifo.push_back(2);
  fifo.front() += 10;
  EXPECT_EQ(fifo.front(), 11);
  fifo.pop_front();
  EXPECT_EQ(fifo.front(), 2);
}

}  // namespace
}  // namespace kolo
