// What each rank tells the others at the rendezvous (RankFacts,
// transport/routes.h), as text in the store, and this rank's own host.
#pragma once

#include <string>

#include "common/status.h"
#include "transport/routes.h"

namespace kolo {

std::string encode_rank_facts(const RankFacts& facts);
// Refuses (INTERNAL, naming the record) what encode_rank_facts cannot
// have written: another rank's damaged record fails cleanly.
Status decode_rank_facts(const std::string& text, RankFacts* facts);
// What tells this rank's host apart: host_name (empty: the machine's
// name), the network, IPC and PID namespaces, and after the last '/' the
// kernel's boot id (ranks of one kernel share its cores).
std::string local_host(const std::string& host_name);

}  // namespace kolo
