// Rank 0's store server outlives rank 0's communicators. The other ranks
// may still need it after rank 0 is done with its own: a communicator's
// engine connects through it at its first named operation, which on a
// split without rank 0 may come long after rank 0 finished, and ranks
// learning of a failure read its record there. A server handed over here
// serves the clients it has (it takes no new ones, so its port is free at
// once) until they have all left or its deadline passes, on a thread of
// its own; the process's exit waits for that, so a rank 0 that finishes
// first does not take the store away from under the others.
#pragma once

#include <memory>

#include "common/deadline.h"

namespace kolo {

class StoreServer;

void serve_until_clients_leave(std::unique_ptr<StoreServer> server, Deadline deadline);

}  // namespace kolo
