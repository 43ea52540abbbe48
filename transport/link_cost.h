// What one message over a link costs, as the cost model (collectives/
// cost_model.h) prices schedules: each kind of transport says what its
// links cost (TransportKind::link_cost).
#pragma once

namespace kolo {

// One message of b bytes over one link: latency_s + b / bytes_per_s.
struct LinkCost {
  double latency_s = 0;    // a message's fixed cost: the wire, wake-ups, system calls
  double bytes_per_s = 1;  // one direction; between hosts, the host's network link, shared by its ranks
  double seconds(double bytes) const { return latency_s + bytes / bytes_per_s; }
};

}  // namespace kolo
