// The job's first failure as the rendezvous store keeps it (under
// "failure"): the rank that failed first, its code and its story. Every
// rank that fails later reports this root cause beside its own view
// (Communicator::fail), so the record of one rank is read by all.
#pragma once

#include <string>

#include "common/status.h"

namespace kolo {

struct FailureRecord {
  int rank = -1;
  Code code = Code::kOk;
  std::string message;
};

// "rank|code|message"; the message is free text.
std::string encode_failure(const FailureRecord& record);
// Refuses (INTERNAL) what encode_failure cannot have written: a rank that
// is not a non-negative number, a code that is no failure.
Status decode_failure(const std::string& text, FailureRecord* record);

}  // namespace kolo
