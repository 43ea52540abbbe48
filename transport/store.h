// The rendezvous store as the transports see it: a key-value map shared by
// all ranks of a job. Transports publish their addresses in it and look up
// their peers'. runtime/ provides the TCP implementation served by rank 0;
// tests use an in-memory one.
#pragma once

#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace kolo {

class Store {
 public:
  virtual ~Store() = default;

  virtual Status set(const std::string& key, const std::string& value) = 0;

  // Sets key to value unless it is already set; either way returns the value
  // the key holds afterwards in *current. The first writer wins, which lets
  // ranks agree on one thing (say, the job's first failure) without a leader.
  virtual Status set_if_absent(const std::string& key, const std::string& value, Deadline deadline,
                               std::string* current) = 0;

  // Waits until every key exists, then returns their values in order. On
  // timeout the error lists the keys still missing.
  virtual Status get(const std::vector<std::string>& keys, Deadline deadline, std::vector<std::string>* values) = 0;

  // From now on, get() (also one already waiting) returns `why`: the
  // communicator that uses this store was aborted. Default: waits run on.
  virtual void cancel(const Status& why) {}

  Status get_one(const std::string& key, Deadline deadline, std::string* value) {
    std::vector<std::string> values;
    KOLO_RETURN_IF_ERROR(get({key}, deadline, &values));
    *value = std::move(values[0]);
    return Status::ok();
  }
};

}  // namespace kolo
