// How a communicator comes up, in two steps with small interfaces:
//  - meet (a world only): tell the others where this rank runs and what
//    each kind of transport offers here, learn theirs, place the ranks on
//    hosts;
//  - bring_up (every communicator: a world, a sibling, a split, a shrink's
//    or a grow's): the transport to each peer, how to wait, what the links
//    cost and where the hosts are, the connections the algorithms need,
//    the shared arenas.
// What bring_up makes is a Wiring, which the communicator then only reads
// (topology_of, its schedules' context). Nothing here knows the
// communicator: the membership and the settings are all it is given.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/choice_memo.h"
#include "collectives/hierarchical.h"
#include "common/status.h"
#include "runtime/config.h"
#include "runtime/membership.h"
#include "runtime/tuning.h"
#include "transport/kind.h"
#include "transport/shared_arena.h"
#include "transport/transport.h"

namespace kolo {

// What a communicator's collectives run over once it is up.
struct Wiring {
  // To every peer: one kind of transport, or a PerPeerTransport over
  // several (transport/routes.h). Null in a world of one.
  std::unique_ptr<Transport> transport;
  // Per rank: the kind that moves device buffers to it directly (CUDA
  // IPC), or nullptr where they are staged through `transport`.
  std::vector<const TransportKind*> device_routes;
  // Memory every rank maps, where one kind that maps memory reaches every
  // peer (arena_allreduce.h); else null.
  std::unique_ptr<SharedArena> arena;
  // Memory this host's ranks map, where the ranks span several hosts with
  // two or more on each: the hierarchical schedules' phases within a host.
  std::unique_ptr<SharedArena> host_arena;
  // Where the ranks run, where the hierarchical schedules apply and
  // KOLO_ALGORITHM allows them; else null.
  std::unique_ptr<HostLayout> hosts;
  // The hosts' count and shape and what the links cost (tuning.h).
  CostShape shape;
  // How this rank waits for bytes, and the pipeline's unit (tuning.h).
  Pacing pacing;
};

// The rendezvous proper, for a world: publishes this rank's facts
// (RankFacts: its host, each transport kind's offer, its standby store),
// reads every rank's into world->facts (naming the ranks that never
// arrive, by the timeout), and places the ranks (world->place, with the
// launcher's local rank and size where >= 0). *opened: per kind (in
// transport_kinds() order), the transport its offer opened, for bring_up.
Status meet(const Config& config, int given_local_rank, int given_local_size, Membership* world,
            std::vector<std::unique_ptr<DirectTransport>>* opened);

// meet's halves, for a grow (whose old ranks tell the facts they told
// before): this rank's facts, with what each kind of transport offers here
// (of those carrying host memory, only the one KOLO_TRANSPORT forces, which
// must then be usable); and telling them to the others and learning
// theirs into world->facts.
Status offer(const Config& config, const Membership& world, RankFacts* mine,
             std::vector<std::unique_ptr<DirectTransport>>* opened);
Status exchange_facts(const Config& config, const RankFacts& mine, Membership* world);

struct BringUpPlan {
  // Where its keys go in the store: "" for a communicator the caller made,
  // "engine/" for the engine's sibling.
  std::string store_prefix;
  // Connect every pair of ranks (alltoall needs it), rather than only the
  // peers the algorithms exchange with.
  bool full_mesh = false;
  // What meet's offers opened (a world's); empty otherwise.
  std::vector<std::unique_ptr<DirectTransport>> opened;
};

// Everything after the membership is settled. Collective over the
// membership's ranks; bounded by KOLO_TIMEOUT_S.
Status bring_up(const Config& config, const Thresholds& thresholds, const Membership& world, BringUpPlan plan,
                Wiring* out);

// Connects every pair of the membership's ranks over `transport` (peers
// already connected are no-ops), within KOLO_TIMEOUT_S: a full mesh for
// alltoall, made on first use.
Status connect_every_pair(const Config& config, const Membership& world, Transport* transport);
// Connects to each of `peers` (in any order: the accepting side's listener
// takes connections in the background), all within timeout_s.
Status connect_peers(Transport* transport, const std::vector<int>& peers, double timeout_s);

// What the settings allow the algorithm tables (KOLO_SMALL_ALLREDUCE_BYTES,
// KOLO_ALGORITHM). Points into config, which must outlive it.
Thresholds thresholds_of(const Config& config);

// The algorithm tables' view of a wiring (collectives/algorithm.h).
// choices: the communicator's memo of recent choices, or nullptr.
Topology topology_of(const Wiring& wiring, const Membership& world, const Thresholds& thresholds,
                     ChoiceMemo* choices);

// One line: what allreduce runs at each size, and why (rank 0 logs it).
std::string describe_choices(const Wiring& wiring, const Membership& world, const Config& config,
                             const Thresholds& thresholds);

// What a transport kind is given to open itself among the membership's
// ranks, with its keys under store_prefix.
TransportContext transport_context(const Config& config, const Membership& world, const std::string& store_prefix);

}  // namespace kolo
