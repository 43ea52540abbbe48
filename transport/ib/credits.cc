#include "transport/ib/credits.h"

#include <string>

namespace kolo {

CreditWindow::CreditWindow(int window) : window_(window < 2 ? 2 : window), available_(window_) {}

Status CreditWindow::on_credits_returned(int n) {
  if (n < 0 || available_ + n > window_) {
    return transport_error("peer returned " + std::to_string(n) + " credits with " + std::to_string(available_) +
                           " of " + std::to_string(window_) + " available: flow control out of step");
  }
  available_ += n;
  return Status::ok();
}

int CreditWindow::take_owed() {
  int n = owed_;
  owed_ = 0;
  return n;
}

}  // namespace kolo
